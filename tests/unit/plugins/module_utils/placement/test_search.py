# -*- coding: utf-8 -*-
"""The search (placement/search.py) on its own: random count instances against every assignment
tried, with small budgets (it keeps the best found, never below its greedy first guess) and with
tenants equal in size, so that the same search state is reached by more than one path."""

from __future__ import annotations

import itertools
import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.dominance import dominance
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.search import Candidate, Search


def brute_force(caps, candidates):
    """The best (placed, online, -rank) over all assignments, with each candidate's options or left out."""
    best = (0, 0, 0)
    for choice in itertools.product(*[[None] + list(range(len(c.options))) for c in candidates]):
        room = [list(cap) for cap in caps]
        claimed = count = online = rank = 0
        fits = True
        for candidate, option in zip(candidates, choice):
            if option is None:
                continue
            slot, demand, item_rank, _sticky = candidate.options[option]
            if candidate.claims & claimed:
                fits = False
                break
            claimed |= candidate.claims
            room[slot] = [left - need for left, need in zip(room[slot], demand)]
            count, online, rank = count + 1, online + candidate.online, rank + item_rank
        # a node nothing goes to is not checked (one may be short of something already)
        used = set(candidate.options[option][0] for candidate, option in zip(candidates, choice) if option is not None)
        if fits and all(left >= 0 for slot in used for left in room[slot]):
            best = max(best, (count, online, -rank))
    return best


def value_of(caps, candidates, assignment, choice):
    room = [list(cap) for cap in caps]
    count = online = rank = 0
    for candidate, slot, demand in zip(candidates, assignment, choice):
        if slot is None:
            continue
        ranks = [r for s, d, r, _st in candidate.options if s == slot and d == demand]
        assert ranks, "a candidate placed with a demand it does not have there"
        room[slot] = [left - need for left, need in zip(room[slot], demand)]
        count, online, rank = count + 1, online + candidate.online, rank + min(ranks)
    assert all(left >= 0 for slot in set(assignment) - {None} for left in room[slot])
    return (count, online, -rank)


def instance(rng):
    nodes = rng.randint(1, 3)
    caps = [(rng.randint(2, 8), rng.randint(0, 2), rng.randint(0, 3)) for _node in range(nodes)]
    sizes = [(rng.randint(1, 4), rng.randint(0, 1), rng.randint(0, 2)) for _kind in range(3)]
    candidates = []
    for _tenant in range(rng.randint(2, 7)):
        size = rng.choice(sizes)  # few sizes: equal tenants, transpositions
        options = [(slot, size, rng.choice([0, 0, 1]), 0) for slot in range(nodes)
                   if all(need <= room for need, room in zip(size, caps[slot])) and rng.random() < 0.9]
        if options:
            candidates.append(Candidate(options, rng.random() < 0.7))
    return caps, candidates


@pytest.mark.parametrize("seed", range(150))
def test_search_finds_the_best_assignment(seed):
    caps, candidates = instance(random.Random(seed))
    if not candidates:
        return
    classes = list(range(len(caps)))
    search = Search(caps, classes, candidates, 100000)
    assignment = search.run()
    assert not search.exhausted
    assert value_of(caps, candidates, assignment, search.best_choice) == search.best == brute_force(caps, candidates)


@pytest.mark.parametrize("seed", range(40))
def test_small_budget_keeps_the_best_found(seed):
    caps, candidates = instance(random.Random(1000 + seed))
    if not candidates:
        return
    search = Search(caps, list(range(len(caps))), candidates, 3)
    assignment = search.run()
    greedy = Search(caps, list(range(len(caps))), candidates, 0)._greedy()[0]
    assert value_of(caps, candidates, assignment, search.best_choice) == search.best >= greedy
    assert search.best <= brute_force(caps, candidates)


def short_instance(rng):
    """As instance(), with a fourth resource that some node already lacks (its memory below
    nothing, as the counts give a node whose pools and reserve exceed its memory) and fields of 0."""
    caps, candidates = instance(rng)
    caps = [cap + (rng.choice([-2, 0, 1, 3, 40]),) for cap in caps]
    grown = []
    for candidate in candidates:
        need = rng.choice([0, 0, 1, 3])
        options = [(slot, demand + (need,), rank, sticky) for slot, demand, rank, sticky in candidate.options if caps[slot][-1] >= need]
        if options:
            grown.append(Candidate(options, candidate.online))
    return caps, grown


