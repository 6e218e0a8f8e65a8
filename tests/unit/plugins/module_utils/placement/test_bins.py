# -*- coding: utf-8 -*-
"""The nodes-alike count (placement/bins.py) against every assignment tried, the search
(placement/search.py) on hosts of nodes alike, where its root asks it, against every assignment,
and plans it proves against the exact CP-SAT reference (tests/unit/placement_cpsat.py)."""

from __future__ import annotations

import itertools
import operator
import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import bins as bins_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.bins import most_in_bins
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import guard_fields, pack, pack_all
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.search import Candidate, Search

import placement_cpsat  # pylint: disable=import-error
import placement_families as families  # pylint: disable=import-error

from .test_search import brute_force, value_of


def most_by_hand(demands, room, bins):
    """The most of ``demands`` that ``bins`` nodes of ``room`` hold, over every assignment."""
    best = 0
    for choice in itertools.product(range(bins + 1), repeat=len(demands)):
        used = [[0] * len(room) for _node in range(bins)]
        for demand, node in zip(demands, choice):
            if node < bins:
                used[node] = [a + b for a, b in zip(used[node], demand)]
        if all(a <= b for row in used for a, b in zip(row, room)):
            best = max(best, sum(1 for node in choice if node < bins))
    return best


def alike(rng):
    room = (rng.randint(2, 8), rng.randint(0, 2), rng.randint(1, 6))
    sizes = [(rng.randint(1, 4), rng.randint(0, 1), rng.randint(1, 4)) for _kind in range(rng.randint(1, 4))]
    demands = [rng.choice(sizes) for _tenant in range(rng.randint(1, 7))]
    return demands, room, rng.randint(1, 3)


@pytest.mark.parametrize("seed", range(120))
def test_the_answer_is_exact(seed):
    demands, room, bins = alike(random.Random(seed))
    most = most_by_hand(demands, room, bins)
    for least in range(len(demands) + 1):
        found, _steps = most_in_bins(demands, room, bins, 10 ** 6, least)
        if most > least:
            assert found is None, (demands, room, bins, least)
        else:
            # never below what fits, never above what was asked
            assert found is not None and most <= found <= least, (demands, room, bins, least, found)


def test_each_tenant_is_counted_once_over_the_nodes():
    # two nodes of 2 GPUs and 4 pages, tenants of (1 GPU, 2 pages) x 2 and (2 GPUs, 1 page) x 2:
    # counted apart each node holds two of them (the two small ones), 4 in all; together the
    # small ones take one node and a large one the other: 3
    demands = [(1, 2), (1, 2), (2, 1), (2, 1)]
    assert most_by_hand(demands, (2, 4), 2) == 3
    assert most_in_bins(demands, (2, 4), 2, 10 ** 6, 3)[0] == 3
    assert most_in_bins(demands, (2, 4), 2, 10 ** 6, 2)[0] is None


def test_past_the_steps_it_says_nothing():
    # three nodes of 3 pages hold 9 of these: proven with the steps it needs, nothing said past 1
    demands = [(1, 1)] * 6 + [(2, 1)] * 6
    assert most_in_bins(demands, (4, 3), 3, 10 ** 6, 9)[0] == 9
    found, steps = most_in_bins(demands, (4, 3), 3, 1, 9)
    assert found is None and steps > 1


def alike_instance(rng):
    """A host whose nodes are alike, some of them (one static class per room), and tenants that
    may go on some of them."""
    shapes = [(rng.randint(3, 8), rng.randint(0, 2), rng.randint(1, 4)) for _shape in range(2)]
    caps = [rng.choice(shapes) for _node in range(rng.randint(2, 4))]
    sizes = [(rng.randint(1, 4), rng.randint(0, 1), rng.randint(1, 3)) for _kind in range(3)]
    candidates = []
    for _tenant in range(rng.randint(3, 7)):
        size = rng.choice(sizes)
        # the same nodes for every tenant of a room: the nodes alike stay alike
        options = [(slot, size, 0, 0) for slot in range(len(caps)) if all(need <= room for need, room in zip(size, caps[slot]))]
        if options:
            candidates.append(Candidate(options, rng.random() < 0.7))
    classes = [shapes.index(cap) for cap in caps]
    return caps, classes, candidates


@pytest.mark.parametrize("seed", range(150))
def test_search_on_nodes_alike_finds_the_best(seed):
    caps, classes, candidates = alike_instance(random.Random(7000 + seed))
    if not candidates:
        return
    search = Search(caps, classes, candidates, 100000)
    assignment = search.run()
    assert not search.exhausted
    best = brute_force(caps, candidates)
    assert value_of(caps, candidates, assignment, search.best_choice) == search.best == best
    # the ceiling the root settled on is never below the best there is
    assert search.ceiling >= best


def benchmark_mix(rng, count):
    """The benchmark's tenant mix (benchmarks/bench_planner.py: tenant_mix), drawn alike."""
    tenants = []
    for index in range(count):
        gpus = rng.choice([0, 1, 1, 1, 2])
        tenants.append({"name": "t%02d" % index, "gpus": gpus, "vfs": rng.choice([0, 1, 1, 2]) if gpus else rng.choice([0, 1]),
                        "vcpus": rng.choice([4, 8, 8, 12, 16, 24]), "memory_mb": rng.choice([8192, 16384, 32768])})
    return tenants


