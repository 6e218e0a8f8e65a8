#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: mlx_rocev2
short_description: ConnectX firmware settings, RDMA-CM default RoCE mode and the GID table
version_added: 0.1.0
description:
  - Firmware part (O(device), O(firmware)) reads C(mlxconfig -d DEVICE -e q) (or C(mstconfig)), compares
    each wanted parameter with its Next Boot value and sets only those that differ with
    C(-y -d DEVICE set KEY=VALUE ...). The firmware loads Next Boot values at the next power
    cycle; RV(reboot_required) is true while any parameter's Next Boot differs from Current.
  - RDMA part (O(rdma_device), O(port), O(default_roce_mode)) sets the RDMA-CM default RoCE mode
    through configfs C(/sys/kernel/config/rdma_cm/DEVICE/ports/PORT/default_roce_mode) (the
    directory is created for the change and removed after it, as configfs requires), loads
    C(rdma_cm) when needed, and persists the mode with a udev rule that reapplies it whenever the
    device appears (at boot through udev coldplug, and on hotplug).
  - Returns the GID table of the RDMA device the way C(show_gids) prints it, read from sysfs
    (C(/sys/class/infiniband/DEV/ports/PORT/gids/N), C(gid_attrs/types/N), C(gid_attrs/ndevs/N));
    empty slots, on which the kernel answers EINVAL, are skipped.
  - Errors that change nothing are raised for a missing tool, an unknown PCI device, a parameter
    the firmware does not know, and a kernel in lockdown (Secure Boot), which forbids the direct
    PCI access the tool needs.
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
attributes:
  check_mode:
    details:
      - Reading the RoCE mode needs the configfs directory of the device; it is created and
        removed again, also in check mode (configfs keeps no state from it).
