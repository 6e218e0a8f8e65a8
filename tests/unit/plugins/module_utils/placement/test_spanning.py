# -*- coding: utf-8 -*-
"""One-node and spanning tenants decided together (placement/spanning.py) under ``numa: spread``,
against the exact CP-SAT reference extended to spanning tenants (tests/unit/placement_cpsat.py,
``cells=True``): on generated 2-, 4- and 8-node families (placement_families.spanning_mix) the
plan never places more than the optimum (the reference is an upper bound the planner's rules
obey), ``proven`` is true only at the optimum (count, then online count), and the rules hold; the
smallest cases of the issue (a 4-GPU tenant spanning while two big one-node tenants take a node
each; an online tenant spanning before a batch one takes the room) reach the optimum."""

from __future__ import annotations

import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants

import placement_cpsat  # pylint: disable=import-error
import placement_families as families  # pylint: disable=import-error
from placement_checks import assert_exclusive  # pylint: disable=import-error
from placement_topologies import synthetic, tenant  # pylint: disable=import-error

# 2 nodes of 16 cores x 2 threads and 2 GPUs each, 4096 2M pages per node
TWO_NODES = synthetic(2, [16, 16], 2, [2, 2], [0, 0], [4096, 4096])
SPREAD = {"numa": "spread"}
# seeds per node count: each instance takes the planner milliseconds and CP-SAT up to seconds
INSTANCES = {2: 20, 4: 20, 8: 12}


def value(plan):
    """(tenants placed, online ones, guest cells)."""
    placed = plan["placements"].values()
    return (len(placed), sum(1 for p in placed if p["priority"] == "online"),
            sum(len(p["cells"]) if p["cells"] else 1 for p in placed))


def test_a_four_gpu_tenant_spans_while_two_big_ones_take_a_node_each():
    """g1 (1 GPU, 28 vCPUs), c1 and c2 (28 vCPUs), big (4 GPUs, 2 vCPUs): the one-node search places
    g1 and c1 and no node holds big; placing big across both nodes first leaves each node room for
    one of c1, c2: 3 placed, the optimum."""
    tenants = [tenant("g1", vcpus=28, gpus=1), tenant("c1", vcpus=28), tenant("c2", vcpus=28), tenant("big", vcpus=2, gpus=4)]
    plan = plan_tenants(TWO_NODES, tenants, SPREAD)
    assert_exclusive(TWO_NODES, plan, SPREAD)
    assert sorted(plan["placements"]) == ["big", "c1", "c2"]
    assert plan["placements"]["big"]["numa_nodes"] == [0, 1] and len(plan["placements"]["big"]["gpus"]) == 4
    assert sorted(plan["placements"][name]["numa_node"] for name in ("c1", "c2")) == [0, 1]
    assert plan["search"]["kept"] == "spanning_first" and plan["search"]["spread"] == ["big"]
    assert value(plan)[:2] == placement_cpsat.optimum(TWO_NODES, tenants, SPREAD)


def test_an_online_tenant_spans_before_a_batch_one_takes_its_room():
    """b (batch, 28 vCPUs) fits a node, w (online, 48 vCPUs) only both: the plan places w across
    the nodes (one online tenant), not b alone, and says it is proven only where it is."""
    tenants = [tenant("b", vcpus=28, priority="batch"), tenant("w", vcpus=48)]
    plan = plan_tenants(TWO_NODES, tenants, SPREAD)
    assert_exclusive(TWO_NODES, plan, SPREAD)
    assert list(plan["placements"]) == ["w"] and plan["placements"]["w"]["numa_nodes"] == [0, 1]
    assert value(plan)[:2] == placement_cpsat.optimum(TWO_NODES, tenants, SPREAD) == (1, 1)
    # the host's free CPUs added up hold only one of them: proven
    assert plan["search"]["proven"], plan["search"]


def test_spanning_tenants_online_first():
    """Two tenants no node holds, room for one across the nodes: the online one, though listed last."""
    tenants = [tenant("batch", vcpus=40, priority="batch"), tenant("online", vcpus=40)]
    plan = plan_tenants(TWO_NODES, tenants, SPREAD)
    assert list(plan["placements"]) == ["online"] and "batch" in plan["unplaced"]


def test_a_plan_a_bound_does_not_cover_is_not_proven():
    """Where no bound shows that no plan places more, the plan says so, and why."""
    topology, tenants, policy = families.spanning_mix(random.Random(11 * 31 + 2), 2)
    plan = plan_tenants(topology, tenants, policy)
    assert not plan["search"]["proven"]
    assert any(why.startswith("tenants may span NUMA nodes (numa: spread): the plan is the best of the search's and of ")
               for why in plan["search"]["not_proven"]), plan["search"]


def test_without_spanning_tenants_nothing_changes():
    """numa required: no tenant may span, no plan is tried with one first, the proof is the search's."""
    tenants = [tenant("g1", vcpus=28, gpus=1), tenant("c1", vcpus=28), tenant("c2", vcpus=28), tenant("big", vcpus=2, gpus=4)]
    plan = plan_tenants(TWO_NODES, tenants)
    assert sorted(plan["placements"]) == ["c1", "g1"] and plan["search"]["kept"] == "search"
    assert plan["search"]["proven"] and "spread" not in plan["search"]


@pytest.mark.parametrize("nodes,seed", [(nodes, seed) for nodes, count in sorted(INSTANCES.items()) for seed in range(count)])
def test_spanning_families_against_the_exact_reference(nodes, seed):
    """Never above the optimum (count, online, then at those no fewer cells than the fewest);
    proven only at it; every rule kept."""
    topology, tenants, policy = families.spanning_mix(random.Random(seed * 31 + nodes), nodes)
    plan = plan_tenants(topology, tenants, policy)
    assert_exclusive(topology, plan, policy)
    best = placement_cpsat.optimum(topology, tenants, policy, cells=True, seconds=120)
    got = value(plan)
    assert got[:2] <= best[:2], (got, best)
    if got[:2] == best[:2]:
        assert got[2] >= best[2], (got, best)
    if plan["search"]["proven"]:
        assert got[:2] == best[:2], (got, best, plan["search"])
