# -*- coding: utf-8 -*-
"""Fake roots of real GPU servers, shared by the unit tests and tests/tools/dgx_tree.py.

``build_dgx_a100_class(root)`` lays out a DGX A100-class host after
tests/fixtures/topo/topo-m_8xa100-sxm4-40gb_10xmlx5_epyc7742-nps4_driver525.txt and the same
machine's lscpu (tests/fixtures/host); tests/unit/plugins/module_utils/host/test_topology.py asserts
that the host model read from it reproduces that real matrix.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import read_cpulist

from fakes.host_tree import FakeHost  # pylint: disable=import-error

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def parse_lscpu_nodes(path):
    nodes = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"^NUMA node(\d+) CPU\(s\):\s+(\S+)", line)
            if match:
                nodes[int(match.group(1))] = read_cpulist(match.group(2))
    return nodes


def add_cpus(host, nodes, threads_per_core, cores_per_socket):
    """Logical CPU n and n + (cores in system) are SMT siblings, as on EPYC/Xeon Linux."""
    all_cpus = sorted(c for cpus in nodes.values() for c in cpus)
    physical = len(all_cpus) // threads_per_core
    for cpu in all_cpus:
        core = cpu % physical
        siblings = [core + k * physical for k in range(threads_per_core)]
        host.add_cpu(cpu, core_id=core % cores_per_socket, package_id=core // cores_per_socket, siblings=siblings)
    host.set_cpus_online(all_cpus)


class Switch:
    """A PCIe switch in sysfs: an upstream port with downstream ports below it."""

    def __init__(self, host, usp, parent, numa):
        self.host, self.usp, self.numa, self.ports = host, usp, numa, 0
        host.add_pci(usp, "0x10b5", "0x8725", "0x060400", parent=parent, numa_node=numa)
        self.bus = int(usp[5:7], 16) + 1

    def port(self):
        dsp = "0000:%02x:%02x.0" % (self.bus, self.ports)
        self.ports += 1
        self.host.add_pci(dsp, "0x10b5", "0x8725", "0x060400", parent=self.usp, numa_node=self.numa)
        return dsp


def build_dgx_a100_class(root):
    """8x A100-SXM4-40GB + 10 mlx5 on 2x EPYC 7742 NPS4 (8 NUMA nodes), after
    topo/topo-m_8xa100-sxm4-40gb_10xmlx5_epyc7742-nps4_driver525.txt and the same machine's
    lscpu. Each GPU and NIC pair shares a top-level switch under its own host bridge, each
    device behind its own leaf switch (so GPU/NIC pairs read PXB, as printed). NIC8/NIC9 are
    the two ports of one card (PIX); the matrix leaves their NUMA node blank and shows SYS
    to every GPU, so they sit on node 0, which has no GPU."""
    host = FakeHost(root)
    host.set_cpuinfo("AuthenticAMD")
    nodes = parse_lscpu_nodes(os.path.join(FIXTURES, "host", "lscpu_2x-epyc-7742_nps4_dgx-a100-class.txt"))
    for node, cpus in nodes.items():
        host.add_numa_node(node, cpus, memory_mb=128 * 1024)
    add_cpus(host, nodes, threads_per_core=2, cores_per_socket=64)
    gpu_numa = {0: 3, 1: 3, 2: 1, 3: 1, 4: 7, 5: 7, 6: 5, 7: 5}
    gpus, nics, group = {}, {}, 10
    for complex_index in range(4):
        numa = gpu_numa[2 * complex_index]
        bus = 0x10 + complex_index * 0x20
        root_bus = "pci0000:%02x" % bus
        rp = "0000:%02x:01.1" % bus
        host.add_pci(rp, "0x1022", "0x1483", "0x060400", root_bus=root_bus, numa_node=numa)
        top = Switch(host, "0000:%02x:00.0" % (bus + 1), rp, numa)
        for slot in range(2):
            for kind in ("gpu", "nic"):
                leaf_parent = top.port()
                leaf = Switch(host, "0000:%02x:00.0" % (top.bus + 1 + 4 * (2 * slot + (kind == "nic"))), leaf_parent, numa)
                dsp = leaf.port()
                address = "0000:%02x:00.0" % (leaf.bus + 1)
                index = 2 * complex_index + slot
                if kind == "gpu":
                    host.add_pci(address, "0x10de", "0x20b0", "0x030200", parent=dsp, numa_node=numa,
                                 driver="nvidia", iommu_group=group)
                    gpus["GPU%d" % index] = address
                else:
                    host.add_pci(address, "0x15b3", "0x1017", "0x020000", parent=dsp, numa_node=numa,
                                 driver="mlx5_core", iommu_group=group, netdevs=["ibp%d" % index],
                                 rdma_devices=["mlx5_%d" % index], sriov_totalvfs=8)
                    nics["NIC%d" % index] = address
                group += 1
    # Storage NIC pair: one dual-port card under one switch port on node 0.
    host.add_pci("0000:a0:01.1", "0x1022", "0x1483", "0x060400", root_bus="pci0000:a0", numa_node=0)
    for function in (0, 1):
        address = "0000:a1:00.%d" % function
        host.add_pci(address, "0x15b3", "0x1017", "0x020000", parent="0000:a0:01.1", numa_node=0,
                     driver="mlx5_core", iommu_group=group + function, netdevs=["ens%df%d" % (1, function)],
                     rdma_devices=["mlx5_%d" % (8 + function)])
        nics["NIC%d" % (8 + function)] = address
    return host, gpus, nics
