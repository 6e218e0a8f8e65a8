# -*- coding: utf-8 -*-
"""NVSwitch boards (placement/partitions.py): a tenant's GPUs are exactly one Fabric Manager
partition's. The planner against the exact CP-SAT reference with the same rule
(tests/unit/placement_cpsat.py, ``partitions``) on generated HGX H100-class boards
(tests/unit/placement_families.py ``nvswitch_board``: the partitions read from the published
listing, the module IDs drawn), and the refusals that name the tenant, the sizes and the fix."""

from __future__ import annotations

import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

import placement_cpsat  # pylint: disable=import-error
import placement_families as families  # pylint: disable=import-error
from placement_checks import assert_exclusive  # pylint: disable=import-error


def value(plan):
    placed = plan["placements"].values()
    return len(placed), sum(1 for p in placed if p["priority"] == "online")


def board(seed=0):
    return families.nvswitch_board(random.Random(seed))


@pytest.mark.parametrize("seed", range(16))
def test_planner_places_the_cp_sat_optimum_on_nvswitch_boards(seed):
    topology, tenants, policy, partitions = families.nvswitch_board(random.Random(31 + 1000 * seed))
    plan = plan_tenants(topology, tenants, policy)
    assert value(plan) == placement_cpsat.optimum(topology, tenants, {}, partitions=partitions)
    assert plan["search"]["proven"] and not plan["search"]["exhausted"], plan["search"]
    assert_exclusive(topology, plan, policy)
    listed = dict((frozenset(gpus), number) for number, gpus in enumerate(partitions))
    for place in plan["placements"].values():
        if place["gpus"]:
            assert frozenset(place["gpus"]) in listed, place
            assert place["nvswitch_partition"]["id"] == listed[frozenset(place["gpus"])]
            assert sorted(place["nvswitch_partition"]["gpus"]) == sorted(place["gpus"])
        else:
            assert place["nvswitch_partition"] is None


@pytest.mark.parametrize("seed", range(12))
def test_planner_places_the_cp_sat_optimum_on_hgx_a100_boards(seed):
    """The HGX A100 board (one baseboard, the guide's table): the same optimum, and each placement's
    partition ID the guide's (11-14 or 15-18 for two GPUs, never a cross-baseboard one)."""
    topology, tenants, policy, partitions = families.nvswitch_board(random.Random(77 + 1000 * seed), board="a100")
    plan = plan_tenants(topology, tenants, policy)
    assert value(plan) == placement_cpsat.optimum(topology, tenants, {}, partitions=partitions)
    assert plan["search"]["proven"] and not plan["search"]["exhausted"], plan["search"]
    assert_exclusive(topology, plan, policy)
    modules = policy["gpu_modules"]
    guide = dict((frozenset(members), number) for number, members in families.a100_partition_table())
    for place in plan["placements"].values():
        if place["gpus"]:
            physical = frozenset(modules[gpu] for gpu in place["gpus"])
            assert place["nvswitch_partition"]["id"] == guide[physical] and physical <= set(modules.values()), place
            assert place["nvswitch_partition"]["id"] not in (0, 3, 4, 5, 6)
        else:
            assert place["nvswitch_partition"] is None


def test_without_the_rule_the_reference_places_more_than_the_board_allows():
    """The rule binds: a tenant of 3 GPUs fits the host's counts but no partition."""
    topology, _tenants, policy, partitions = board()
    tenants = [{"name": "three", "gpus": 3, "vcpus": 2, "memory_mb": 1024}]
    assert placement_cpsat.optimum(topology, tenants) == (1, 1)
    assert placement_cpsat.optimum(topology, tenants, partitions=partitions) == (0, 0)
    plan = plan_tenants(topology, tenants, policy)
    assert plan["placements"] == {}
    assert plan["unplaced"]["three"] == (
        "tenant three asks for 3 GPUs: on the HGX H100/H200 8-GPU board (NVSwitch 0000:e0:00.0) a tenant's GPUs are exactly one "
        "Fabric Manager partition's, of 1, 2, 4, 8 GPUs; ask for one of those counts")


def test_single_gpu_tenants_pack_into_one_pair_and_leave_the_other_pair_whole():
    """first_fit places each tenant in turn: the second single GPU goes into the partition of 2 whose
    other GPU the first took, so the pair after it still finds a partition of 2 on the node."""
    topology, _tenants, policy, partitions = board(3)
    node0 = sorted(g["address"] for g in topology["gpus"] if g["numa_node"] == 0)
    tenants = [{"name": "a", "gpus": 1, "vcpus": 2, "memory_mb": 1024}, {"name": "b", "gpus": 1, "vcpus": 2, "memory_mb": 1024},
               {"name": "c", "gpus": 2, "vcpus": 2, "memory_mb": 1024}]
    plan = plan_tenants(topology, tenants, dict(policy, gpus=node0, strategy="first_fit"))
    assert sorted(plan["placements"]) == ["a", "b", "c"], plan["unplaced"]
    pair = set(plan["placements"]["a"]["gpus"] + plan["placements"]["b"]["gpus"])
    assert pair in [set(p) for p in partitions if len(p) == 2]
    ids = [plan["placements"][name]["nvswitch_partition"]["id"] for name in "abc"]
    assert len(set(ids)) == 3 and all(isinstance(i, int) for i in ids)