options:
  device:
    description:
      - PCI address of the ConnectX physical function (C(0000:81:00.0) or C(81:00.0)), or an MST
        device path (C(/dev/mst/mt4119_pciconf0)).
      - Needed for O(firmware); when O(rdma_device) is not given the RDMA device is derived from
        this PF (C(/sys/bus/pci/devices/ADDR/infiniband/)).
    type: str
  firmware:
    description:
      - Firmware parameters as mlxconfig names them, with the wanted values, for example
        C(SRIOV_EN=true), C(NUM_OF_VFS=8), C(LINK_TYPE_P1=ETH).
      - Booleans match C(True(1)) / C(False(0)); numbers match the number shown in brackets or the
        plain value; names match the text before the brackets (case-insensitive).
    type: dict
    default: {}
  tool:
    description:
      - Firmware tool. V(auto) uses C(mlxconfig) (NVIDIA MFT) when present, else C(mstconfig) (mstflint).
    type: str
    choices: [auto, mlxconfig, mstconfig]
    default: auto
  rdma_device:
    description:
      - RDMA device name (C(mlx5_0), C(rxe0)). Derived from O(device) or O(netdev_mac) when not given.
    type: str
  netdev_mac:
    description:
      - Inside a tenant, the MAC the GPU host set on the tenant's VF; without O(rdma_device), the RDMA device is the one on
        the netdev that carries it (its PCI function's, for a ConnectX VF; else the one whose GID table names the netdev, for
        soft-RoCE on it), returned with RV(netdev). A nested O(nccl_env) with no C(ib_hca) then gets that device and O(port).
    type: str
  port:
    description: Port of the RDMA device.
    type: int
    default: 1
  default_roce_mode:
    description:
      - RDMA-CM default RoCE mode of the port. V(v2) is RoCE v2 (UDP/IP, routable).
      - V(unchanged) leaves the mode alone (firmware only, or only read the GID table of O(rdma_device)).
    type: str
    choices: [v1, v2, unchanged]
    default: v2
  persist:
    description: Write a udev rule (and its helper script) that reapplies O(default_roce_mode) when the device appears.
    type: bool
    default: true
  persist_rules_dir:
    description: Directory of the udev rule C(70-gpuvirt-roce-DEVICE.rules), a host path under O(root).
    type: path
    default: /etc/udev/rules.d
  persist_script:
    description: Path of the helper script the udev rule runs, a host path under O(root).
    type: path
    default: /usr/local/sbin/gpuvirt-roce-mode
  nccl_env:
    description:
      - Options of M(gpuvirt.tenancy.nccl_env) (all but O(root), which is this module's), run in this call
        after the RDMA part, so that one round trip sets RoCE v2 and writes NCCL's settings (and the hosts
        block of O(gpuvirt.tenancy.nccl_env#module:hosts_entries)). They are checked against nccl_env's own
        argument spec before anything changes.
      - O(gpuvirt.tenancy.nccl_env#module:gid_index=discover) with O(gpuvirt.tenancy.nccl_env#module:ib_hca)
        naming O(rdma_device) and O(port) writes this host's own RoCE v2 + IPv4 GID index.
      - The result is in RV(nccl_env).
    type: dict
  nccl_env_write:
    description:
      - V(true) writes the files of O(nccl_env) as nccl_env would (in check mode it reports them); C(changed)
        and the diff include them, and an error in them fails the call before anything changes.
      - V(false) decides them and writes nothing, for a caller that decides the write across hosts. RV(nccl_env)
        then tells whether each file would change with these options and what the hosts block holds now
        (compare it with the lines wanted later), and an error in them is returned in RV(nccl_env.error)
        instead of failing the call. The role C(gpuvirt.tenancy.guest_rdma) uses this (docs/rdma_nccl.md).
    type: bool
    default: true
  packages:
    description:
      - The packages the host needs for RDMA, per OS family (C(Debian) and C(RedHat), each a list of names; C(default)
        for a family not listed). The host's
        family's names that are not installed (by C(dpkg-query) or C(rpm)) are returned in RV(packages); nothing is
        installed here (the play installs those, with M(ansible.builtin.package), only when some are missing).
      - Left out, no package is looked at.
    type: dict
requirements:
  - C(mlxconfig) (NVIDIA MFT) or C(mstconfig) (mstflint) on the host for O(firmware).
  - C(modprobe) when C(rdma_cm) must be loaded.
notes:
  - An IPv4 address on the RDMA netdev is what gives the IPv4-mapped GID (C(::ffff:a.b.c.d)); the
    index it gets depends on the order in which addresses arrive, so read it from RV(roce_v2_ipv4_index)
    rather than assuming 3.
seealso:
  - module: gpuvirt.tenancy.nccl_env
"""

EXAMPLES = r"""
- name: SR-IOV with 8 VFs and Ethernet link in the ConnectX firmware, RoCE v2 as RDMA-CM default
  gpuvirt.tenancy.mlx_rocev2:
    device: "0000:81:00.0"
    firmware:
      SRIOV_EN: true
      NUM_OF_VFS: 8
      LINK_TYPE_P1: ETH
    default_roce_mode: v2
  register: __mlx

- name: Inside a tenant guest, RoCE v2 on a soft-RoCE device and its GID table
  gpuvirt.tenancy.mlx_rocev2:
    rdma_device: rxe0
    port: 1
  register: __rdma

- name: Show the index of the RoCE v2 + IPv4 GID
  ansible.builtin.debug:
    msg: "{{ __rdma.roce_v2_ipv4_index['rxe0']['1'] }}"

- name: RoCE v2 and NCCL's settings with this guest's own RoCE v2 + IPv4 GID index, in one call
  gpuvirt.tenancy.mlx_rocev2:
    rdma_device: mlx5_0
    port: 1
    nccl_env:
      ib_hca: [mlx5_0:1]
      gid_index: discover
      socket_ifname: ens3np0

- name: Decide NCCL's file and read the hosts block without writing them (the write waits for the fleet)
  gpuvirt.tenancy.mlx_rocev2:
    rdma_device: rxe0
    nccl_env_write: false
    nccl_env:
      ib_hca: [rxe0:1]
      gid_index: discover
      hosts_entries: []
  register: __planned

- name: Firmware only, with mstflint's tool
  gpuvirt.tenancy.mlx_rocev2:
    device: "81:00.0"
    tool: mstconfig
    firmware:
      SRIOV_EN: true
    default_roce_mode: unchanged
"""

RETURN = r"""
firmware:
  description: Each wanted firmware parameter with its Default, Current and Next Boot value as the tool shows them.
  returned: when firmware is given
  type: dict
  sample: {"SRIOV_EN": {"default": "False(0)", "current": "False(0)", "next": "True(1)"}}
firmware_changes:
  description: Parameters set (or, in check mode, to be set) and their values.
  returned: when device is given
  type: dict
  sample: {"NUM_OF_VFS": "8"}
firmware_tool:
  description: Path of the firmware tool used.
  returned: when device is given
  type: str
  sample: /usr/bin/mstconfig
pending_parameters:
  description: Parameters whose Next Boot value differs from Current (loaded at the next power cycle).
  returned: when device is given
  type: list
  elements: str
  sample: ["NUM_OF_VFS", "SRIOV_EN"]
reboot_required:
  description: True while a firmware parameter's Next Boot value differs from Current.
  returned: always
  type: bool
  sample: true
rdma_device:
  description: The RDMA device handled.
  returned: when an RDMA device is handled
  type: str
  sample: mlx5_0
packages:
  description: With O(packages), the host's OS family, the names wanted there and those not installed.
  returned: with O(packages)
  type: dict
  sample: {"family": "Debian", "wanted": ["rdma-core", "ibverbs-utils"], "missing": ["ibverbs-utils"]}
verbs:
  description:
    - Whether the verbs library (libibverbs, what NCCL and the C(ibv_*) programs open) sees RV(rdma_device), read with
      C(ibv_devices). The kernel can hold a device (C(rdma link) shows it) that verbs do not see, when the device's
      userspace provider is missing (Debian C(ibverbs-providers), RHEL C(libibverbs)).
    - C(devices) and C(seen) are null where C(ibv_devices) is not installed (C(ibverbs-utils), C(libibverbs-utils)).
  returned: when an RDMA device is handled
  type: dict
  sample: {"tool": "/usr/bin/ibv_devices", "devices": ["rxe0"], "seen": true}
netdev:
  description: With O(netdev_mac), the netdev that carries the MAC.
  returned: with O(netdev_mac)
  type: str
  sample: enp7s0
port:
  description: The port handled.
  returned: when an RDMA device is handled
  type: int
  sample: 1
default_roce_mode:
  description: RDMA-CM default RoCE mode of the port after the run (C(v1) or C(v2)).
  returned: when default_roce_mode is set
  type: str
  sample: v2
gid_table:
  description: The GID table of every port of the RDMA device, like show_gids; empty slots are left out.
  returned: when an RDMA device is handled
  type: list
  elements: dict
  sample:
    - {"device": "mlx5_0", "port": 1, "index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0b00:0048",
       "type": "RoCE v2", "netdev": "ens3np0", "ipv4": "11.0.0.72"}
roce_v2_ipv4_index:
  description: Per device and port (as a string), the lowest index holding a RoCE v2 GID with an IPv4 address, or null.
  returned: when an RDMA device is handled
  type: dict
  sample: {"mlx5_0": {"1": 3}}
gpudirect:
  description: With O(nccl_env), whether NCCL can use GPUDirect RDMA in this guest, as RV(gpuvirt.tenancy.nccl_env#module:gpudirect) says.
  returned: when nccl_env is given and decided
  type: dict
  sample: {"status": "peermem", "driver": true, "peermem": "/sys/module/nvidia_peermem/version", "kernel": "6.8.0-45-generic",
           "dma_buf_kernel": true, "message": null}
nccl_env:
  description:
    - With O(nccl_env_write=true), the result fields of M(gpuvirt.tenancy.nccl_env) (C(path), C(gid_index),
      C(settings), C(removed), C(gid_table), C(hosts_path), C(hosts_lines), C(topology), the backups).
    - With O(nccl_env_write=false), the fields below (nothing was written), or only RV(nccl_env.error).
  returned: when nccl_env is given
  type: dict
  contains:
    path:
      description: The NCCL file.
      type: str
      sample: /etc/nccl.conf
    gid_index:
      description: The GID index that would be written, or C(auto).
      type: raw
      sample: 3
    settings:
      description: The managed settings as they would be written.
      type: dict
      sample: {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3"}
    removed:
      description: Keys that would be removed from the file.
      type: list
      elements: str
      sample: []
    conf_differs:
      description: Whether the NCCL file would change.
      type: bool
      sample: false
    topology:
      description: With O(gpuvirt.tenancy.nccl_env#module:topo_links), the NCCL topology file as
        RV(gpuvirt.tenancy.nccl_env#module:topology) says it; absent without.
      type: dict
      sample: {"path": "/etc/nccl-topo.xml", "written": false, "gpus": [], "nics": [], "level": null,
               "reason": "the RDMA device rxe0 is not a PCI function (soft-RoCE): NCCL's topology has no NIC to place"}
    topo_differs:
      description: With O(gpuvirt.tenancy.nccl_env#module:topo_links), whether the NCCL topology file would change.
      type: bool
      sample: false
    hosts_path:
      description: The hosts file (with O(gpuvirt.tenancy.nccl_env#module:hosts_entries)).
      type: str
      sample: /etc/hosts
    hosts_differs:
      description: Whether the hosts file would change with the given entries.
      type: bool
      sample: true
    hosts_found:
      description:
        - The lines the marked block holds now (empty without a block), with O(gpuvirt.tenancy.nccl_env#module:hosts_entries).
        - Null for a block in another form than nccl_env writes (CRLF line endings, no lines), which writing any
          lines changes. Entries whose lines equal these leave the hosts file as it is.
      type: list
      elements: str
      sample: ["192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]
    error:
      description: Why nccl_env would fail with these options (the message it fails with); the other fields are then absent.
      type: str
      sample: "gid_index 3 refused: mlx5_0:1 index 3 is RoCE v1 ..."
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.roce import mlx_rocev2

MODULE_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
        device=dict(type="str"),
        firmware=dict(type="dict", default={}),
        tool=dict(type="str", choices=["auto", "mlxconfig", "mstconfig"], default="auto"),
        rdma_device=dict(type="str"),
        netdev_mac=dict(type="str"),
        port=dict(type="int", default=1),
        default_roce_mode=dict(type="str", choices=["v1", "v2", "unchanged"], default="v2"),
        persist=dict(type="bool", default=True),
        persist_rules_dir=dict(type="path", default="/etc/udev/rules.d"),
        persist_script=dict(type="path", default="/usr/local/sbin/gpuvirt-roce-mode"),
        nccl_env=dict(type="dict"),
        nccl_env_write=dict(type="bool", default=True),
        packages=dict(type="dict"),
    ),
)


def main(host=None):
    run_module(MODULE_ARGS, mlx_rocev2, host=host)


if __name__ == "__main__":
    main()
