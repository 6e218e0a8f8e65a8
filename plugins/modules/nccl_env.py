#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nccl_env
short_description: NCCL settings in /etc/nccl.conf with a RoCE v2 + IPv4 GID index, and RDMA host names in /etc/hosts
version_added: 0.1.0
description:
  - Writes the C(KEY=VALUE) lines NCCL reads from C(/etc/nccl.conf) at init
    (C(NCCL_IB_HCA), C(NCCL_SOCKET_IFNAME), C(NCCL_NET_GDR_LEVEL), C(NCCL_IB_GID_INDEX) and O(extra)
    settings). Lines it does not manage (comments, other keys) are kept as they are.
  - O(gid_index) decides the GID NCCL uses on RoCE. An integer is checked against the GID table
    of every listed HCA port (read from sysfs) and refused, with the table, unless it holds a
    RoCE v2 GID with an IPv4 address on each. V(discover) writes the index that holds the RoCE v2
    + IPv4 GID (the same on all listed ports, or an error). V(auto) writes no index and pins
    C(NCCL_IB_ADDR_FAMILY=AF_INET), C(NCCL_IB_ADDR_RANGE) and C(NCCL_IB_ROCE_VERSION_NUM=2) so
    that NCCL 2.21 and later select the GID themselves.
  - Switching between an index and V(auto) removes the keys of the other way.
  - With O(hosts_entries), the same run also writes a block of C(IP NAME...) lines between two marker
    lines in O(hosts_path) (C(/etc/hosts)), the text C(ansible.builtin.blockinfile) writes with the same
    marker, so one module call per guest sets both NCCL and the names of the tenants' RDMA addresses.
    Both files are decided (and every input checked) before either is written; each is written whole
    and atomically.
  - With O(topo_links), the same call writes the NCCL topology file O(topo_file) (C(NCCL_TOPO_FILE)) of the guest's GPUs and RDMA
    NIC with the GPU host's link speeds and distance, and names it in O(path).
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
options:
  path:
    description: The file NCCL reads, a host path under O(root). Its directory is created when missing.
    type: path
    default: /etc/nccl.conf
  ib_hca:
    description:
      - HCAs NCCL may use, in NCCL's own C(NCCL_IB_HCA) syntax; the items are joined with commas and
        written as C(NCCL_IB_HCA) as they were checked (blanks around entries dropped). An empty entry is refused.
      - Each entry is C(DEVICE) or C(DEVICE:PORT) (C(mlx5_0:1), C(rxe0)). An optional C(^) before the
        first entry makes the list an exclude list; a second optional C(=) makes the names exact
        (without it NCCL takes each name as a prefix, so C(mlx5_1) also selects C(mlx5_10)). For example
        C(=mlx5_0:1), C([=mlx5_0:1, mlx5_1:1]), C(^=mlx5_1), C(mlx5). See NCCL's documentation of
        C(NCCL_IB_HCA) (U(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-hca)).
      - The GID tables of the ports NCCL would use under this list are the ones O(gid_index) is checked
        against; every device or port a (non-excluding) entry names must exist. When empty, every RDMA
        port of the host is checked and C(NCCL_IB_HCA) is left as it is.
    type: list
    elements: str
    default: []
  socket_ifname:
    description:
      - C(NCCL_SOCKET_IFNAME), the interface(s) for bootstrap and socket traffic, in NCCL's syntax, names
        separated by commas without blanks (C(eth0), C(^docker,lo), C(=eth0,eth1)). Left as it is when not given.
    type: str
  net_gdr_level:
    description: C(NCCL_NET_GDR_LEVEL) (C(LOC), C(PIX), C(PXB), C(PHB), C(SYS) or 0-5), how far GPUDirect RDMA may reach. Left as it is when not given.
    type: str
  ib_pci_relaxed_ordering:
    description:
      - C(NCCL_IB_PCI_RELAXED_ORDERING) (C(0) off, C(1) on, C(2) on where the verbs library can, NCCL's default). Relaxed ordering
        matters with ACS and ATS, that is inside VMs, little on bare metal (NVIDIA/nccl#1205); the guest stage gives C(1) in tenant
        guests. Left as it is when not given.
    type: str
  gid_index:
    description:
      - An integer GID index (validated), V(discover) or V(auto) (see the description).
    type: str
    default: discover
  addr_range:
    description:
      - With O(gid_index=auto), the IPv4 network (CIDR) NCCL picks GIDs from (C(NCCL_IB_ADDR_RANGE)).
        Derived from the address of the RoCE netdev (C(ip -j -4 addr)) when not given.
    type: str
  nccl_version:
    description:
      - NCCL version of the tenant's workloads. O(gid_index=auto) is refused below 2.21, which
        has no GID auto-selection.
    type: str
  extra:
    description:
      - Other C(KEY=VALUE) settings (C(NCCL_IB_TC), C(NCCL_DEBUG)); a null value removes the key.
      - C(NCCL_IB_HCA), C(NCCL_SOCKET_IFNAME) and C(NCCL_NET_GDR_LEVEL) given here are checked as O(ib_hca),
        O(socket_ifname) and O(net_gdr_level) are (and refused when that option is set too).
      - The file's managed lines are always written C(KEY=VALUE) with an LF ending, also in a CRLF file
        (NCCL reads a line up to its newline only).
    type: dict
    default: {}
  hosts_entries:
    description:
      - Lines of the marked block in O(hosts_path), in this order, one C(IP NAME...) line per entry.
      - An empty list removes the block. When not given, O(hosts_path) is not read or changed.
      - An address that is not IPv4 or IPv6, a name that is not a host name (letters, digits, hyphens,
        underscores, dot-separated labels) or a name given twice is refused before anything is changed.
    type: list
    elements: dict
    suboptions:
      ip:
        description: The address (IPv4 or IPv6), written in its canonical form.
        type: str
        required: true
      names:
        description: The names of the address (at least one).
        type: list
        elements: str
        required: true
  hosts_path:
    description:
      - The hosts file of O(hosts_entries), a host path under O(root). Created when missing and there
        are entries to write.
      - Another file than O(path), and not a directory O(path) would be made in; the call is refused otherwise.
    type: path
    default: /etc/hosts
  hosts_marker:
    description:
      - The marker lines of the block, with C({mark}) replaced by C(BEGIN) and C(END). Lines outside the
        markers are kept as they are; without both markers the block is appended at the end of the file.
      - The default is the marker of the role C(gpuvirt.tenancy.guest_rdma), whose earlier
        C(ansible.builtin.blockinfile) block this module takes over unchanged.
    type: str
    default: "# {mark} gpuvirt.tenancy guest_rdma"
  topo_links:
    description:
      - The GPU host's PCIe link facts of this tenant, C({level, gpu, nic, switch, missing, unknown}) as the tenants stage gives
        them (C(gpuvirt_guest_pci_links), the module tenant_domain's RV(gpuvirt.tenancy.tenant_domain#module:pci_links)) - C(level)
        the plan's distance between the tenant's GPUs and VFs (C(PIX), C(PXB), C(PHB), C(NODE), C(SYS)), C(gpu), C(nic) and
        C(switch) each C({link_speed, link_width}) (a speed string NCCL reads, C(16.0 GT/s PCIe) or C(16 GT/s); 1-32 lanes) or
        null where the host cannot give it, C(unknown) why per link, C(missing) why the host could not give the distance.
        With C(PXB) also C(shared_switch), C(gpu_switch) and C(nic_switch), the links of the host switch the GPUs and PFs
        share and of each side's switch below it, in the same form (optional keys, null where unknown).
      - With it, the NCCL topology file O(topo_file) (C(NCCL_TOPO_FILE), NCCL's XML topology format) maps the guest's NVIDIA GPUs
        and the PCI functions of the HCAs NCCL is given (O(ib_hca)) by their guest bus IDs, grouped by guest NUMA node, under the
        guest bridge they share (or a bridge only the file names, C(ffff:ff:NN.0), as the topology files published for VMs do)
        where the host has them under one switch (C(PIX)), for C(PXB) under three bridges only the file names (the shared
        switch, holding one bridge for the GPUs' switch and one for the VFs' switch, each with its host switch's link, which
        NCCL reads as PXB), directly under their NUMA node for C(PHB), C(NODE) and C(SYS), each
        with the host's link speed and width where it is known; an element whose link is unknown (or differs between the
        tenant's GPUs, or PFs) has none, and NCCL reads it in the guest as it does without a file (NVML for a GPU, sysfs for
        the others). NCCL reads the rest (CPU affinity, device IDs, the NICs' ports) in the guest. C(NCCL_TOPO_FILE) in
        O(path) is set to it.
      - No file is written, never a failure - a warning and the result's RV(topology) say why - where the distance is
        C(missing), the guest has no NVIDIA GPU or no PCI RDMA function (soft-RoCE), C(PXB) lacks the link of one of its three
        host switch levels, C(PIX) needs a bridge only the file names whose host link is unknown, or the guest's NUMA nodes
        cannot show the host's distance. The file this module wrote before (its first line an XML comment that marks it) is then
        removed and C(NCCL_TOPO_FILE) with it, in check mode said and diffed only; a file it did not write is kept, and said.
    type: dict
  topo_file:
    description: The NCCL topology file of O(topo_links), a host path under O(root), written whole and atomically; its directory is
      created when missing. Another file than O(path) and O(hosts_path).
    type: path
    default: /etc/nccl-topo.xml
  backup:
    description: Keep a copy of each file (O(path), O(hosts_path)) before changing it.
    type: bool
    default: false
requirements:
  - C(ip) (iproute2) on the host for O(gid_index=auto) without O(addr_range).
seealso:
  - module: gpuvirt.tenancy.mlx_rocev2
    description: Its O(gpuvirt.tenancy.mlx_rocev2#module:nccl_env) option runs this module in the same call.
"""

EXAMPLES = r"""
- name: NCCL on one ConnectX port, with the RoCE v2 + IPv4 GID index read from the GID table
  gpuvirt.tenancy.nccl_env:
    ib_hca: [mlx5_0:1]
    socket_ifname: ens3np0
    net_gdr_level: PHB
    gid_index: discover
  register: __nccl

- name: Field practice forces index 3 everywhere; refused with the table where it is not RoCE v2 + IPv4
  gpuvirt.tenancy.nccl_env:
    ib_hca: [mlx5_0:1, mlx5_1:1]
    gid_index: 3

- name: Let NCCL >= 2.21 choose the GID within the tenant network
  gpuvirt.tenancy.nccl_env:
    ib_hca: [mlx5_0:1]
    gid_index: auto
    addr_range: 192.168.64.0/24
    nccl_version: "2.23.4"
    extra:
      NCCL_IB_TC: 106

- name: Exactly port 1 of mlx5_0 and mlx5_1 (NCCL's = prefix), not mlx5_10 and up
  gpuvirt.tenancy.nccl_env:
    ib_hca: ["=mlx5_0:1", "mlx5_1:1"]

- name: NCCL settings and the tenants' RDMA addresses in /etc/hosts in one call
  gpuvirt.tenancy.nccl_env:
    ib_hca: [mlx5_0:1]
    gid_index: 3
    hosts_entries:
      - {ip: 192.168.83.10, names: [tenant-a-rdma]}
      - {ip: 192.168.84.10, names: [tenant-b-rdma]}

- name: In a tenant guest, the NCCL topology file of its GPU and VF with the host's links (given by the tenants stage)
  gpuvirt.tenancy.nccl_env:
    ib_hca: [mlx5_0:1]
    net_gdr_level: PIX
    ib_pci_relaxed_ordering: "1"
    topo_links: "{{ gpuvirt_guest_pci_links }}"

- name: A per-tenant file (two tenants simulated on one lab VM)
  gpuvirt.tenancy.nccl_env:
    path: /etc/nccl.conf.d/tenant-a.conf
    ib_hca: [rxeA:1]
    gid_index: discover
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
  sample: /etc/nccl.conf
gid_index:
  description: The GID index written, or C(auto).
  returned: success
  type: raw
  sample: 3
settings:
  description: The managed settings as written.
  returned: success
  type: dict
  sample: {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3"}
removed:
  description: Keys removed from the file (settings of the other GID mode, or O(extra) keys set to null).
  returned: success
  type: list
  elements: str
  sample: ["NCCL_IB_ADDR_FAMILY"]
gpudirect:
  description:
    - Whether NCCL can use GPUDirect RDMA in this guest, read only (never a failure; a warning says what is missing and the fix).
    - C(status) is C(peermem) (a peer-memory module loaded, as NCCL's C(ncclIbGdrSupport) checks), C(dma_buf) (none, but a
      kernel of 5.12 or later whose RDMA core imports DMA-BUF, which NCCL tries at init and which needs the NVIDIA open kernel
      modules), C(missing) (neither) or C(no_driver) (no NVIDIA driver loaded, nothing checked).
  returned: success
  type: dict
  sample: {"status": "no_driver", "driver": false, "peermem": null, "kernel": "6.8.0-45-generic", "dma_buf_kernel": true,
           "message": "GPUDirect RDMA not checked: no NVIDIA driver is loaded in this guest (/sys/module/nvidia absent); ..."}
topology:
  description:
    - With O(topo_links), the NCCL topology file - C(path), C(written) (false - no file, C(reason) says why), the guest bus IDs of the
      C(gpus) and C(nics) read in the guest, the host C(level) between them, C(from_guest) the links the file leaves to NCCL's
      own reading in the guest and why, C(removed) (the file this module wrote removed, no file being made) and C(kept) (why
      a file it did not write is left).
  returned: success, with O(topo_links)
  type: dict
  sample: {"path": "/etc/nccl-topo.xml", "written": true, "gpus": ["0000:06:00.0"], "nics": ["0000:07:00.0"], "level": "PIX",
           "reason": null, "from_guest": {"gpu": "the host model has no max_link_speed/max_link_width for 0000:10:00.0"},
           "removed": false, "kept": null}
gid_table:
  description: The GID tables of the checked ports, like show_gids.
  returned: success
  type: list
  elements: dict
  sample:
    - {"device": "mlx5_0", "port": 1, "index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0b00:0048",
       "type": "RoCE v2", "netdev": "ens3np0", "ipv4": "11.0.0.72"}
backup_file:
  description: The backup copy of O(path), when O(backup) made one.
  returned: changed and backup
  type: str
  sample: /etc/nccl.conf.2026-01-01@10:00:00~
hosts_path:
  description: The hosts file of O(hosts_entries).
  returned: when O(hosts_entries) is given
  type: str
  sample: /etc/hosts
hosts_lines:
  description: The lines of the marked block as written (without the markers); empty when the block was removed.
  returned: when O(hosts_entries) is given
  type: list
  elements: str
  sample: ["192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]
hosts_backup_file:
  description: The backup copy of O(hosts_path), when O(backup) made one.
  returned: the hosts file changed and backup
  type: str
  sample: /etc/hosts.2026-01-01@10:00:00~
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nccl_conf

MODULE_ARGS = nccl_conf.MODULE_ARGS


def main(host=None):
    run_module(MODULE_ARGS, nccl_conf.nccl_env, host=host)


if __name__ == "__main__":
    main()
