# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether several alike NUMA nodes hold more than a given count of tenants together, exactly (a
bound of the placement search, placement/search_bounds.py). Pure, deterministic, standard library
only.

Nodes alike (the same room, the same demand of every tenant there) are bins of one size. A
bound that counts each node on its own (the most that fit on it, added up over the nodes) lets
every node count the same small tenants; here each tenant is counted once. A node holds a set
of tenants that fit its room together. These sets are closed under taking tenants away, so only
the largest sets (no other tenant fits in what they leave) are kept, as bit masks, and a node
given one takes those of its tenants no other node took. The walk over ``bins`` such picks,
largest first, answers the question asked ("more than ``least``?") exactly, or gives up past a
number of steps (the caller keeps its other bounds)."""

from __future__ import absolute_import, division, print_function

from operator import ge, sub

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import guard_fields, pack

__metaclass__ = type


def most_in_bins(demands, room, bins, limit, least, known=None):
    """-> (a count no lower than how many of ``demands`` (a demand tuple per tenant) ``bins``
    nodes of room ``room`` hold together, and at most ``least``, when they hold no more than
    ``least``; else None (more fit, or it takes more than ``limit`` steps to say); the steps
    taken). The question "more than ``least``?" is quicker to answer than "how many?": the walk
    cuts every pick that cannot place more, and stops at the first that does. ``known``: a dict
    keeping the largest sets found per tenants and room, for the next question about them."""
    items = sorted(demand for demand in demands if all(map(ge, room, demand)))
    total = len(items)
    if total <= min(bins, least):
        # one on each node
        return total, 0
    if not bins:
        return 0, 0
    if total <= least:
        return total, 0
    if _first_fit(items, room, bins) > least:
        return None, 0
    key = (tuple(items), tuple(room))
    sized = None if known is None else known.get(key)
    steps = 0
    if sized is None:
        sets, steps = _largest_sets(items, room, limit)
        if sets is None:
            return None, steps
        sized = sorted(((_ones(mask), mask) for mask in sets), reverse=True)
        if known is not None:
            known[key] = sized
    if min(total, bins * sized[0][0]) <= least:
        return least, steps
    masks = [mask for _size, mask in sized]
    # a depth-first walk over the picks, bins alike: each pick at or after the one before
    stack = [(0, (1 << total) - 1, bins, 0)]
    while stack:
        start, left, bins_left, placed = stack.pop()
        if placed > least:
            return None, steps
        if not bins_left or placed + _ones(left) <= least:
            continue
        steps += len(masks) - start
        if steps > limit:
            return None, steps
        # what each pick from here takes now; no later pick takes more than the most of these
        # from it on (the tenants left only fall)
        gains = [_ones(mask & left) for mask in masks[start:]]
        # a pick is walked when it and the most of those after it on each node left place more than least
        short, rest = least - placed, bins_left - 1
        if (rest + 1) * max(gains) <= short:
            # not even the largest gain on this node and each node left: no pick is walked (most often)
            continue
        most = 0
        picks = []
        for offset in range(len(gains) - 1, -1, -1):
            gain = gains[offset]
            if gain > most:
                most = gain
            if gain and gain + rest * most > short:
                picks.append((start + offset, left & ~masks[start + offset], rest, placed + gain))
        # the largest pick on top
        picks.sort(key=lambda pick: pick[3])
        stack.extend(picks)
    return least, steps


def _count_ones(mask):
    return bin(mask).count("1")


# the ones of a bit mask: int.bit_count where Python has it (3.10 on)
_ones = getattr(int, "bit_count", _count_ones)


def _largest_sets(items, room, limit):
    """The largest sets of ``items`` (sorted demand tuples) that fit in ``room`` together, as bit
    masks: (masks, steps), or (None, steps) past ``limit`` steps. Each room and demand is packed
    into one integer (placement_lagrange.guard_fields): the room left minus a demand keeps every
    guard bit exactly when the demand fits."""
    fields, guards = guard_fields(list(map(max, zip(room, *items))))
    needs = [pack(demand, fields) for demand in items]
    found = []
    steps = 0
    size = len(items)
    # (the next item, the room left, the set so far)
    stack = [(0, guards + pack(room, fields), 0)]
    while stack:
        start, left, mask = stack.pop()
        grown = False
        number = start
        for need in needs[start:]:
            after = left - need
            number += 1
            if after & guards == guards:
                grown = True
                stack.append((number, after, mask | 1 << number - 1))
        steps += size - start
        if steps > limit:
            return None, steps
        if grown:
            continue
        # none after the last taken fits: the largest when none before it fits either
        for number in range(start):
            if not mask >> number & 1 and (left - needs[number]) & guards == guards:
                break
        else:
            found.append(mask)
    return found, steps


def _first_fit(items, room, bins):
    """How many a quick packing places: node by node, the smallest first, each that fits."""
    left = list(items)
    placed = 0
    for _node in range(bins):
        room_left = room
        rest = []
        for demand in left:
            if all(map(ge, room_left, demand)):
                room_left = tuple(map(sub, room_left, demand))
                placed += 1
            else:
                rest.append(demand)
        left = rest
    return placed
