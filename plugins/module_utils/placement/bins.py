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

from bisect import bisect_left
from operator import ge, itemgetter

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import guard_fields, pack, pack_all

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
    # each room and demand packed into one integer (placement_lagrange.guard_fields): the room left
    # minus a demand keeps every guard bit exactly when the demand fits (a field per resource wide
    # enough for the room, which no demand here is above)
    fields, guards = guard_fields(list(room))
    needs = pack_all(items, fields)
    packed_room = guards + pack(room, fields)
    if _first_fit(needs, packed_room, guards, bins) > least:
        return None, 0
    key = (tuple(items), tuple(room))
    sized = None if known is None else known.get(key)
    steps = 0
    if sized is None:
        sets, steps = _largest_sets(needs, packed_room, guards, limit)
        if sets is None:
            return None, steps
        sized = sorted(((_ones(mask), mask) for mask in sets), reverse=True)
        if known is not None:
            known[key] = sized
    if min(total, bins * sized[0][0]) <= least:
        return least, steps
    masks = [mask for _size, mask in sized]
    # the sizes negated, ascending: how many sets are larger than a count, by bisection
    smaller = [-size for size, _mask in sized]
    # a depth-first walk over the picks, bins alike: each pick at or after the one before. The
    # tenants placed and those left add up to all of them along the walk (more than least), and a
    # pick is walked only where it places more than least at last; one that does on this node ends
    # the walk at once, so every pick walked has a node left after it and places at most least
    stack = [(0, (1 << total) - 1, bins, 0)]
    while stack:
        start, left, bins_left, placed = stack.pop()
        steps += len(masks) - start
        if steps > limit:
            return None, steps
        # a pick is walked when it and the most of those after it on each node left place more
        # than least: not one that takes no more than ``even`` (an even share of what is short) and
        # none after it more, so the picks walked are among the sets larger than that, which come
        # first; those after them take no more than ``even`` either and change no test before
        short, rest = least - placed, bins_left - 1
        even = short // bins_left
        end = bisect_left(smaller, -even)
        if start >= end:
            continue
        # what each pick from here takes now; no later pick takes more than the most of these
        # from it on (the tenants left only fall)
        gains = [_ones(mask & left) for mask in masks[start:end]]
        largest = max(gains)
        if largest <= even:
            # not even the largest gain on this node and each node left: no pick is walked (most often)
            continue
        if largest > short:
            # the largest pick (walked: it places more than least on this node alone) would be next
            return None, steps
        most = 0
        picks = []
        for offset in range(len(gains) - 1, -1, -1):
            gain = gains[offset]
            if gain > most:
                most = gain
            if gain and gain + rest * most > short:
                picks.append((start + offset, left & ~masks[start + offset], rest, placed + gain))
        # the largest pick on top
        picks.sort(key=itemgetter(3))
        stack.extend(picks)
    return least, steps


def _count_ones(mask):
    return bin(mask).count("1")


# the ones of a bit mask: int.bit_count where Python has it (3.10 on)
_ones = getattr(int, "bit_count", _count_ones)


def _largest_sets(needs, room, guards, limit):
    """The largest sets of the items of packed demands ``needs`` (in their order) that fit in the
    packed ``room`` together (``guards``: its guard bits), as bit masks: (masks, steps), or (None,
    steps) past ``limit`` steps. A step is an item looked at, from the next item on, for each set
    grown: the count of the walk that looks at every item, kept while this one looks only at the
    items that fit the room the set's parent left (no other fits the room this set leaves)."""
    found = []
    steps = 0
    size = len(needs)
    # (the next item, the room left, the set so far, the items from the next on that may fit yet,
    # the demands of those left out before the next that may fit yet)
    stack = [(0, room, 0, range(size), ())]
    while stack:
        start, left, mask, later, earlier = stack.pop()
        steps += size - start
        if steps > limit:
            return None, steps
        fitting = [number for number in later if (left - needs[number]) & guards == guards]
        if fitting:
            earlier = tuple([need for need in earlier if (left - need) & guards == guards])
            # the set grown by each item that fits (the last on top), those before it left out
            place = 0
            for number in fitting:
                place += 1
                need = needs[number]
                stack.append((number + 1, left - need, mask | 1 << number, fitting[place:], earlier))
                earlier += (need,)
            continue
        # none after the last taken fits: the largest when none left out before it fits either
        for need in earlier:
            if (left - need) & guards == guards:
                break
        else:
            found.append(mask)
    return found, steps


def _first_fit(needs, room, guards, bins):
    """How many a quick packing places: node by node, the smallest first, each that fits (packed
    as for :func:`_largest_sets`)."""
    left = needs
    placed = 0
    for _node in range(bins):
        room_left = room
        rest = []
        for need in left:
            after = room_left - need
            if after & guards == guards:
                room_left = after
                placed += 1
            else:
                rest.append(need)
        left = rest
    return placed
