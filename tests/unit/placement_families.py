# -*- coding: utf-8 -*-
"""Generated host families for the placement planner's exact oracle (placement_cpsat.py): the
cases that once left the planner below the optimum.

- ``acs_groups``: GPUs behind switches without ACS, four to an IOMMU group;
- ``smt_offline``: the DGX A100-class model with some SMT threads offline;
- ``mixed_groups``: 8-GPU nodes whose GPUs are in IOMMU groups of 4, 2 and 1;
- ``two_switches``: nodes with two PCIe switches, each with GPUs and NICs, under
  ``pcie_affinity: require``;
- ``nvswitch_board``: an HGX H100-class board (NVSwitch 10de:22a3, 8 GPUs, 4 a socket) whose GPUs'
  module IDs are drawn, under tenants of 0-8 GPUs (3 included): each tenant's GPUs one partition;
- ``spanning_mix``: 2-, 4- and 8-node hosts under ``numa: spread`` with tenants of which some
  no node holds (more vCPUs, pages or GPUs than one node has) and the others small.

Each returns (topology, tenants, policy) from a ``random.Random``. The host model is the one
``host_topology_info`` reads: CPUs with their online flag (an offline CPU has no siblings of its
own; its online sibling lists only itself, as sysfs does), IOMMU groups on the PCI devices.
"""

from __future__ import absolute_import, division, print_function

import os
import re

from conftest import FIXTURES
from placement_topologies import _hugepages, dgx_a100, grouped, synthetic


def switched_host(nodes, vfs_per_nic=4, pages=8192, offline=()):
    """A host of ``nodes``: each {"cores": n, "switches": [{"groups": [GPU group sizes], "nics": n}]}.
    Within a switch GPU/NIC level PXB, on one node NODE, else SYS. ``offline``: CPU ids offline."""
    total_cores = sum(node["cores"] for node in nodes)
    cpus, numa_nodes, pci, gpus, affinity, groups = [], [], {}, [], {}, {}
    core_base = 0
    bus = 0x10
    group_number = 1
    switch_members = []  # (node, switch, [gpu addresses], [pf addresses])
    offline = set(offline)
    for node_id, node in enumerate(nodes):
        ids = []
        for core in range(core_base, core_base + node["cores"]):
            pair = [core, core + total_cores]
            up = [cpu for cpu in pair if cpu not in offline]
            for cpu in pair:
                cpus.append({"id": cpu, "core_id": core, "package_id": 0, "numa_node": node_id,
                             "siblings": up if cpu in up else [cpu], "online": cpu in up})
            ids.extend(up)
        core_base += node["cores"]
        numa_nodes.append({"id": node_id, "cpus": sorted(ids), "memory_mb": 262144, "hugepages": _hugepages(pages, 0), "distances": []})
        for switch_index, switch in enumerate(node.get("switches", ())):
            gpu_addresses, pfs = [], []
            for size in switch.get("groups", ()):
                members = []
                for _gpu in range(size):
                    address = "0000:%02x:00.0" % bus
                    bus += 1
                    pci[address] = {"address": address, "class": "0x030200", "numa_node": node_id, "virtfns": []}
                    gpus.append({"address": address, "numa_node": node_id})
                    members.append(address)
                groups[group_number] = members
                group_number += 1
                gpu_addresses.extend(members)
            for _nic in range(switch.get("nics", 0)):
                pf = "0000:%02x:00.0" % bus
                bus += 1
                virtfns = ["0000:%02x:00.%d" % (bus - 1, i + 1) for i in range(vfs_per_nic)]
                pci[pf] = {"address": pf, "class": "0x020000", "numa_node": node_id, "virtfns": virtfns}
                for vf in virtfns:
                    pci[vf] = {"address": vf, "class": "0x020000", "numa_node": node_id, "physfn": pf, "virtfns": []}
                pfs.append(pf)
            switch_members.append((node_id, switch_index, gpu_addresses, pfs))
    for node_id, switch_index, gpu_addresses, _pfs in switch_members:
        for gpu in gpu_addresses:
            row = affinity[gpu] = {}
            for other_node, other_switch, _gpus, pfs in switch_members:
                level = "PXB" if (other_node, other_switch) == (node_id, switch_index) else "NODE" if other_node == node_id else "SYS"
                for pf in pfs:
                    row[pf] = level
    topology = {"numa_nodes": numa_nodes, "cpus": sorted(cpus, key=lambda c: c["id"]), "pci_devices": pci, "gpus": gpus,
                "nics": [], "gpu_nic_affinity": affinity}
    return grouped(topology, groups)