@pytest.mark.parametrize("seed", range(80))
def test_search_with_a_node_short_already(seed):
    caps, candidates = short_instance(random.Random(3000 + seed))
    if not candidates:
        return
    search = Search(caps, list(range(len(caps))), candidates, 100000)
    assignment = search.run()
    assert value_of(caps, candidates, assignment, search.best_choice) == search.best == brute_force(caps, candidates)


@pytest.mark.parametrize("seed", range(40))
def test_packed_rooms_fit_as_the_counts_do(seed):
    # the depth-first search checks a demand against a node's room by one subtraction of packed
    # integers: the same answer as resource by resource, as the room shrinks
    rng = random.Random(4000 + seed)
    caps, candidates = short_instance(rng)
    if not candidates:
        return
    search = Search(caps, list(range(len(caps))), candidates, 100000)
    search._pack()  # pylint: disable=protected-access
    demands = sorted(set(demand for candidate in candidates for _slot, demand in candidate.fits))
    room = [list(cap) for cap in caps]
    for _step in range(6):
        for slot, cap in enumerate(room):
            if min(cap) < 0:
                # a node short already: no tenant may go there, so its room is never asked
                assert not any(mask >> slot & 1 for mask in search.masks)
                continue
            for demand in demands:
                fits = all(left >= need for left, need in zip(cap, demand))
                packed = (search.rooms[slot] - search.packed[demand]) & search.guards == search.guards
                assert packed == fits, (cap, demand)
        slot = rng.randrange(len(room))
        demand = rng.choice(demands)
        if all(left >= need for left, need in zip(room[slot], demand)):
            room[slot] = [left - need for left, need in zip(room[slot], demand)]
            search.rooms[slot] -= search.packed[demand]


def dominance_by_rows(items):
    """Which tenant dominates which, each pair compared column by column (needs, the rank on each
    node, or above any rank where it may not go, and priority) without packing the rows."""
    away = max([rank for item in items for _s, _d, rank, _st in item.options] or [0]) + 1
    slots = max([slot for item in items for slot, _d, _r, _s in item.options] or [0]) + 1
    rows = []
    for item in items:
        rank_row = [away] * slots
        for slot, _demand, rank, _sticky in item.options:
            rank_row[slot] = rank
        rows.append(None if item.claims or item.multi else item.need + tuple(rank_row) + (1 - item.online,))
    covers = [0] * len(items)
    for a, b in itertools.permutations(range(len(items)), 2):
        if rows[a] is None or rows[b] is None or not all(x <= y for x, y in zip(rows[a], rows[b])):
            continue
        mine = dict((slot, demand) for slot, demand, _r, _s in items[a].options)
        theirs = dict((slot, demand) for slot, demand, _r, _s in items[b].options)
        if len(set(mine.values())) == 1 or all(all(x <= y for x, y in zip(mine[slot], demand)) for slot, demand in theirs.items()):
            covers[a] |= 1 << b
    return covers


@pytest.mark.parametrize("seed", range(60))
def test_dominance_packed_is_the_rows_compared(seed):
    # the packed comparison of dominance (placement/dominance.py) against each pair's rows compared column by column
    rng = random.Random(seed)
    _caps, candidates = instance(rng)
    dominated, dominators, above = dominance(candidates)
    covers = dominance_by_rows(candidates)
    count = len(candidates)
    covered = [sum(1 << a for a in range(count) if covers[a] >> b & 1) for b in range(count)]
    assert dominated == [covers[a] >> (a + 1) << (a + 1) for a in range(count)]
    assert dominators == [covered[b] >> (b + 1) << (b + 1) & ~covers[b] for b in range(count)]
    assert above == [bin(covered[b] & ~covers[b]).count("1") + bin(covered[b] & covers[b] & ((1 << b) - 1)).count("1")
                     for b in range(count)]
