# -*- coding: utf-8 -*-
"""Which of a tenant's GPUs and VFs share a switch on the host (planning/pcie_switches), on the
DGX A100-class host model built from its real ``nvidia-smi topo -m`` (GPU0/GPU1 PXB to NIC0/NIC1,
SYS to the others) and the lab's host model."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning.pcie_switches import pair_level, switch_groups

from placement_topologies import dgx_a100  # pylint: disable=import-error

GPU0, GPU1, GPU2 = "0000:10:00.0", "0000:20:00.0", "0000:30:00.0"
NIC0_VF, NIC1_VF, NIC2_VF = "0000:18:00.1", "0000:28:00.2", "0000:38:00.1"


def test_a_vf_takes_its_pfs_level():
    topology = dgx_a100()
    assert pair_level(topology, GPU0, NIC0_VF) == "PXB"
    assert pair_level(topology, GPU0, NIC2_VF) == "SYS"
    # a VF the host model does not hold yet (planned by the boot stage) by the placement's PF
    assert pair_level(topology, GPU0, "0000:18:07.7", "0000:18:00.0") == "PXB"
    assert pair_level(topology, GPU0, "0000:18:07.7") is None


def test_a_gpu_and_its_near_vf_are_one_switch_and_a_far_vf_none():
    topology = dgx_a100()
    assert switch_groups(topology, [GPU0], [NIC0_VF]) == [{"devices": [GPU0, NIC0_VF], "level": "PXB"}]
    assert switch_groups(topology, [GPU0], [NIC2_VF]) == []
    assert switch_groups(topology, [GPU0, GPU2], [NIC0_VF, NIC2_VF]) == [
        {"devices": [GPU0, NIC0_VF], "level": "PXB"}, {"devices": [GPU2, NIC2_VF], "level": "PXB"}]


def test_gpus_near_the_same_vfs_share_one_switch():
    topology = dgx_a100()
    assert switch_groups(topology, [GPU0, GPU1], [NIC0_VF, NIC1_VF]) == [
        {"devices": [GPU0, GPU1, NIC0_VF, NIC1_VF], "level": "PXB"}]
    # GPUs alone, VFs alone: no switch to show
    assert switch_groups(topology, [GPU0, GPU1], []) == [] and switch_groups(topology, [], [NIC0_VF]) == []


def test_the_farthest_pair_names_the_level():
    topology = {"gpu_nic_affinity": {"g0": {"v0": "PIX", "v1": "PXB"}, "g1": {"v1": "PIX"}}, "pci_devices": {}}
    assert switch_groups(topology, ["g0"], ["v0"]) == [{"devices": ["g0", "v0"], "level": "PIX"}]
    assert switch_groups(topology, ["g0", "g1"], ["v0", "v1"]) == [{"devices": ["g0", "g1", "v0", "v1"], "level": "PXB"}]
    # PHB is through the host bridge: no switch shared
    assert switch_groups({"gpu_nic_affinity": {"g0": {"v0": "PHB"}}}, ["g0"], ["v0"]) == []
