# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Lagrangian bounds of the placement search (placement/search.py) on the most tenants that
fit at once, by subgradient steps. Pure, deterministic, standard library only.

- On capacities (``capacity_prices``): at any prices ``p >= 0`` per node and resource, the tenants
  add at most ``p . capacity + sum over them of max(0, max over their options of 1 - p . demand)``:
  a placement uses no more than the capacity, so each placed tenant's 1 is covered by what it
  pays plus its margin. The best prices give the linear-programming bound. Cheap enough for the
  search to read at every node (what a decided tenant took is taken off the capacity's worth).
- On configurations (``Configurations``): each node holds some set of tenants that fit on it
  together (a configuration); a placement picks one per node and uses each tenant at most once.
  Pricing that last rule (a price ``l_t`` per tenant, ``0 <= l_t <= 1``) leaves one small
  knapsack per node: the tenants placed number at most ``sum of l_t + sum over the nodes of
  their best configuration's sum of (1 - l_t)``. Unlike the bound on capacities this one knows
  a node holds whole tenants (16 cores hold one tenant of 9 cores and none of 7 more); its best
  prices give the configuration LP's bound, which for packing is seldom a tenant above the
  optimum, so it proves most plans that the other bounds leave one tenant short of proven,
  without a search. Equal tenants (the same demand on every node) share a price, and nodes with
  the same room and the same demands are solved once. Its prices also suggest a placement.
"""

from __future__ import absolute_import, division, print_function

from itertools import accumulate, chain, repeat
from operator import ge, itemgetter, lshift, mul, sub

__metaclass__ = type

# subgradient steps for the prices on capacities
DUAL_STEPS = 40
# the most search steps one node's knapsack may take (past it the bound says nothing new)
KNAPSACK_STEPS = 4000
# the fewest kinds in a knapsack for which the cut of kinds that others dominate pays for itself
DOMINANCE_FROM = 6
# the first step size of the configuration prices (halved after three steps that find no lower
# bound), and the one to go on with from the best prices when they stalled close to a proof
STEP_SIZE = 1.0
RESTART_STEP_SIZE = 2.0


def capacity_prices(capacities, fits, target, steps=DUAL_STEPS):
    """Prices per node slot and resource (the least bound found in ``steps`` steps, or once it
    is below ``target + 1``) for tenants of options ``fits`` [(slot, demand)] on ``capacities``."""
    width = len(capacities[0]) if capacities else 0
    scale = [max([cap[r] for cap in capacities] + [1]) for r in range(width)]
    options = [[(slot, [(r, demand[r] / scale[r]) for r in range(width) if demand[r]]) for slot, demand in tenant] for tenant in fits]
    caps = [[cap[r] / scale[r] for r in range(width)] for cap in capacities]
    prices = [[0.0] * width for _cap in caps]
    best, best_prices = None, None
    step_size, stalled = 2.0, 0
    for _step in range(steps):
        value = sum(map(sum, (map(mul, row, cap) for row, cap in zip(prices, caps))))
        used = [[0.0] * width for _cap in caps]
        for tenant in options:
            top, pick = 0.0, None
            for slot, pairs in tenant:
                row = prices[slot]
                margin = 1.0 - sum(row[r] * need for r, need in pairs)
                if margin > top:
                    top, pick = margin, (slot, pairs)
            value += top
            if pick is not None:
                row = used[pick[0]]
                for r, need in pick[1]:
                    row[r] += need
        if best is None or value < best - 1e-9:
            best, best_prices, stalled = value, [list(row) for row in prices], 0
        else:
            stalled += 1
            if stalled == 3:
                step_size, stalled = step_size / 2, 0
        if value < target + 1 - 1e-6:
            break  # proves the best found: no step makes it better
        slopes = [[cap[r] - use[r] for r in range(width)] for cap, use in zip(caps, used)]
        norm = sum(g * g for row in slopes for g in row)
        if not norm:
            break
        step = step_size * (value - target) / norm
        prices = [[max(0.0, price - step * g) for price, g in zip(row, slope)] for row, slope in zip(prices, slopes)]
    # back to the tenants' units
    return [[price / scale[r] for r, price in enumerate(row)] for row in best_prices]


def most_that_fit(demands, room, limit):
    """The most of ``demands`` (one demand vector per tenant, sorted) that fit in ``room`` (a
    node's capacity vector) together, by a depth-first search of at most ``limit`` steps ->
    (the most found, the steps taken). More steps than ``limit`` means it was cut short: the most
    found is then only a lower bound. The room and the demands are packed into one integer each
    (``guard_fields``), so that a demand is checked and taken by one subtraction; the search's
    order, its steps and its answer are those of the search over the vectors."""
    if not demands:
        return 0, 0
    if not room or min(room) < 0 or min(map(min, demands)) < 0:
        # a room or a demand below nothing has no packed form: each resource compared on its own
        found = [0, 0]
        _grow(demands, 0, list(room), 0, limit, found)
        return found[0], found[1]
    fields, guards = guard_fields(list(map(max, zip(room, *demands))))
    return _grow_packed(pack_all(demands, fields), 0, guards + pack(room, fields), 0, limit, 0, 0, guards)


def _grow(demands, start, left, placed, limit, found):
    # found: [the most placed so far, the steps taken]
    if placed > found[0]:
        found[0] = placed
    size = len(demands)
    for number in range(start, size):
        found[1] += 1
        if placed + size - number <= found[0] or found[1] > limit:
            return
        demand = demands[number]
        if all(map(ge, left, demand)):
            _grow(demands, number + 1, list(map(sub, left, demand)), placed + 1, limit, found)


def _grow_packed(needs, start, left, placed, limit, best, steps, guards):
    # _grow with the room left and the demands packed (the room minus a demand keeps every guard
    # bit exactly when the demand fits), the most found and the steps kept in locals: -> (the
    # most found, the steps taken)
    if placed > best:
        best = placed
    # from a number at or past ``reach - best`` on, not even all of the rest place more than best
    reach = placed + len(needs)
    for number in range(start, len(needs)):
        steps += 1
        if number >= reach - best or steps > limit:
            return best, steps
        after = left - needs[number]
        if after & guards == guards:
            best, steps = _grow_packed(needs, number + 1, after, placed + 1, limit, best, steps, guards)
    return best, steps


class Configurations:
    """``Configurations(caps, fits, where).most(target)``: an upper bound on how many tenants fit
    at once. ``caps``: the room per node slot (tuples); ``fits``: per tenant, its [(slot, demand
    tuple)], ``where``: per tenant, the bit mask of the slots it may still go to. The prices are
    kept from one call to the next, so a later call (the best found has grown) goes on from
    where the last stopped."""

    def __init__(self, caps, fits, where):
        # per tenant and slot, the least it takes there of each resource over its ways to take it
        demands = []
        for options, mask in zip(fits, where):
            per_slot = {}
            for slot, demand in options:
                if mask >> slot & 1:
                    per_slot[slot] = tuple(map(min, per_slot.get(slot, demand), demand))
            demands.append(per_slot)
        kinds, counts = {}, []
        # per tenant its kind (tenants of one kind take the same on every node)
        self.kind_of = []
        for demand in demands:
            key = tuple(sorted(demand.items()))
            if key not in kinds:
                kinds[key] = len(counts)
                counts.append(0)
            counts[kinds[key]] += 1
            self.kind_of.append(kinds[key])
        kind_demands = [dict(key) for key in kinds]
        # nodes alike: the same room and the same demand of every kind of tenant
        groups = {}
        for slot, cap in enumerate(caps):
            key = (tuple(cap), tuple(demand.get(slot) for demand in kind_demands))
            groups.setdefault(key, []).append(slot)
        self.nodes = []
        for (cap, per_kind), slots in sorted(groups.items(), key=lambda entry: entry[1]):
            fitting = [(kind, need) for kind, need in enumerate(per_kind) if need is not None and all(map(ge, cap, need))]
            # only the resources that all the tenants which fit could run out of matter here
            binding = [r for r in range(len(cap)) if sum(need[r] * counts[kind] for kind, need in fitting) > cap[r]]
            if fitting:
                room = [cap[r] for r in binding]
                fitting = [(kind, tuple(need[r] for r in binding)) for kind, need in fitting]
                self.nodes.append((len(slots), room, fitting, slots, Packing(room, [need for _kind, need in fitting])))
        self.counts = counts
        # start from each kind's largest share of a node it may go to (a tenant taking half a
        # node's pages is worth about half a node): far fewer steps than from nothing
        self.prices = [min(1.0, min(max([need / cap[r] for r, need in enumerate(demand[slot]) if cap[r]] or [0.0])
                                    for slot, cap in enumerate(caps) if slot in demand))
                       for demand in kind_demands]
        self.step_size = STEP_SIZE
        self.best = None
        self.best_prices = self.prices

    def most(self, target, steps):
        """The least bound found (None: none yet), after at most ``steps`` more subgradient steps,
        stopping once it is below ``target + 1`` (proves that ``target`` tenants are the most)."""
        counts, prices = self.counts, self.prices
        stalled = 0
        for _step in range(steps):
            if self.best is not None and self.best < target + 1 - 1e-6:
                break
            value = sum(price * count for price, count in zip(prices, counts))
            used = [0] * len(counts)
            for many, cap, fitting, _slots, packing in self.nodes:
                found = _knapsack(cap, [(1.0 - prices[kind], kind, need, counts[kind]) for kind, need in fitting if prices[kind] < 1.0], packing)
                if found is None:
                    return self.best
                gain, taken = found
                value += many * gain
                for kind, number in taken:
                    used[kind] += many * number
            if self.best is None or value < self.best - 1e-9:
                self.best, self.best_prices, stalled = value, prices, 0
            else:
                stalled += 1
                if stalled == 3:
                    self.step_size, stalled = self.step_size / 2, 0
            slopes = [count - use for count, use in zip(counts, used)]
            norm = sum(slope * slope for slope in slopes)
            if not norm:
                break
            # Polyak's step towards a bound just below target + 1
            step = self.step_size * (value - target - 0.5) / norm
            prices = self.prices = [min(1.0, max(0.0, price - step * slope)) for price, slope in zip(prices, slopes)]
        return self.best

    def restart(self):
        """Go on from the best prices with larger steps (they may have shrunk too soon)."""
        self.prices, self.step_size = self.best_prices, RESTART_STEP_SIZE

    def guess(self, bonus=0.0):
        """A placement by kinds, node by node, each node the best set of what is left at the
        prices, each tenant worth ``bonus`` more (and a little, so room is not left empty), the
        nodes that fewest kinds fit on first (CPU-only nodes before GPU nodes take the CPU-only
        tenants the GPU nodes would waste room on): [(slot, kind)], or None."""
        left = list(self.counts)
        picks = []
        for _many, cap, fitting, slots, packing in sorted(self.nodes, key=lambda node: len(node[2])):
            for slot in slots:
                found = _knapsack(cap, [(bonus + 1.001 - self.prices[kind], kind, need, left[kind]) for kind, need in fitting if left[kind]],
                                  packing)
                if found is None:
                    return None
                for kind, number in found[1]:
                    left[kind] -= number
                    picks += [(slot, kind)] * number
        return picks


def guard_fields(maxima):
    """The packed layout of vectors whose values stay within ``maxima`` (per resource): ([(shift,
    mask)] per resource, the guard bits), a field per resource with a guard bit above it."""
    fields, guards, shift = [], 0, 0
    for value in maxima:
        bits = value.bit_length()
        fields.append((shift, (1 << bits) - 1))
        guards |= 1 << (shift + bits)
        shift += bits + 1
    return fields, guards


def pack(vector, fields):
    """``vector`` as one integer in the layout ``fields`` (:func:`guard_fields`), without the guards."""
    return sum(map(lshift, vector, map(itemgetter(0), fields)))


def pack_all(vectors, fields):
    """:func:`pack` of each of ``vectors``, the layout's shifts read once for them all."""
    shifts = list(map(itemgetter(0), fields))
    return [sum(map(lshift, vector, shifts)) for vector in vectors]


class Packing:
    """A node's room and the demands that may go there, packed into one integer each: a field per
    resource with a guard bit above it. The room left minus a demand keeps every guard bit exactly
    when the demand fits, so one subtraction checks all the resources at once and gives the room
    left; a demand takes no more of any resource than another when the other, with the guard bits,
    minus it keeps them too. Made once per node for all the knapsacks of its room."""

    __slots__ = ("room", "guards", "fields", "packed", "below")

    def __init__(self, cap, needs):
        self.fields, self.guards = guard_fields([max([value] + [need[r] for need in needs]) for r, value in enumerate(cap)])
        self.room = self.guards + pack(cap, self.fields)
        self.packed = dict(zip(needs, pack_all(needs, self.fields)))
        # per demand, the demands that take no more of any resource (itself among them)
        guards, packed = self.guards, self.packed
        self.below = dict((need, [other for other, small in packed.items() if (large | guards) - small & guards == guards])
                          for need, large in packed.items())


def _knapsack(cap, items, packing=None):
    """The best sum of gains of tenants that fit in ``cap`` together, and how many of each kind:
    ``items`` [(gain, kind, demand, how many)], counts of at least 0 (``packing``: a Packing of
    ``cap`` and these demands); None when it takes more than KNAPSACK_STEPS."""
    items = sorted((item for item in items if item[0] > 1e-12), key=lambda item: (-item[0], item[1]))
    size = len(items)
    if min(cap, default=0) < 0:
        return 0.0, []  # no count fits below nothing
    if packing is None:
        packing = Packing(cap, [item[2] for item in items])
    guards, fields = packing.guards, packing.fields
    packed = list(map(packing.packed.__getitem__, map(itemgetter(2), items)))
    # per position, the earlier ones (worth as much or more) that take no more of any resource:
    # while one of those is left out, this one need not be tried (swapping the two is no worse,
    # and that set comes first in the search's order, so the best found is the same)
    dominators = [0] * size
    if size > DOMINANCE_FROM:
        first = {}
        for position, item in enumerate(items):
            for other in packing.below[item[2]]:
                earlier = first.get(other)
                if earlier is not None:
                    dominators[position] |= earlier
            if item[3] > 0:
                first[item[2]] = first.get(item[2], 0) | 1 << position
    # from each position on: the least each resource is taken by one tenant (how many more fit
    # at most), and the gains one by one, largest first (the most those can add: running sums)
    floors = [field + (list(accumulate(reversed([item[2][r] for item in items]), min))[::-1] + [0],) for r, field in enumerate(fields)]
    offsets = [0] + list(accumulate(map(itemgetter(3), items)))
    running = [0.0] + list(accumulate(chain.from_iterable(map(repeat, map(itemgetter(0), items), map(itemgetter(3), items)))))
    total = offsets[-1]
    best = [0.0, []]
    taken = []
    steps = [0]

    def ceiling(left, start):
        first = offsets[start]
        last = total
        for at, mask, least in floors:
            need = least[start]
            if need > 0:
                fit = first + (left >> at & mask) // need
                if fit < last:
                    last = fit
        return running[last] - running[first]

    def grow(start, left, gain, took):
        # each call adds one kind (1, 2, ... of it) past the last one added (``took``: those added)
        steps[0] += 1
        if gain > best[0] + 1e-12:
            best[0], best[1] = gain, list(taken)
        for position in range(start, size):
            need = packed[position]
            if (left - need) & guards != guards or dominators[position] & ~took:
                continue
            # the most the rest can add only falls from one position to the next
            if steps[0] > KNAPSACK_STEPS or gain + ceiling(left, position) <= best[0] + 1e-12:
                return
            item_gain, kind, _need, many = items[position]
            if many < 1:
                continue
            after, number = left - need, 1
            while True:
                taken.append((kind, number))
                grow(position + 1, after, gain + item_gain * number, took | 1 << position)
                taken.pop()
                if number == many or (after - need) & guards != guards:
                    break
                after -= need
                number += 1
    grow(0, packing.room, 0.0, 0)
    grow = None  # the recursive closure refers to itself: freed now, not left to the garbage collector
    if steps[0] > KNAPSACK_STEPS:
        return None
    return best[0], best[1]
