# -*- coding: utf-8 -*-
"""Host models (the dict of docs/CONTRACTS.md) for the placement planner's tests.

``dgx_a100()`` is built from two real captures of one DGX A100-class server, kept with their
sources in tests/fixtures:

- topo/topo-m_8xa100-sxm4-40gb_10xmlx5_epyc7742-nps4_driver525.txt (``nvidia-smi topo -m``):
  the 8 GPUs, their NUMA nodes, the 10 mlx5 NICs and every GPU/NIC level (PXB/SYS);
- host/lscpu_2x-epyc-7742_nps4_dgx-a100-class.txt (``lscpu``): 8 NUMA nodes (NPS4) and their
  CPU lists, 2 threads per core.

What the captures do not show is filled in here and stated as such: PCI addresses (made up,
one per device), SMT sibling pairs (the k-th CPU of a node's first range with the k-th of its
second range, the Linux numbering on EPYC), memory and hugepages per node, the VFs of each NIC
(class 0x020000), and the NUMA node of a NIC (the node of the GPUs under the same switch;
mlx5_8/9 share a switch with no GPU: unknown, as sysfs numa_node -1 reads).

``lab()`` is the lab VM of DESIGN.md: 2 nodes (CPUs 0-1, 2-3), QEMU's edu device at
0000:82:00.0 and an NVMe PF at 0000:81:00.0 with 4 VFs, both on node 1.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import parse_cpulist

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
TOPO_DGX = os.path.join(FIXTURES, "topo", "topo-m_8xa100-sxm4-40gb_10xmlx5_epyc7742-nps4_driver525.txt")
LSCPU_DGX = os.path.join(FIXTURES, "host", "lscpu_2x-epyc-7742_nps4_dgx-a100-class.txt")


def parse_topo_matrix(path):
    """``nvidia-smi topo -m`` -> (names, {row: {col: level}}, {row: numa node or None}, {NICn: mlx5_n})."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    names = [h for h in lines[0].split() if re.match(r"^(GPU|NIC)\d+$", h)]
    levels, numa, legend = {}, {}, {}
    for line in lines[1:]:
        tokens = line.split()
        match = re.match(r"^\s*(NIC\d+):\s+(\S+)$", line)
        if match:
            legend[match.group(1)] = match.group(2)
            continue
        if not tokens or tokens[0] not in names:
            continue
        values = tokens[1:1 + len(names)]
        levels[tokens[0]] = dict(zip(names, values))
        rest = tokens[1 + len(names):]
        numa[tokens[0]] = int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None
    return names, levels, numa, legend


def parse_lscpu(path):
    """``lscpu`` -> ({node: [cpus]}, threads per core, vendor id)."""
    nodes, threads, vendor = {}, 1, None
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"^NUMA node(\d+) CPU\(s\):\s+(\S+)", line)
            if match:
                nodes[int(match.group(1))] = parse_cpulist(match.group(2))
            match = re.match(r"^Thread\(s\) per core:\s+(\d+)", line)
            if match:
                threads = int(match.group(1))
            match = re.match(r"^Vendor ID:\s+(\S+)", line)
            if match:
                vendor = match.group(1)
    return nodes, threads, vendor


def _hugepages(pages_2m, pages_1g):
    return {"2048kB": {"total": pages_2m, "free": pages_2m}, "1048576kB": {"total": pages_1g, "free": pages_1g}}


