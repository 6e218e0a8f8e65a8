# -*- coding: utf-8 -*-
"""IOMMU groups in the placement planner: the devices of one group go to one tenant or to none.
A GPU's audio function is taken along, two GPUs of one group go to one tenant, a group holding a
function the host keeps leaves its GPUs (or VFs) out with the reason, bridges do not count; and
on random hosts with GPU groups the plan is the brute-force optimum (independent oracle)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants

import placement_oracle as oracle  # pylint: disable=import-error
from placement_topologies import grouped, synthetic  # pylint: disable=import-error

# one node, 8 cores of 2 threads, GPUs 0000:10:00.0, 0000:11:00.0, 0000:12:00.0, a PF 0000:80:00.0 with VFs .1 .2
GPU_A, GPU_B, GPU_C = "0000:10:00.0", "0000:11:00.0", "0000:12:00.0"
AUDIO_A = "0000:10:00.1"
PF, VF_1, VF_2 = "0000:80:00.0", "0000:80:00.1", "0000:80:00.2"
AUDIO = {"class": "0x040300", "numa_node": 0, "driver": "snd_hda_intel"}
BRIDGE = {"class": "0x060400", "numa_node": 0, "driver": "pcieport", "is_bridge": True}


def host(gpus=3, vfs=2):
    return synthetic(1, [8], 2, [gpus], [vfs], [256])


def tenant(name, gpus=0, vfs=0, **extra):
    return dict({"name": name, "vcpus": 2, "memory_mb": 64, "gpus": gpus, "vfs": vfs}, **extra)


@pytest.mark.parametrize("gpus", [1, [GPU_A]])
def test_a_gpus_audio_function_goes_along(gpus):
    topology = grouped(host(gpus=1), {7: [GPU_A, AUDIO_A]}, {AUDIO_A: AUDIO})
    plan = plan_tenants(topology, [tenant("a", gpus=gpus)])
    place = plan["placements"]["a"]
    assert (place["gpus"], place["companions"]) == ([GPU_A], [AUDIO_A])
    assert plan["groups"] == {"left_out": {}, "shared": {}, "companions": {GPU_A: [AUDIO_A]}}


def test_a_bridge_in_the_group_stays_with_the_host():
    topology = grouped(host(gpus=1), {7: ["0000:0f:00.0", GPU_A]}, {"0000:0f:00.0": BRIDGE})
    plan = plan_tenants(topology, [tenant("a", gpus=1)])
    assert plan["placements"]["a"]["gpus"] == [GPU_A]
    assert plan["placements"]["a"]["companions"] == []
    assert plan["groups"]["left_out"] == {}


@pytest.mark.parametrize("tenants, placed, refused", [
    # a tenant asking for 2 GPUs takes the group's two; one asking for 1 takes the GPU alone in its group
    ([tenant("one", gpus=1), tenant("two", gpus=2)], {"one": [GPU_C], "two": [GPU_A, GPU_B]}, {}),
    ([tenant("two", gpus=2), tenant("one", gpus=1)], {"one": [GPU_C], "two": [GPU_A, GPU_B]}, {}),
    # no tenant gets half of the group
    ([tenant("one", gpus=1), tenant("also", gpus=1)], {"one": [GPU_C]}, {"also": "in whole IOMMU groups"}),
    ([tenant("three", gpus=3)], {"three": [GPU_A, GPU_B, GPU_C]}, {}),
    ([tenant("named", gpus=[GPU_A, GPU_B])], {"named": [GPU_A, GPU_B]}, {}),
    ([tenant("half", gpus=[GPU_A])], {}, {"half": "GPUs 0000:10:00.0, 0000:11:00.0 share IOMMU group 7"}),
])
def test_two_gpus_of_one_group_go_to_one_tenant(tenants, placed, refused):
    plan = plan_tenants(grouped(host(), {7: [GPU_A, GPU_B]}), tenants)
    assert dict((name, p["gpus"]) for name, p in plan["placements"].items()) == placed
    assert set(plan["unplaced"]) == set(refused)
    for name, words in refused.items():
        assert words in plan["unplaced"][name]
    assert plan["groups"]["shared"] == {GPU_A: [GPU_A, GPU_B], GPU_B: [GPU_A, GPU_B]}


NVME = {"class": "0x010802", "numa_node": 0, "driver": "nvme"}
NIC = {"class": "0x020000", "numa_node": 0, "driver": "mlx5_core", "netdevs": ["eth0"]}


@pytest.mark.parametrize("extra, policy, words", [
    ({"0000:10:00.2": AUDIO}, {"host_devices": {"0000:10:00.2": "the host's sound card"}}, "0000:10:00.2 (the host's sound card)"),
    ({"0000:10:00.2": AUDIO}, {"host_devices": ["0000:10:00.2"]}, "0000:10:00.2 (the host needs it)"),
    ({"0000:10:00.2": NVME}, {}, "0000:10:00.2 (class 0x010802, driver nvme, not a function given along with a GPU)"),
    ({"0000:10:00.2": NIC}, {}, "0000:10:00.2 (class 0x020000, driver mlx5_core"),
    ({}, {"gpus": [GPU_A]}, "0000:11:00.0 (a GPU that stays with the host"),
])
def test_a_group_with_a_function_the_host_keeps_leaves_the_gpu_out(extra, policy, words):
    members = [GPU_A] + (list(extra) or [GPU_B])
    topology = grouped(host(gpus=2), {7: members}, extra)
    plan = plan_tenants(topology, [tenant("a", gpus=1), tenant("named", gpus=[GPU_A])], dict(policy, gpus=[GPU_A]))
    why = plan["groups"]["left_out"][GPU_A]
    for part in ("GPU 0000:10:00.0 left out: its IOMMU group 7 also holds", words, "enable ACS", "gpuvirt_host_gpus"):
        assert part in why
    assert "left out for their IOMMU groups: 0000:10:00.0" in plan["unplaced"]["a"]
    assert plan["unplaced"]["named"] == why
    assert plan["free"]["0"]["gpus"] == []


def test_a_gpu_whose_group_link_dangles_is_left_out_naming_it():
    """A GPU whose iommu_group link names a group /sys/kernel/iommu_groups lacks (a capture taken
    without it, a device being removed): who shares the group cannot be known, so the planner leaves
    it out with the reason, as vfio_bind refuses it, instead of planning it for a tenant."""
    topology = grouped(host(gpus=2), {})
    table = dict(topology["iommu"]["groups"])
    del table[str(topology["pci_devices"][GPU_A]["iommu_group"])]
    topology = dict(topology, iommu=dict(topology["iommu"], groups=table))
    plan = plan_tenants(topology, [tenant("a", gpus=1), tenant("named", gpus=[GPU_A])])
    why = plan["groups"]["left_out"][GPU_A]
    assert why.startswith("GPU %s left out: the iommu_group link names group" % GPU_A), why
    assert "/sys/kernel/iommu_groups" in why and "capture the host again" in why
    assert plan["placements"]["a"]["gpus"] == [GPU_B]
    assert plan["unplaced"]["named"] == why


@pytest.mark.parametrize("groups, tenants, placed, left_out", [
    # no ACS above the PF: its VFs share its group, and the PF stays with the host
    ({9: [PF, VF_1, VF_2]}, [tenant("a", vfs=1)], {}, [VF_1, VF_2]),
    # two VFs of one group go to one tenant
    ({9: [VF_1, VF_2]}, [tenant("a", vfs=1)], {}, []),
    ({9: [VF_1, VF_2]}, [tenant("a", vfs=2)], {"a": [VF_1, VF_2]}, []),
])
def test_vfs_follow_their_groups(groups, tenants, placed, left_out):
    plan = plan_tenants(grouped(host(gpus=0), groups), tenants)
    assert dict((name, p["vfs"]) for name, p in plan["placements"].items()) == placed
    assert sorted(plan["groups"]["left_out"]) == left_out
    for vf in left_out:
        assert "VF %s left out: its IOMMU group 9 also holds %s (an SR-IOV PF the host keeps)" % (vf, PF) in plan["groups"]["left_out"][vf]
    if not placed:
        assert "VFs short on node 0" in plan["unplaced"]["a"]


def test_a_domain_read_back_with_its_gpus_audio_function_is_kept():
    topology = grouped(host(gpus=1), {7: [GPU_A, AUDIO_A]}, {AUDIO_A: AUDIO})
    first = plan_tenants(topology, [tenant("a", gpus=1)])["placements"]["a"]
    read_back = {"hostdevs": [GPU_A, AUDIO_A], "numa_node": 0, "vcpu_pins": first["vcpu_pins"],
                 "emulator_cpus": first["emulator_cpus"], "hugepages": first["hugepages"]}
    plan = plan_tenants(topology, [tenant("a", gpus=1)], {"existing": {"a": read_back}})
    assert plan["placements"]["a"]["kept"]
    assert plan["placements"]["a"]["companions"] == [AUDIO_A]


def test_an_existing_assignment_with_half_a_group_is_replanned():
    topology = grouped(host(gpus=2), {7: [GPU_A, GPU_B]})
    first = plan_tenants(host(gpus=2), [tenant("a", gpus=1)])["placements"]["a"]
    plan = plan_tenants(topology, [tenant("a", gpus=1)], {"existing": {"a": first}})
    assert "part of an IOMMU group" in plan["notes"]["a"]
    assert "in whole IOMMU groups" in plan["unplaced"]["a"]


# --------------------------------------------------------------------------- properties
@st.composite
def grouped_instances(draw):
    """Small hosts whose GPUs on a node are paired into IOMMU groups at random, and tenants."""
    nodes = draw(st.integers(1, 3))
    cores = draw(st.lists(st.integers(1, 5), min_size=nodes, max_size=nodes))
    gpus = draw(st.lists(st.integers(0, 4), min_size=nodes, max_size=nodes))
    pages = draw(st.lists(st.sampled_from([0, 64, 128]), min_size=nodes, max_size=nodes))
    topology = synthetic(nodes, cores, 2, gpus, [0] * nodes, pages)
    addresses = [g["address"] for g in topology["gpus"]]
    groups, start = {}, 0
    for count in gpus:
        mine = addresses[start:start + count]
        start += count
        while len(mine) >= 2 and draw(st.booleans()):
            groups[len(groups) + 1] = mine[:2]
            mine = mine[2:]
    tenants = [tenant("t%d" % i, gpus=draw(st.integers(0, 3))) for i in range(draw(st.integers(1, 6)))]
    for spec in tenants:
        spec["vcpus"] = draw(st.integers(1, 3))
    return grouped(topology, groups), tenants, groups


@settings(max_examples=int(__import__("os").environ.get("PLACEMENT_OPTIMUM_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(grouped_instances(), st.sampled_from([[], [0]]))
def test_property_groups_are_whole_and_the_plan_is_the_brute_force_optimum(instance, reserved):
    topology, tenants, groups = instance
    plan = plan_tenants(topology, tenants, {"reserved_cpus": reserved, "pcie_affinity": "ignore"})
    owner = dict((gpu, name) for name, place in plan["placements"].items() for gpu in place["gpus"])
    for members in groups.values():
        assert len(set(owner.get(gpu) for gpu in members)) == 1, (members, owner)
    assert not plan["search"]["exhausted"]
    assert len(plan["placements"]) == oracle.optimum_placed(topology, tenants, reserved)
