# -*- coding: utf-8 -*-
"""The split bound of the placement search (placement/search_bounds.py, Bounds._split_bound): the
host split in two at the nodes some tenants are confined to, each part's configuration bound
(placement/lagrange.py, tenants counted by kind) rounded down on its own. Checked against every
assignment on small hosts (never below the most placed), with a weakened bound that these checks
catch, the search still exact with it, and plans it proves on the benchmark's 128-tenant DGX
A100-class host against the exact CP-SAT reference (tests/unit/placement_cpsat.py)."""

from __future__ import annotations

import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import search as search_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import search_bounds
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import Configurations
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.search import Candidate, Search

import placement_cpsat  # pylint: disable=import-error
from placement_topologies import dgx_a100  # pylint: disable=import-error

from .test_bins import benchmark_mix
from .test_search import brute_force, value_of

# the planner benchmark's policy (benchmarks/bench_planner.py); CP-SAT reads the reserved CPUs as a set
POLICY = {"reserved_cpus": "0-1,128-129"}
CPSAT_POLICY = dict(POLICY, reserved_cpus_set=[0, 1, 128, 129])


def confined_instance(rng):
    """A host of GPU nodes (cores, GPUs, pages) and nodes without GPUs, alike within each kind
    most often; tenants with GPUs go only to the GPU nodes, the others anywhere they fit; a few
    kinds of tenant, so that kinds repeat as in a real mix."""
    gpu_room = (rng.randint(4, 8), rng.randint(1, 2), rng.randint(2, 4))
    cpu_room = (rng.randint(3, 8), 0, rng.randint(2, 4))
    caps = [gpu_room] * rng.randint(1, 2) + [cpu_room] * rng.randint(1, 2)
    if rng.random() < 0.3:
        caps.append((cpu_room[0] - 1, 0, cpu_room[2]))
    sizes = [(rng.randint(1, 4), rng.choice([0, 0, 1]), rng.randint(1, 2)) for _kind in range(rng.randint(2, 4))]
    candidates = []
    for _tenant in range(rng.randint(3, 7)):
        size = rng.choice(sizes)
        options = [(slot, size, 0, 0) for slot, room in enumerate(caps) if all(need <= have for need, have in zip(size, room))]
        if options:
            candidates.append(Candidate(options, rng.random() < 0.7))
    classes = [caps.index(cap) for cap in caps]
    return caps, classes, candidates


def split_of(caps, classes, candidates):
    """The split bound at the root of a search of these tenants, the best found set to nothing
    (so that the bound takes all its steps): its count, or None."""
    search = Search(caps, classes, candidates, 100000)
    search.best = (0, 0, 0)
    search.dominated = search.dominators = [0] * len(candidates)
    found = search._split_bound()  # pylint: disable=protected-access
    return None if found is None else found[0]


def counterexamples(seeds):
    """The seeds whose split bound says fewer tenants than the most that fit (every assignment)."""
    wrong = []
    asked = 0
    for seed in seeds:
        caps, classes, candidates = confined_instance(random.Random(9100 + seed))
        if not candidates:
            continue
        found = split_of(caps, classes, candidates)
        if found is None:
            continue
        asked += 1
        if found < brute_force(caps, candidates)[0]:
            wrong.append(seed)
    return wrong, asked


def test_never_below_the_most_placed():
    wrong, asked = counterexamples(range(200))
    assert not wrong
    # the bound was asked on most of them (a host with nodes that some tenants are confined to)
    assert asked > 100


def test_a_weakened_bound_is_caught(monkeypatch):
    # each part's configuration bound one lower than it is (as a bound that forgot a tenant kind
    # would say): the check above finds hosts where the sum is below what fits
    real = Configurations.most

    def one_lower(self, target, steps):
        bound = real(self, target, steps)
        return None if bound is None else bound - 1

    monkeypatch.setattr(search_bounds.Configurations, "most", one_lower)
    wrong, _asked = counterexamples(range(200))
    assert wrong


def test_each_part_counts_the_tenants_that_may_go_there(monkeypatch):
    # a part that counted only the tenants confined to it (not those that may also go to the
    # other part) would be no bound: the check finds hosts where that sum is below what fits
    def confined_only(members, where, part):
        return [(number, its) for number, its in zip(members, where) if its and not its & ~part]

    monkeypatch.setattr(search_bounds, "part_tenants", confined_only)
    wrong, _asked = counterexamples(range(200))
    assert wrong


@pytest.mark.parametrize("seed", range(120))
def test_the_search_with_the_split_bound_finds_the_best(seed, monkeypatch):
    # the bound asked on every search (not only those of 20 tenants or more): the search stays exact
    monkeypatch.setattr(search_module, "DUALS_FROM", 0)
    caps, classes, candidates = confined_instance(random.Random(9100 + seed))
    if not candidates:
        return
    search = Search(caps, classes, candidates, 100000)
    assignment = search.run()
    assert not search.exhausted
    best = brute_force(caps, candidates)
    assert value_of(caps, candidates, assignment, search.best_choice) == search.best == best
    assert search.ceiling >= best


def test_a_split_proves_what_the_whole_host_bound_does_not():
    # mix 0 of the benchmark's 128 tenants on the DGX A100-class host: 11 tenants without GPUs or VFs
    # may go anywhere, the others only to the four GPU nodes. The configuration bound of the whole
    # host stays above 21 (about 22, one linear-programming value); split, the GPU nodes' part
    # is about 14.5 and the other nodes' about 7.5: 14 + 7 = 21, the plan's count
    topology = dgx_a100()
    tenants = benchmark_mix(random.Random(100000 * 128 + 0), 128)
    captured = []
    real = search_module.Search.run

    def run(self):
        captured.append(self)
        return real(self)

    search_module.Search.run = run
    try:
        plan = plan_tenants(topology, tenants, POLICY)
    finally:
        search_module.Search.run = real
    search = captured[0]
    assert len(plan["placements"]) == 21 and plan["search"]["proven"] and not plan["search"]["exhausted"]
    members, where, _bits = search._fitting(0)  # pylint: disable=protected-access
    whole = Configurations(search.caps, [search.queue[number].fits for number in members], where)
    assert whole.most(21, 120) >= 22 - 1e-6


@pytest.mark.parametrize("index", [0, 97])
def test_plans_the_split_proves_are_the_cp_sat_optimum(index):
    # two of the five mixes of the planner benchmark's 128 tenants on the DGX A100-class host
    # (0, 34, 95, 97, 98) that spent the search budget of 20,000 nodes before the split bound:
    # now proven without the budget spent, and the count is CP-SAT's optimum (120 s allowed, a
    # few seconds on an idle machine)
    topology = dgx_a100()
    tenants = benchmark_mix(random.Random(100000 * 128 + index), 128)
    plan = plan_tenants(topology, tenants, POLICY)
    assert plan["search"]["proven"] and not plan["search"]["exhausted"], plan["search"]
    placed = plan["placements"].values()
    found = (len(placed), sum(1 for p in placed if p["priority"] == "online"))
    assert found == placement_cpsat.optimum(topology, tenants, CPSAT_POLICY, seconds=120)