def tenants_mix(rng, count, gpus=(0, 1, 1, 2), vfs=(0, 1, 2), vcpus=(2, 4, 6, 8, 12), memory=(4096, 8192, 16384)):
    return [{"name": "t%02d" % index, "gpus": rng.choice(gpus), "vfs": rng.choice(vfs), "vcpus": rng.choice(vcpus),
             "memory_mb": rng.choice(memory), "priority": rng.choice(("online", "online", "batch"))} for index in range(count)]


def acs_groups(rng):
    nodes = []
    for node in range(4):
        switches = [{"groups": [4] * rng.choice([1, 2]), "nics": rng.randint(0, 2)}] if node % 2 == 0 else []
        nodes.append({"cores": rng.choice([12, 16, 24]), "switches": switches})
    topology = switched_host(nodes)
    return topology, tenants_mix(rng, rng.randint(12, 20), gpus=(0, 1, 2, 2, 4)), {}


def smt_offline(rng):
    topology = dgx_a100()
    siblings = [cpu for cpu in topology["cpus"] if cpu["siblings"][0] != cpu["id"] and cpu["id"] not in (128, 129)]
    down = set(cpu["id"] for cpu in rng.sample(siblings, rng.randint(8, 64)))
    cpus = []
    for cpu in topology["cpus"]:
        cpu = dict(cpu)
        if cpu["id"] in down:
            cpu.update(online=False, siblings=[cpu["id"]])
        else:
            cpu["siblings"] = [c for c in cpu["siblings"] if c not in down]
        cpus.append(cpu)
    nodes = [dict(node, cpus=[c for c in node["cpus"] if c not in down]) for node in topology["numa_nodes"]]
    topology = dict(topology, cpus=cpus, numa_nodes=nodes)
    tenants = tenants_mix(rng, rng.randint(16, 32), gpus=(0, 0, 1, 1, 2), vcpus=(3, 4, 7, 8, 11, 15), memory=(8192, 16384, 32768))
    return topology, tenants, {"reserved_cpus": "0-1,128-129", "reserved_cpus_set": [0, 1, 128, 129]}


def mixed_groups(rng):
    nodes = []
    for _node in range(2):
        sizes = rng.choice([[4, 2, 1, 1], [4, 4], [2, 2, 2, 1, 1], [4, 1, 1, 1, 1], [2, 2, 4]])
        nodes.append({"cores": rng.choice([24, 32]), "switches": [{"groups": sizes, "nics": 2}]})
    nodes.append({"cores": 16, "switches": []})
    topology = switched_host(nodes)
    return topology, tenants_mix(rng, rng.randint(10, 18), gpus=(0, 1, 1, 2, 2, 3, 4), vcpus=(2, 4, 6, 8)), {}


def two_switches(rng):
    nodes = []
    for _node in range(rng.choice([2, 3])):
        switches = [{"groups": [1] * rng.randint(1, 3), "nics": rng.randint(0, 2)} for _switch in range(2)]
        nodes.append({"cores": rng.choice([16, 24]), "switches": switches})
    topology = switched_host(nodes, vfs_per_nic=rng.choice([1, 2]))
    tenants = tenants_mix(rng, rng.randint(10, 18), gpus=(0, 1, 1, 2), vfs=(0, 1, 1, 2), vcpus=(2, 4, 6))
    return topology, tenants, {"pcie_affinity": "require"}


