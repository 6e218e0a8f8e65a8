# -*- coding: utf-8 -*-
"""The host model over a capture of a real kernel: the bare lab host (Debian 12 under QEMU,
captured by playbooks/files/capture_host.py; see tests/fixtures/lab/bare.tar.source.txt)."""

from __future__ import annotations


from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

CAPTURE = lab_capture("bare")


def lab_topology():
    return read_topology(CAPTURE, gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])


def test_bare_lab_numa_and_cpus():
    topo = lab_topology()
    assert [(n["id"], n["cpus"]) for n in topo["numa_nodes"]] == [(0, [0, 1]), (1, [2, 3])]
    assert all(n["memory_mb"] > 1500 for n in topo["numa_nodes"])
    assert all(n["hugepages"]["2048kB"]["total"] == 0 for n in topo["numa_nodes"])
    assert [c["numa_node"] for c in topo["cpus"]] == [0, 0, 1, 1]
    assert topo["cpu_vendor"] == "intel"
    # a VM (QEMU): its CPU flags say hypervisor; the capture predates DMI's sys_vendor, so unnamed
    assert topo["virtual_machine"] == "unknown"


def test_bare_lab_numa_distances_reach_the_planner():
    """nodeN/distance as captured (10 20 / 20 10), read by the one topology reader and indexed by
    the planner per pair of nodes (the spread tenants' closest nodes first)."""
    topo = lab_topology()
    assert [n["distances"] for n in topo["numa_nodes"]] == [[10, 20], [20, 10]]
    assert HostIndex(topo).distance == {(0, 0): 10, (0, 1): 20, (1, 0): 20, (1, 1): 10}


def test_bare_lab_devices_on_node_1_behind_the_expander():
    topo = lab_topology()
    pci = topo["pci_devices"]
    pf, edu, nic = pci["0000:81:00.0"], pci["0000:82:00.0"], pci["0000:83:00.0"]
    assert (pf["vendor_id"], pf["device_id"], pf["sriov_totalvfs"], pf["sriov_numvfs"]) == ("0x1b36", "0x0010", 4, 0)
    assert (edu["vendor_id"], edu["device_id"], edu["driver"]) == ("0x1234", "0x11e8", None)
    assert pf["numa_node"] == edu["numa_node"] == nic["numa_node"] == 1
    assert {pf["root_bus"], edu["root_bus"], nic["root_bus"]} == {"pci0000:80"}
    assert all(len(d["upstream"]) == 1 and pci[d["upstream"][0]]["is_bridge"] for d in (pf, edu, nic))
    # Different root ports of one host bridge: nvidia-smi would print PHB.
    assert topo["gpu_nic_affinity"]["0000:82:00.0"]["0000:81:00.0"] == "PHB"
    assert [g["address"] for g in topo["gpus"]] == ["0000:82:00.0"]


def test_bare_lab_has_iommu_hardware_but_it_is_off():
    topo = lab_topology()
    assert "intel_iommu=off" in topo["cmdline"]
    assert topo["iommu"]["enabled"] is False and topo["iommu"]["groups"] == {}
    assert topo["iommu"]["firmware_table"] == "DMAR"
    assert all(d["iommu_group"] is None for d in topo["pci_devices"].values())