def dgx_a100(vfs_per_nic=4, memory_mb=131072, pages_2m=16384, pages_1g=64):
    names, levels, numa, legend = parse_topo_matrix(TOPO_DGX)
    nodes, threads, vendor = parse_lscpu(LSCPU_DGX)
    gpus = [n for n in names if n.startswith("GPU")]
    nics = [n for n in names if n.startswith("NIC")]
    address = {}
    for index, name in enumerate(gpus):
        address[name] = "0000:%02x:00.0" % (0x10 + 0x10 * index)
    for index, name in enumerate(nics):
        address[name] = "0000:%02x:00.0" % (0x18 + 0x10 * index)
    cpus = []
    for node, ids in sorted(nodes.items()):
        ids = sorted(ids)
        per = len(ids) // threads
        for k in range(per):
            siblings = [ids[k + t * per] for t in range(threads)]
            for cpu in siblings:
                cpus.append({"id": cpu, "core_id": siblings[0], "package_id": 0 if node < len(nodes) // 2 else 1,
                             "numa_node": node, "siblings": siblings, "online": True})
    cpus.sort(key=lambda c: c["id"])
    nic_node = {}
    for nic in nics:
        near = [numa[g] for g in gpus if levels[g][nic] in ("PIX", "PXB")]
        nic_node[nic] = near[0] if near else None
    pci = {}
    topo_gpus = []
    for name in gpus:
        addr = address[name]
        pci[addr] = {"address": addr, "vendor_id": "0x10de", "device_id": "0x20b0", "class": "0x030200", "driver": "vfio-pci",
                     "numa_node": numa[name], "iommu_group": None, "sriov_totalvfs": None, "sriov_numvfs": None,
                     "physfn": None, "virtfns": [], "vf_index": None, "netdevs": [], "rdma_devices": [], "upstream": [],
                     "root_bus": None, "is_bridge": False, "model": "A100 SXM4 40GB"}
        topo_gpus.append({"address": addr, "model": "A100 SXM4 40GB", "vendor_id": "0x10de", "device_id": "0x20b0",
                          "numa_node": numa[name], "iommu_group": None, "driver": "vfio-pci"})
    topo_nics = []
    for name in nics:
        addr = address[name]
        bus = int(addr[5:7], 16)
        virtfns = ["0000:%02x:%02x.%d" % (bus, 0, 1 + i) if i < 7 else "0000:%02x:%02x.%d" % (bus, 1 + (i - 7) // 8, (i - 7) % 8)
                   for i in range(vfs_per_nic)]
        pci[addr] = {"address": addr, "vendor_id": "0x15b3", "device_id": "0x101b", "class": "0x020000", "driver": "mlx5_core",
                     "numa_node": nic_node[name], "sriov_totalvfs": 16, "sriov_numvfs": vfs_per_nic, "physfn": None,
                     "virtfns": virtfns, "vf_index": None, "netdevs": [], "rdma_devices": [legend.get(name)], "model": "ConnectX-6"}
        for index, vf in enumerate(virtfns):
            pci[vf] = {"address": vf, "vendor_id": "0x15b3", "device_id": "0x101c", "class": "0x020000", "driver": "vfio-pci",
                       "numa_node": nic_node[name], "physfn": addr, "virtfns": [], "vf_index": index, "model": "ConnectX-6 Virtual Function"}
        topo_nics.append({"address": addr, "model": "ConnectX-6", "vendor_id": "0x15b3", "device_id": "0x101b",
                          "numa_node": nic_node[name], "driver": "mlx5_core", "rdma_devices": [legend.get(name)],
                          "sriov_totalvfs": 16, "sriov_numvfs": vfs_per_nic, "is_vf": False})
    affinity = dict((address[g], dict((address[n], levels[g][n]) for n in nics)) for g in gpus)
    return {
        "root": "/", "cpu_vendor": "amd" if vendor == "AuthenticAMD" else "intel", "cmdline": [],
        "numa_nodes": [{"id": node, "cpus": sorted(ids), "memory_mb": memory_mb, "hugepages": _hugepages(pages_2m, pages_1g),
                        "distances": []} for node, ids in sorted(nodes.items())],
        "cpus": cpus, "pci_devices": pci, "gpus": topo_gpus, "nics": topo_nics, "gpu_nic_affinity": affinity,
        "iommu": {"enabled": True, "groups": {}}, "netdevs": {},
    }


LAB_EDU = "0000:82:00.0"
LAB_PF = "0000:81:00.0"
LAB_VFS = ["0000:81:00.1", "0000:81:00.2", "0000:81:00.3", "0000:81:00.4"]


def lab(pages_2m=(0, 128), vfs=4, cpus_per_node=2):
    """The lab VM: 2 nodes, no SMT, edu (GPU stand-in) and an NVMe SR-IOV PF on node 1
    (lab/lab.py gives each node 4 CPUs; earlier labs had 2, as the captures in tests/fixtures/lab)."""
    per = cpus_per_node
    nodes = {0: list(range(per)), 1: list(range(per, 2 * per))}
    cpus = [{"id": c, "core_id": c, "package_id": c // per, "numa_node": c // per, "siblings": [c], "online": True}
            for c in range(2 * per)]
    virtfns = LAB_VFS[:vfs]
    pci = {
        LAB_EDU: {"address": LAB_EDU, "vendor_id": "0x1234", "device_id": "0x11e8", "class": "0x00ff00", "driver": "vfio-pci",
                  "numa_node": 1, "physfn": None, "virtfns": []},
        LAB_PF: {"address": LAB_PF, "vendor_id": "0x1b36", "device_id": "0x0010", "class": "0x010802", "driver": "nvme",
                 "numa_node": 1, "physfn": None, "virtfns": virtfns, "sriov_totalvfs": 4, "sriov_numvfs": len(virtfns)},
    }
    for index, vf in enumerate(virtfns):
        pci[vf] = {"address": vf, "vendor_id": "0x1b36", "device_id": "0x0010", "class": "0x010802", "driver": "vfio-pci",
                   "numa_node": 1, "physfn": LAB_PF, "virtfns": [], "vf_index": index}
    return {
        "root": "/", "cpu_vendor": "intel", "cmdline": [],
        "numa_nodes": [{"id": n, "cpus": ids, "memory_mb": 2048, "hugepages": _hugepages(pages_2m[n], 0), "distances": []}
                       for n, ids in nodes.items()],
        "cpus": cpus, "pci_devices": pci,
        "gpus": [{"address": LAB_EDU, "model": None, "vendor_id": "0x1234", "device_id": "0x11e8", "numa_node": 1,
                  "iommu_group": None, "driver": "vfio-pci"}],
        "nics": [{"address": LAB_PF, "model": None, "numa_node": 1, "is_vf": False, "sriov_numvfs": len(virtfns)}],
        "gpu_nic_affinity": {LAB_EDU: {LAB_PF: "PHB"}},
        "iommu": {"enabled": True, "groups": {}}, "netdevs": {},
    }


def tenant(name, vcpus=4, memory_mb=4096, gpus=0, vfs=0, **extra):
    """One tenant as the planner takes it."""
    spec = {"name": name, "vcpus": vcpus, "memory_mb": memory_mb, "gpus": gpus, "vfs": vfs}
    spec.update(extra)
    return spec


def drawn_synthetic(draw, min_nodes, max_nodes, max_cores):
    """A :func:`synthetic` host drawn by hypothesis (``draw``, inside an ``st.composite``): 1 or 2
    threads per core, up to ``max_cores`` cores, 2 GPUs and 3 VFs per node, 2M pools of 0-128 pages."""
    from hypothesis import strategies as st  # pylint: disable=import-outside-toplevel
    nodes = draw(st.integers(min_nodes, max_nodes))
    threads = draw(st.sampled_from([1, 2]))
    cores = draw(st.lists(st.integers(1, max_cores), min_size=nodes, max_size=nodes))
    gpus = draw(st.lists(st.integers(0, 2), min_size=nodes, max_size=nodes))
    vfs = draw(st.lists(st.integers(0, 3), min_size=nodes, max_size=nodes))
    pages = draw(st.lists(st.sampled_from([0, 32, 64, 128]), min_size=nodes, max_size=nodes))
    return synthetic(nodes, cores, threads, gpus, vfs, pages)


def synthetic(nodes, cores, threads, gpus, vfs, pages, levels=None):
    """A small host for property tests: ``nodes`` nodes, each with ``cores[n]`` cores of
    ``threads`` threads, ``gpus[n]`` GPUs, ``vfs[n]`` VFs (one PF per node) and ``pages[n]``
    2M hugepages; ``levels[(gpu_index, node)]`` the GPU/PF level (default PXB same node, SYS
    otherwise)."""
    cpus, numa_nodes, pci, topo_gpus, affinity = [], [], {}, [], {}
    next_cpu = 0
    total_cores = sum(cores)
    for node in range(nodes):
        ids = []
        for _core in range(cores[node]):
            base = next_cpu
            siblings = [base + t * total_cores for t in range(threads)]
            next_cpu += 1
            for cpu in siblings:
                cpus.append({"id": cpu, "core_id": base, "package_id": 0, "numa_node": node, "siblings": siblings, "online": True})
                ids.append(cpu)
        numa_nodes.append({"id": node, "cpus": sorted(ids), "memory_mb": 65536, "hugepages": _hugepages(pages[node], 0)})
    pfs = {}
    for node in range(nodes):
        if vfs[node]:
            pf = "0000:%02x:00.0" % (0x80 + node)
            pfs[node] = pf
            virtfns = ["0000:%02x:00.%d" % (0x80 + node, i + 1) if i < 7 else "0000:%02x:01.%d" % (0x80 + node, i - 7)
                       for i in range(vfs[node])]
            pci[pf] = {"address": pf, "class": "0x020000", "numa_node": node, "virtfns": virtfns}
            for vf in virtfns:
                pci[vf] = {"address": vf, "class": "0x020000", "numa_node": node, "physfn": pf, "virtfns": []}
    index = 0
    for node in range(nodes):
        for _gpu in range(gpus[node]):
            addr = "0000:%02x:00.0" % (0x10 + index)
            pci[addr] = {"address": addr, "class": "0x030200", "numa_node": node, "virtfns": []}
            topo_gpus.append({"address": addr, "numa_node": node})
            affinity[addr] = dict((pf, (levels or {}).get((index, pf_node), "PXB" if pf_node == node else "SYS"))
                                  for pf_node, pf in pfs.items())
            index += 1
    return {"numa_nodes": numa_nodes, "cpus": sorted(cpus, key=lambda c: c["id"]), "pci_devices": pci, "gpus": topo_gpus,
            "nics": [], "gpu_nic_affinity": affinity}


def grouped(topology, groups, extra=None):
    """``topology`` with IOMMU groups, as read from sysfs: ``groups`` {group number: [addresses]},
    every other PCI device alone in a group of its own; ``extra`` {address: device fields}
    added to ``pci_devices`` first (a GPU's audio function, a bridge, a host NIC...)."""
    pci = dict((address, dict(device)) for address, device in topology["pci_devices"].items())
    for address, fields in (extra or {}).items():
        pci[address] = dict({"address": address, "virtfns": [], "numa_node": None, "driver": None}, **fields)
    listed = dict((address, group) for group, members in groups.items() for address in members)
    number = max(list(groups) + [0]) + 1
    table = dict((str(group), sorted(members)) for group, members in groups.items())
    for address in sorted(pci):
        if address in listed:
            pci[address]["iommu_group"] = listed[address]
        else:
            pci[address]["iommu_group"] = number
            table[str(number)] = [address]
            number += 1
    return dict(topology, pci_devices=pci, iommu={"enabled": True, "groups": table})
