# -*- coding: utf-8 -*-
"""Helpers for fabric_partition against tests/unit/fakes/standins/fmpm, a STAND-IN for NVIDIA's fmpm that
prints what fmpm's source prints (see its docstring). The Fabric Manager's partitions of an HGX H100-class
board come from the published listing (tests/fixtures/fabricmanager, placement_families.partition_table),
the GPUs' PCI addresses by module ID from OpenNebula's probe of such a host (same directory). What the
published sources do not give is the test's own data, said so here: no GPU UUIDs (empty), no NVLink line
rate (0); the NVLink counts are the listing's "Max NVLinks/GPU" (18 a GPU in partitions of 2 or more, 0 alone)."""

from __future__ import annotations

import json
import os
import re

from conftest import FIXTURES  # pylint: disable=import-error
from fakes.paths import STANDINS  # pylint: disable=import-error
from placement_families import partition_table  # pylint: disable=import-error

STANDIN = os.path.join(STANDINS, "fmpm")
ONEFABRIC = os.path.join(FIXTURES, "fabricmanager", "onefabric_nvswitch-partition_module-id-to-pci_hgx-8480c_FRAGMENT.txt")


def module_addresses():
    """{module ID: PCI address} of the OpenNebula probe's HGX host."""
    with open(ONEFABRIC, encoding="utf-8") as handle:
        text = handle.read()
    mapping = {}
    for addresses, ids in re.findall(r'PARTITION_GPU_ADDR="([^"]+)",\s+PARTITION_GPU_IDS="([^"]+)"', text):
        mapping.update(zip(map(int, ids.split()), addresses.split()))
    return mapping


def h100_state(active=()):
    """The stand-in's state: the board's 15 partitions, those in ``active`` active."""
    address = module_addresses()
    partitions = []
    for number, members in partition_table():
        links = 18 if len(members) > 1 else 0
        partitions.append({"partitionId": number, "isActive": 1 if number in active else 0, "gpuInfo": [
            {"physicalId": m, "uuid": "", "pciBusId": address[m], "numNvLinksAvailable": links, "maxNumNvLinks": links,
             "nvlinkLineRateMBps": 0} for m in members]})
    return {"partitions": partitions, "maxNumPartitions": 64}


def write_state(path, state):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(state, handle)


def read_state(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# A small HGX H100-class host for the tenants stage against libvirt's test driver (whose host has 8 CPUs, so the
# plan's pins must fall within them): two NUMA nodes of 4 CPUs, the board's 8 GPUs (10de:2330, class 0x030200, as
# the HGX H100 lspci of tests/fixtures/pci lists them) already on vfio-pci, four a node, each in an IOMMU group of
# its own, and one NVSwitch 10de:22a3 (class 0x068000); the GPUs' module IDs are the OpenNebula probe's (modules
# 1-8 at the addresses module_addresses() gives), so the partitions are the published listing's.
H100 = ("0x10de", "0x2330", "0x030200")
NVSWITCH = ("0x10de", "0x22a3", "0x068000")


def hgx_stage_host(root):
    """-> (FakeHost, {GPU address: module ID}) of the small HGX host described above."""
    from fakes.host_tree import FakeHost  # pylint: disable=import-error,import-outside-toplevel
    host = FakeHost(root)
    host.set_cpuinfo("GenuineIntel")
    host.add_numa_node(0, [0, 1, 2, 3])
    host.add_numa_node(1, [4, 5, 6, 7])
    modules = {}
    for group, (module, address) in enumerate(sorted(module_addresses().items())):
        node = 0 if module <= 4 else 1
        host.add_pci(address, *H100, numa_node=node, driver="vfio-pci", iommu_group=10 + group)
        modules[address] = module
    host.add_pci("0000:6d:00.0", *NVSWITCH, numa_node=0, driver="nvidia", iommu_group=30)
    os.makedirs(host.p("/sys/bus/pci/drivers/vfio-pci"), exist_ok=True)
    return host, modules