def partition_table():
    """(ID, GPU module IDs) of each partition the Fabric Manager lists on an HGX H100-class board,
    read from the published listing (tests/fixtures/fabricmanager), not from the collection's table."""
    path = os.path.join(FIXTURES, "fabricmanager", "partitioner-o0_hgx-8gpu-nvlink18_15-partitions.txt")
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"^(\d+)\s+\d+\s+([\d, ]+?)\s{2,}\d+\s+(?:ACTIVE|INACTIVE)$", line.rstrip("\n"))
            if match:
                rows.append((int(match.group(1)), tuple(int(m) for m in match.group(2).split(","))))
    return rows


def _guide_ids(cell):
    """The physical IDs of a cell of the guide's table: '1 to 4 & 9 to 12', '1, 2, 3, 4', '7'."""
    ids = []
    for part in cell.split("&"):
        bounds = re.match(r"^\s*(\d+) to (\d+)\s*$", part)
        ids += list(range(int(bounds.group(1)), int(bounds.group(2)) + 1)) if bounds else [int(m) for m in part.split(",")]
    return tuple(ids)


def a100_partition_table():
    """(ID, physical IDs) of the Fabric Manager user guide's DGX A100 / HGX A100 default partitions
    (tests/fixtures/fabricmanager), not the collection's table; its last row ("20 to 34 ... Physical ID 2
    for Partition ID 20, Physical ID 3 for Partition ID 21, etc.") read as the rule it states."""
    path = os.path.join(FIXTURES, "fabricmanager", "fm-user-guide_default-gpu-partitions_dgx-hgx-a100.txt")
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in list(handle)[1:]:
            number, count, cell, _links = [c.strip() for c in line.split(" | ")]
            rule = re.match(r"^(\d+) to (\d+)$", number)
            if rule:
                first = re.match(r"^Physical ID (\d+) for Partition ID (\d+),", cell)
                offset = int(first.group(2)) - int(first.group(1))
                rows += [(n, (n - offset,)) for n in range(int(rule.group(1)), int(rule.group(2)) + 1)]
                continue
            rows.append((int(number), _guide_ids(cell)))
            assert len(rows[-1][1]) == int(count), line
    return rows


def nvswitch_board(rng, board="h100"):
    """Two sockets of 4 GPUs, each GPU and a NIC under one switch of their own, an NVSwitch on socket 0;
    sometimes a third node without GPUs. ``h100``: NVSwitch 10de:22a3, module IDs 1-4 on one socket and
    5-8 on the other (as the published HGX host has them, tests/fixtures/fabricmanager). ``a100``:
    NVSwitch 10de:1af1, one baseboard strapped as the bottom (1-8) or the top tray (9-16), drawn, the
    guide's 4-GPU halves one a socket (a drawn layout: no published A100 host maps its module IDs to
    sockets); the partitions of the other tray left out, as the Fabric Manager leaves them. Module IDs in
    a drawn order. -> (topology, tenants, policy with gpu_modules, partitions as tuples of GPU
    addresses for placement_cpsat)."""
    nodes = [{"cores": rng.choice([16, 24, 32]), "switches": [{"groups": [1], "nics": rng.choice([0, 1])} for _gpu in range(4)]}
             for _socket in range(2)]
    if rng.random() < 0.3:
        nodes.append({"cores": 16, "switches": []})
    topology = switched_host(nodes)
    topology["pci_devices"]["0000:e0:00.0"] = {"address": "0000:e0:00.0", "vendor_id": "0x10de",
                                               "device_id": "0x22a3" if board == "h100" else "0x1af1",
                                               "class": "0x068000", "numa_node": 0, "virtfns": []}
    first = 1 if board == "h100" else rng.choice([1, 9])
    halves = [list(range(first, first + 4)), list(range(first + 4, first + 8))]
    rng.shuffle(halves)
    for half in halves:
        rng.shuffle(half)
    by_node = dict((node, sorted(g["address"] for g in topology["gpus"] if g["numa_node"] == node)) for node in (0, 1))
    modules = dict(zip(by_node[0] + by_node[1], halves[0] + halves[1]))
    address = dict((module, gpu) for gpu, module in modules.items())
    table = partition_table() if board == "h100" else a100_partition_table()
    partitions = [tuple(address[m] for m in members) for _number, members in table if set(members) <= set(address)]
    tenants = tenants_mix(rng, rng.randint(6, 12), gpus=(0, 1, 1, 1, 2, 2, 3, 4, 4, 8), vcpus=(2, 4, 6, 8))
    return topology, tenants, {"gpu_modules": modules}, partitions


