# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which tenants of the placement search (placement_search.Candidate) dominate which: a cut of
the search that is exact (see ``dominance``). Pure and deterministic."""

from __future__ import absolute_import, division, print_function

from bisect import bisect_left
from operator import itemgetter, le, lshift, sub

__metaclass__ = type


def dominance(items):
    """(dominated, dominators, above): per tenant, bit masks of the later tenants it dominates / of
    the later tenants that dominate it, and how many tenants dominate it.

    Tenant a dominates b when a takes no more than b of every resource on every node b may go to,
    is worth at least as much there (priority, rank) and neither asks for explicit GPUs: a left
    out while b is placed can take b's place and the plan is no worse. So an optimum is among
    the assignments that leave out a only with every tenant a dominates, and place b only with
    every tenant that dominates it (of two equal tenants, the earlier one dominates)."""
    count = len(items)
    tables = [{slot: (demand, rank) for slot, demand, rank, _sticky in item.options} for item in items]
    slots = max([slot for item in items for slot, _d, _r, _s in item.options] or [0]) + 1
    # per tenant its rank on each node, above any rank where it may not go: comparing these
    # compares the ranks and that a may go wherever b may
    away = max([rank for item in items for _s, _d, rank, _st in item.options] or [0]) + 1
    ranks = []
    for table in tables:
        row = [away] * slots
        for slot, (_demand, rank) in table.items():
            row[slot] = rank
        ranks.append(row)
    # a tenant taking the same on every node takes no more than b wherever b goes when it needs no more
    uniform = [len(set(map(itemgetter(0), table.values()))) == 1 for table in tables]
    # what a must not exceed, in one row: needs, ranks per node, and priority (online first)
    rows = [None if item.claims or item.multi else item.need + tuple(rank_row) + (1 - item.online,) for item, rank_row in zip(items, ranks)]
    covers, covered = [0] * count, [0] * count
    others = [number for number in range(count) if rows[number] is not None]
    # each row packed into one integer, a field per column with a guard bit above it: a row is no
    # more than another in every column when the other, with the guard bits, minus it keeps them all
    guards = shift = 0
    leasts, shifts = [], []
    for column in zip(*[rows[number] for number in others]):
        least = min(column)  # counted from the least, so that no field is below 0
        bits = (max(column) - least).bit_length()
        leasts.append(least)
        shifts.append(shift)
        guards |= 1 << (shift + bits)
        shift += bits + 1
    # (the fields do not overlap: a row's sum of them is each field in its place)
    packed = dict((number, sum(map(lshift, map(sub, rows[number], leasts), shifts))) for number in others)
    # the rows by their packed value, each with its guard bits, once: a row no less than another in
    # every column packs to no less, so only the rows from the first of a's value on are compared
    ranked = sorted(zip(map(packed.__getitem__, others), others))
    values = [value for value, _number in ranked]
    numbers = [number for _value, number in ranked]
    guarded = [value | guards for value in values]
    for a in others:
        mine = packed[a]
        start = bisect_left(values, mine)
        for b in [b for b, row in zip(numbers[start:], guarded[start:]) if (row - mine) & guards == guards]:
            if b != a and (uniform[a] or all(all(map(le, tables[a][slot][0], demand)) for slot, (demand, _rank) in tables[b].items())):
                covers[a] |= 1 << b
                covered[b] |= 1 << a
    # of two equal tenants the earlier one dominates
    dominated = [covers[a] >> (a + 1) << (a + 1) for a in range(count)]
    dominators = [covered[b] >> (b + 1) << (b + 1) & ~covers[b] for b in range(count)]
    # how many tenants dominate each, earlier or later
    above = [bin(covered[b] & ~covers[b]).count("1") + bin(covered[b] & covers[b] & ((1 << b) - 1)).count("1") for b in range(count)]
    return dominated, dominators, above
