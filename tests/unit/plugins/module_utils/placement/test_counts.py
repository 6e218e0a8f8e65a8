# -*- coding: utf-8 -*-
"""The planner against an exact CP-SAT reference (tests/unit/placement_cpsat.py) on generated
families beyond brute force (tests/unit/placement_families.py): IOMMU groups of 4 GPUs, SMT
threads offline, 8-GPU nodes with groups of 4, 2 and 1, two switches per node under
pcie_affinity require. Each plan places as many tenants, and as many online ones, as the
optimum, proves it (search.proven), and keeps the rules the reference does not see."""

from __future__ import annotations

import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants

import placement_cpsat  # pylint: disable=import-error
import placement_families as families  # pylint: disable=import-error
from placement_checks import assert_exclusive  # pylint: disable=import-error

# instances per family: each takes the planner milliseconds and CP-SAT a fraction of a second
INSTANCES = {"acs_groups": 10, "smt_offline": 8, "mixed_groups": 10, "two_switches": 10}


def value(plan):
    placed = plan["placements"].values()
    return len(placed), sum(1 for p in placed if p["priority"] == "online")


def groups_whole(topology, plan):
    members = {}
    for address, device in topology["pci_devices"].items():
        members.setdefault(device.get("iommu_group"), set()).add(address)
    pool = set(g["address"] for g in topology["gpus"])
    for place in plan["placements"].values():
        for gpu in place["gpus"]:
            number = topology["pci_devices"][gpu].get("iommu_group")
            group = members[number] & pool if number is not None else {gpu}
            assert group <= set(place["gpus"]), (place["name"], gpu, group)


@pytest.mark.parametrize("family,seed", [(name, seed) for name, count in sorted(INSTANCES.items()) for seed in range(count)])
def test_planner_places_the_cp_sat_optimum(family, seed):
    topology, tenants, policy = families.FAMILIES[family](random.Random(7 + 1000 * seed))
    planner_policy = dict((k, v) for k, v in policy.items() if k != "reserved_cpus_set")
    plan = plan_tenants(topology, tenants, planner_policy)
    assert value(plan) == placement_cpsat.optimum(topology, tenants, policy)
    assert plan["search"]["proven"] and not plan["search"]["exhausted"], plan["search"]
    assert_exclusive(topology, plan, planner_policy)
    groups_whole(topology, plan)
    if planner_policy.get("pcie_affinity") == "require":
        for place in plan["placements"].values():
            if place["gpus"] and place["vfs"]:
                assert place["pcie_affinity"] in ("PIX", "PXB"), place


def test_a_relaxed_count_is_said_and_the_greedy_kept_when_better():
    """GPU groups of 2 and 3 (neither divides the other): the counts are a relaxation, the plan says
    what is not proven, and it is never below the greedy."""
    topology = families.switched_host([{"cores": 16, "switches": [{"groups": [2, 3], "nics": 0}]}])
    tenants = [{"name": "t%d" % i, "gpus": gpus, "vcpus": 2, "memory_mb": 1024} for i, gpus in enumerate([2, 3, 1, 5])]
    plan = plan_tenants(topology, tenants)
    greedy = plan_tenants(topology, tenants, {"search_budget": 1})
    assert not plan["search"]["proven"]
    assert plan["search"]["not_proven"] == ["the counts are a relaxation for GPU IOMMU groups of sizes 2, 3 "
                                            "(one does not divide the next)"]
    assert value(plan) >= value(greedy) and value(plan) == placement_cpsat.optimum(topology, tenants)
