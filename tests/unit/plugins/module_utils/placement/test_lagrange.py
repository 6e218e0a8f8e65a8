# -*- coding: utf-8 -*-
"""The Lagrangian bounds of the search (placement/lagrange.py) on their own: never below the most
tenants that fit (brute force), the node knapsack exact, and the configuration bound proving
what the bounds on capacities cannot (whole tenants per node)."""

from __future__ import annotations

import itertools
import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import lagrange as placement_lagrange
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import search as placement_search
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import (
    Configurations, Packing, _grow, _knapsack, capacity_prices, guard_fields, most_that_fit, pack, pack_all)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.search import Candidate, Search
from ansible_collections.gpuvirt.tenancy.tests.unit.plugins.module_utils.placement import test_search as search_tests


def most_fitting(caps, fits):
    """The most tenants placed at once, over every assignment (each tenant on one of its slots or
    out): the search tests' brute force, on tenants with no rank, claim or priority."""
    candidates = [Candidate([(slot, demand, 0, 0) for slot, demand in options], False) for options in fits]
    return search_tests.brute_force(caps, candidates)[0]


def instance(rng):
    nodes = rng.randint(1, 3)
    caps = [(rng.randint(4, 16), rng.randint(0, 2), rng.choice([4, 8])) for _node in range(nodes)]
    sizes = [(rng.randint(2, 9), rng.randint(0, 1), rng.choice([1, 2, 4])) for _kind in range(3)]
    fits = []
    for _tenant in range(rng.randint(2, 7)):
        size = rng.choice(sizes)  # few sizes: tenants of one kind share a price
        options = [(slot, size) for slot in range(nodes) if all(need <= room for need, room in zip(size, caps[slot])) and rng.random() < 0.8]
        if options:
            fits.append(options)
    return caps, fits


@pytest.mark.parametrize("seed", range(120))
def test_bounds_are_never_below_the_most_that_fit(seed):
    caps, fits = instance(random.Random(seed))
    if not fits:
        return
    most = most_fitting(caps, fits)
    configs = Configurations(caps, fits, [(1 << len(caps)) - 1] * len(fits))
    # a target below the most that fit: the steps run on, the prices move, the bound stays above
    for target in (0, most - 1, most):
        bound = configs.most(target, 10)
        assert bound is not None and bound >= most - 1e-9
    prices = capacity_prices(caps, fits, 0)
    worth = sum(price * room for row, cap in zip(prices, caps) for price, room in zip(row, cap))
    gains = sum(max([0.0] + [1.0 - sum(p * need for p, need in zip(prices[slot], demand)) for slot, demand in options]) for options in fits)
    assert worth + gains >= most - 1e-9


@pytest.mark.parametrize("seed", range(80))
def test_the_node_knapsack_is_exact(seed):
    rng = random.Random(5000 + seed)
    cap = [rng.randint(4, 16), rng.randint(0, 3)]
    items = [(rng.choice([0.1, 0.5, 0.75, 1.0]), kind, (rng.randint(1, 8), rng.randint(0, 2)), rng.randint(1, 3)) for kind in range(rng.randint(1, 5))]
    gain, taken = _knapsack(cap, items)
    best = 0.0
    for numbers in itertools.product(*[range(many + 1) for _gain, _kind, _need, many in items]):
        used = [sum(number * need[r] for number, (_g, _k, need, _m) in zip(numbers, items)) for r in range(2)]
        if all(use <= room for use, room in zip(used, cap)):
            best = max(best, sum(number * item_gain for number, (item_gain, _k, _n, _m) in zip(numbers, items)))
    assert gain == pytest.approx(best)
    # what it says it took fits and adds up to the gain
    by_kind = dict((item[1], item) for item in items)
    assert sum(by_kind[kind][0] * number for kind, number in taken) == pytest.approx(gain)
    assert all(sum(by_kind[kind][2][r] * number for kind, number in taken) <= cap[r] for r in range(2))


@pytest.mark.parametrize("seed", range(60))
def test_the_knapsack_cut_of_dominated_kinds_keeps_the_best_found(monkeypatch, seed):
    # kinds enough for the cut (DOMINANCE_FROM), many of them taking no more than another of no
    # less gain: the same gain as brute force, and the same kinds taken as without the cut
    rng = random.Random(9000 + seed)
    cap = [rng.randint(6, 20), rng.randint(0, 3), rng.randint(2, 8)]
    items = [(rng.choice([0.25, 0.5, 0.75, 1.0]), kind, (rng.randint(1, 7), rng.randint(0, 1), rng.randint(0, 3)), rng.randint(1, 2))
             for kind in range(rng.randint(placement_lagrange.DOMINANCE_FROM + 1, 9))]
    gain, taken = _knapsack(cap, items)
    best = 0.0
    for numbers in itertools.product(*[range(many + 1) for _gain, _kind, _need, many in items]):
        if all(sum(number * item[2][r] for number, item in zip(numbers, items)) <= cap[r] for r in range(3)):
            best = max(best, sum(number * item[0] for number, item in zip(numbers, items)))
    assert gain == pytest.approx(best)
    monkeypatch.setattr(placement_lagrange, "DOMINANCE_FROM", len(items))
    assert _knapsack(cap, items) == (gain, taken)