@pytest.mark.parametrize("count,index", [(32, 50), (32, 51), (32, 73), (64, 44)])
def test_nodes_alike_prove_plans_the_budget_left_unproven(count, index):
    # the benchmark's 16-node DGX-class host (8 alike nodes with a switch of 2 GPUs and 2 NICs, 8
    # alike without): these mixes spent the search budget of 20,000 nodes before the nodes alike
    # were counted together; now the plan is proven, and it is the CP-SAT optimum (up to 6 s of
    # CP-SAT on an idle machine: room for a loaded one)
    topology = families.switched_host([{"cores": 16, "switches": [{"groups": [1, 1], "nics": 2}] if node % 2 else []}
                                       for node in range(16)], pages=16384)
    tenants = benchmark_mix(random.Random(100000 * count + index), count)
    plan = plan_tenants(topology, tenants, {})
    assert plan["search"]["proven"] and not plan["search"]["exhausted"], plan["search"]
    placed = plan["placements"].values()
    assert (len(placed), sum(1 for p in placed if p["priority"] == "online")) == placement_cpsat.optimum(topology, tenants, {}, seconds=120)


def largest_sets_by_vectors(items, room, limit):
    """The largest sets of ``items`` that fit in ``room`` together as bins.py found them before its
    walk was packed and looked only at the items that fit the parent's room: every item from the
    next on looked at, each resource compared on its own: (masks, steps), or (None, steps)."""
    found = []
    steps = 0
    size = len(items)
    stack = [(0, tuple(room), 0)]
    while stack:
        start, left, mask = stack.pop()
        grown = False
        for number in range(start, size):
            if all(map(operator.ge, left, items[number])):
                grown = True
                stack.append((number + 1, tuple(map(operator.sub, left, items[number])), mask | 1 << number))
        steps += size - start
        if steps > limit:
            return None, steps
        if grown:
            continue
        for number in range(start):
            if not mask >> number & 1 and all(map(operator.ge, left, items[number])):
                break
        else:
            found.append(mask)
    return found, steps


def first_fit_by_vectors(items, room, bins):
    """bins.py's quick packing with each resource compared on its own."""
    left = list(items)
    placed = 0
    for _node in range(bins):
        room_left = room
        rest = []
        for demand in left:
            if all(map(operator.ge, room_left, demand)):
                room_left = tuple(map(operator.sub, room_left, demand))
                placed += 1
            else:
                rest.append(demand)
        left = rest
    return placed


def walk_in_full(demands, room, bins, limit, least):
    """most_in_bins as it was before its shortcuts: every pick's test made at every step of the
    walk (no step passed over as one that can walk no pick, none cut to the sets larger than an
    even share), the sets found and the quick packing over the vectors: the answers and steps the
    walk's shortcuts must keep."""
    items = sorted(demand for demand in demands if all(map(operator.ge, room, demand)))
    total = len(items)
    if total <= min(bins, least):
        return total, 0
    if not bins:
        return 0, 0
    if total <= least:
        return total, 0
    if first_fit_by_vectors(items, room, bins) > least:
        return None, 0
    sets, steps = largest_sets_by_vectors(items, room, limit)
    if sets is None:
        return None, steps
    sized = sorted(((bin(mask).count("1"), mask) for mask in sets), reverse=True)
    if min(total, bins * sized[0][0]) <= least:
        return least, steps
    masks = [mask for _size, mask in sized]
    stack = [(0, (1 << total) - 1, bins, 0)]
    while stack:
        start, left, bins_left, placed = stack.pop()
        if placed > least:
            return None, steps
        if not bins_left or placed + bin(left).count("1") <= least:
            continue
        steps += len(masks) - start
        if steps > limit:
            return None, steps
        gains = [bin(mask & left).count("1") for mask in masks[start:]]
        most = 0
        picks = []
        for offset in range(len(gains) - 1, -1, -1):
            gain = gains[offset]
            most = max(most, gain)
            if gain and gain + (bins_left - 1) * most > least - placed:
                picks.append((start + offset, left & ~masks[start + offset], bins_left - 1, placed + gain))
        picks.sort(key=lambda pick: pick[3])
        stack.extend(picks)
    return least, steps


def walk_case(rng):
    """Nodes alike and tenants for them, drawn: some tenants that do not fit, many that do."""
    room = (rng.randint(4, 16), rng.randint(0, 2), rng.randint(2, 12))
    sizes = [(rng.randint(1, 6), rng.randint(0, 1), rng.randint(1, 5)) for _kind in range(rng.randint(2, 6))]
    demands = [rng.choice(sizes) for _tenant in range(rng.randint(4, 16))]
    return demands, room, rng.randint(1, 5)


@pytest.mark.parametrize("seed", range(80))
def test_the_walk_takes_the_steps_of_the_full_walk(seed):
    # the walk passes over the steps where no pick can place more than least: the same answers and
    # the same steps (what the search's budget of steps counts) as the walk that tests every pick
    demands, room, bins = walk_case(random.Random(seed))
    for least in range(len(demands) + 1):
        for limit in (3, 60, 400, 10 ** 6):
            assert most_in_bins(demands, room, bins, limit, least) == walk_in_full(demands, room, bins, limit, least), \
                (demands, room, bins, limit, least)


@pytest.mark.parametrize("seed", range(80))
def test_the_packed_sets_and_packing_are_those_of_the_vectors(seed):
    # the largest sets (and the steps to find them, cut short or not) and the quick packing, packed
    # and looking only at the items that fit the parent's room, against those over the vectors
    demands, room, bins = walk_case(random.Random(1000 + seed))
    items = sorted(demand for demand in demands if all(map(operator.ge, room, demand)))
    fields, guards = guard_fields(list(room))
    needs, packed_room = pack_all(items, fields), guards + pack(room, fields)
    assert bins_module._first_fit(needs, packed_room, guards, bins) == first_fit_by_vectors(items, room, bins)
    for limit in (0, 5, 30, 200, 10 ** 6):
        assert bins_module._largest_sets(needs, packed_room, guards, limit) == largest_sets_by_vectors(items, room, limit)