FAMILIES = {"acs_groups": acs_groups, "smt_offline": smt_offline, "mixed_groups": mixed_groups, "two_switches": two_switches}


def spanning_mix(rng, nodes):
    """``nodes`` nodes of 4-8 cores in SMT pairs, 0-2 GPUs, 0-4 VFs and 32-128 2M pages each; about
    a third of the tenants larger than a node (9-16 vCPUs, up to 4 GPUs), the rest small; few
    enough (up to nodes + 2 on 8 nodes) that the exact model proves its optimum in seconds."""
    def per_node(choices):
        return [rng.choice(choices) for _node in range(nodes)]
    topology = synthetic(nodes, per_node([4, 6, 8]), 2, per_node([0, 1, 2, 2]), per_node([0, 2, 4]), per_node([32, 64, 128]))
    tenants = []
    for index in range(rng.randint(nodes + 1, nodes + 2 if nodes > 4 else 2 * nodes + 2)):
        big = rng.random() < 0.3
        tenants.append({"name": "t%02d" % index, "vcpus": rng.choice([9, 12, 16] if big else [1, 2, 3, 4, 6]),
                        "memory_mb": rng.choice([32, 64, 128] if big else [16, 32, 64]),
                        "gpus": rng.choice([0, 1, 2, 3, 4] if big else [0, 1]), "vfs": rng.choice([0, 1, 2]),
                        "priority": rng.choice(["online", "online", "batch"])})
    return topology, tenants, {"numa": "spread"}


def socket_mix(rng, per_socket):
    """2 sockets of ``per_socket`` NUMA nodes (Sub-NUMA Clustering SNC-2, or NPS4-like with 4): every
    node 6-12 cores and 0-2 GPUs under one switch, NICs with 1-2 VFs on some nodes only (at least
    one a socket, never all of them); tenants under numa required or required_vf_socket (the
    policy's, or their own). The package_id of each node's CPUs is its socket, as sysfs
    ``physical_package_id`` reads; across nodes the affinity is SYS, as ``nvidia-smi topo -m``
    prints it whatever the socket."""
    nodes = []
    for socket in range(2):
        with_nics = set(rng.sample(range(per_socket), rng.randint(1, per_socket - 1)))
        for local in range(per_socket):
            nodes.append({"cores": rng.choice([6, 8, 12]),
                          "switches": [{"groups": [1] * rng.choice([0, 1, 2, 2]), "nics": 1 if local in with_nics else 0}]})
    topology = switched_host(nodes, vfs_per_nic=rng.choice([1, 2]), pages=rng.choice([4096, 8192]))
    for cpu in topology["cpus"]:
        cpu["package_id"] = cpu["numa_node"] // per_socket
    numa = rng.choice(["required", "required_vf_socket"])
    tenants = tenants_mix(rng, rng.randint(6, 14), gpus=(0, 1, 1, 2), vfs=(0, 1, 1, 2), vcpus=(2, 4, 6, 8), memory=(2048, 4096))
    for tenant in tenants:
        if rng.random() < 0.3:
            tenant["numa"] = rng.choice(["required", "required_vf_socket"])
    return topology, tenants, {"numa": numa}