def test_a_packing_checks_every_resource_at_once():
    packing = Packing([16, 2, 8], [(9, 1, 0), (7, 2, 8), (16, 0, 9)])
    room, guards = packing.room, packing.guards
    assert (room - packing.packed[(9, 1, 0)]) & guards == guards
    assert (room - packing.packed[(7, 2, 8)]) & guards == guards
    assert (room - packing.packed[(16, 0, 9)]) & guards != guards  # one VF too many
    left = room - packing.packed[(9, 1, 0)]
    assert (left - packing.packed[(7, 2, 8)]) & guards != guards  # 16 cores, 2 GPUs: not both
    assert (9, 1, 0) in packing.below[(9, 1, 0)] and (9, 1, 0) not in packing.below[(7, 2, 8)]


@pytest.mark.parametrize("seed", range(20))
def test_packing_many_packs_each_as_one(seed):
    draw = random.Random(seed)
    width = draw.randint(1, 6)
    vectors = [tuple(draw.randint(0, draw.choice((1, 9, 40000))) for _resource in range(width)) for _vector in range(draw.randint(0, 9))]
    fields, _guards = guard_fields(list(map(max, zip([0] * width, *vectors))))
    assert pack_all(vectors, fields) == [pack(vector, fields) for vector in vectors]


def whole_tenants():
    # two nodes of 16 cores and tenants of 9 cores: the cores in total (32) hold three of them,
    # each node holds one
    caps = [(16, 0, 0), (16, 0, 0)]
    return caps, [Candidate([(0, (9, 0, 0), 0, 0), (1, (9, 0, 0), 0, 0)], True) for _tenant in range(4)]


def test_the_configuration_bound_knows_whole_tenants():
    caps, candidates = whole_tenants()
    fits = [candidate.fits for candidate in candidates]
    assert Configurations(caps, fits, [3] * len(fits)).most(2, 15) < 3
    prices = capacity_prices(caps, fits, 2)
    worth = sum(price * room for row, cap in zip(prices, caps) for price, room in zip(row, cap))
    gains = sum(max([0.0] + [1.0 - sum(p * need for p, need in zip(prices[slot], demand)) for slot, demand in options]) for options in fits)
    assert worth + gains >= 3 - 1e-6


def test_the_search_proves_whole_tenants_without_searching(monkeypatch):
    # the bound runs from DUALS_FROM tenants on (below it the depth-first search is quicker)
    monkeypatch.setattr(placement_search, "DUALS_FROM", 2)
    caps, candidates = whole_tenants()
    search = Search(caps, [0, 0], candidates, 20000)
    assignment = search.run()
    assert sum(slot is not None for slot in assignment) == 2 and search.best >= search.ceiling
    assert search.takers is None  # no depth-first search


def test_a_knapsack_past_its_steps_says_nothing(monkeypatch):
    monkeypatch.setattr(placement_lagrange, "KNAPSACK_STEPS", 1)
    assert _knapsack([16], [(1.0, 0, (3,), 2), (0.5, 1, (5,), 2)]) is None
    caps, candidates = whole_tenants()
    assert Configurations(caps, [c.fits for c in candidates], [3] * 4).most(2, 5) is None


@pytest.mark.parametrize("seed", range(150))
def test_the_search_with_the_bounds_finds_the_best_assignment(monkeypatch, seed):
    # the random instances of test_placement_search, with the Lagrangian bounds and their guesses
    # on from two tenants (the planner runs them from DUALS_FROM)
    monkeypatch.setattr(placement_search, "DUALS_FROM", 2)
    caps, candidates = search_tests.instance(random.Random(seed))
    if not candidates:
        return
    search = Search(caps, list(range(len(caps))), candidates, 100000)
    assignment = search.run()
    assert not search.exhausted
    best = search_tests.brute_force(caps, candidates)
    assert search_tests.value_of(caps, candidates, assignment, search.best_choice) == search.best == best


# --------------------------------------------------------------------------- most_that_fit
def _most_by_brute_force(demands, room):
    for size in range(len(demands), 0, -1):
        for subset in itertools.combinations(demands, size):
            if all(sum(column) <= cap for column, cap in zip(zip(*subset), room)):
                return size
    return 0


@pytest.mark.parametrize("seed", range(40))
def test_most_that_fit_is_the_most_a_node_holds_together(seed):
    draw = random.Random(seed)
    demands = sorted(tuple(draw.randint(0, 6) for resource in range(3)) for tenant in range(draw.randint(0, 8)))
    room = [draw.randint(0, 14) for resource in range(3)]
    most, steps = most_that_fit(demands, room, 10 ** 6)
    assert steps <= 10 ** 6
    assert most == _most_by_brute_force(demands, room)


def test_most_that_fit_cut_short_says_so_and_never_more_than_fit():
    demands = [(1, 1)] * 12
    most, steps = most_that_fit(demands, [6, 6], 3)
    assert steps > 3 and most <= 6
    assert most_that_fit(demands, [6, 6], 10 ** 6)[0] == 6


@pytest.mark.parametrize("seed", range(60))
def test_most_that_fit_packed_takes_the_steps_of_the_vectors(seed):
    # the packed search (one subtraction per demand) against the search over the vectors, resource by
    # resource: the same answer and the same steps, cut short or not, a room below nothing included
    draw = random.Random(seed)
    width = draw.randint(1, 6)
    demands = sorted(tuple(draw.randint(0, draw.choice((3, 40, 5000))) for resource in range(width))
                     for tenant in range(draw.randint(0, 12)))
    room = [draw.randint(-2 if seed % 7 == 0 else 0, 60) for resource in range(width)]
    for limit in (5, 40, 10 ** 6):
        found = [0, 0]
        _grow(demands, 0, list(room), 0, limit, found)
        assert most_that_fit(demands, room, limit) == (found[0], found[1])