def test_named_gpus_must_be_one_partition():
    topology, _tenants, policy, partitions = board(5)
    pair = [p for p in partitions if len(p) == 2][0]
    other = [p for p in partitions if len(p) == 2 and p[0] not in pair and p[1] not in pair][0]
    wrong = [pair[0], other[0]]
    plan = plan_tenants(topology, [{"name": "named", "gpus": wrong, "vcpus": 2, "memory_mb": 1024}], policy)
    why = plan["unplaced"]["named"]
    assert why.startswith("tenant named names GPUs %s, %s (module IDs %d, %d), which are no Fabric Manager partition of the "
                          "HGX H100/H200 8-GPU board" % (wrong[0], wrong[1], policy["gpu_modules"][wrong[0]], policy["gpu_modules"][wrong[1]]))
    assert "%s, %s" % pair in why
    plan = plan_tenants(topology, [{"name": "named", "gpus": list(pair), "vcpus": 2, "memory_mb": 1024}], policy)
    assert plan["placements"]["named"]["gpus"] == list(pair)


def test_without_module_ids_single_gpus_are_planned_and_several_refused():
    topology, _tenants, _policy, _partitions = board()
    tenants = [{"name": "one", "gpus": 1, "vcpus": 2, "memory_mb": 1024}, {"name": "two", "gpus": 2, "vcpus": 2, "memory_mb": 1024}]
    plan = plan_tenants(topology, tenants, {})
    assert plan["placements"]["one"]["nvswitch_partition"]["id"] is None
    assert "policy.gpu_modules not given" in plan["placements"]["one"]["nvswitch_partition"]["why"]
    assert plan["unplaced"]["two"].startswith("tenant two asks for 2 GPUs: on the HGX H100/H200 8-GPU board (NVSwitch 0000:e0:00.0) "
                                              "they must be one Fabric Manager partition's GPUs, which policy.gpu_modules names; "
                                              "give each GPU's module ID (the GPU's module ID as nvidia-smi -q prints it")


def test_bad_module_ids_are_refused_before_any_plan():
    topology, _tenants, policy, _partitions = board()
    modules = dict(policy["gpu_modules"])
    modules.pop(sorted(modules)[0])
    with pytest.raises(InputError, match="policy.gpu_modules: no GPU has module ID"):
        plan_tenants(topology, [], {"gpu_modules": modules})


def test_a_host_without_nvswitch_has_no_partition_in_its_plan():
    topology = families.switched_host([{"cores": 8, "switches": [{"groups": [1, 1, 1], "nics": 0}]}])
    plan = plan_tenants(topology, [{"name": "t", "gpus": 3, "vcpus": 2, "memory_mb": 1024}])
    assert len(plan["placements"]["t"]["gpus"]) == 3 and plan["placements"]["t"]["nvswitch_partition"] is None


def test_on_a_board_whose_partitions_are_not_known_single_gpus_are_planned_and_several_refused():
    """An NVSwitch the collection has no table for (a made-up device ID, 10de:1aaa)."""
    topology, _tenants, _policy, _partitions = board()
    topology["pci_devices"]["0000:e0:00.0"]["device_id"] = "0x1aaa"
    gpu = sorted(g["address"] for g in topology["gpus"])[0]
    tenants = [{"name": "named", "gpus": [gpu], "vcpus": 2, "memory_mb": 1024}, {"name": "one", "gpus": 1, "vcpus": 2, "memory_mb": 1024},
               {"name": "two", "gpus": 2, "vcpus": 2, "memory_mb": 1024}]
    plan = plan_tenants(topology, tenants, {})
    assert sorted(plan["placements"]) == ["named", "one"]
    assert plan["placements"]["named"]["nvswitch_partition"]["id"] is None
    assert plan["unplaced"]["two"] == (
        "tenant two asks for 2 GPUs: on the NVSwitch 10de:1aaa board (NVSwitch 0000:e0:00.0) a tenant's GPUs reach each "
        "other only as one Fabric Manager partition, and this board's partitions are not known to the collection; ask for 1 GPU")


def test_an_hgx_a100_board_without_module_ids_plans_single_gpus_and_asks_for_them_for_more():
    topology, _tenants, _policy, _partitions = families.nvswitch_board(random.Random(4), board="a100")
    tenants = [{"name": "one", "gpus": 1, "vcpus": 2, "memory_mb": 1024}, {"name": "two", "gpus": 2, "vcpus": 2, "memory_mb": 1024},
               {"name": "sixteen", "gpus": 16, "vcpus": 2, "memory_mb": 1024}]
    plan = plan_tenants(topology, tenants, {})
    assert sorted(plan["placements"]) == ["one"]
    assert plan["unplaced"]["two"].startswith(
        "tenant two asks for 2 GPUs: on the HGX A100 8-GPU board (NVSwitch 0000:e0:00.0) they must be one Fabric Manager "
        "partition's GPUs, which policy.gpu_modules names")
    assert plan["unplaced"]["sixteen"].endswith("of 1, 2, 4, 8 GPUs; ask for one of those counts")
