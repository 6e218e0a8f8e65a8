# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which new tenants go on which NUMA node: a bounded branch and bound over resource counts.

Pure and deterministic. Each node has a capacity vector of counts (CPUs as whole cores or
threads, GPUs, VFs, 2M pages, 1G pages, MiB outside the pools); each tenant a list of options
``(node, demand vector, rank, sticky)``, one per node that may hold it whole. The search finds
the assignment that is best by, in this order:

1. the most tenants placed;
2. the most ``online`` tenants placed (priority);
3. the nearest GPU/VF pairs: the smallest sum, over the tenants, of how much farther (in PCIe
   affinity ranks, 0 PIX .. 4 SYS) their node's nearest pairs are than on the tenant's best node.

The first guess is the greedy best fit: each tenant in list order on its best node (``sticky``
previous node, then rank, then the fewest GPUs, VFs and CPUs left). It is kept unless the search
finds a strictly better assignment, so the result is never worse than it, and it is the answer
without any search when a bound proves it best (most hosts): the count of tenants that still fit
somewhere, no more than each resource's total holds, and no more than the nodes a group of
tenants is confined to hold (in total, and node by node, at the root exactly).

Otherwise a second guess places the smallest tenants first (kept when strictly better); then the
configuration bound (placement_lagrange: what each node holds in whole tenants, one price per
tenant) lowers the ceiling, and its prices suggest more guesses, node by node. With the most
tenants proven so (most plans that get this far) there is no depth-first search. Otherwise it
decides the tenants largest first (place on a node, in best-fit order, or leave out), keeping
the first strictly better assignment found, and asks the configuration bound again whenever it
finds one. It is exact and cuts by:

- dominance: tenant a dominates b when a takes no more than b of every resource on every node b
  may go to and is worth at least as much there (neither asks for explicit GPUs). Some optimum
  leaves a out only with every tenant a dominates and places b only with every tenant that
  dominates it (swap them), so leaving a out rules the tenants a dominates out, and placing b
  makes the tenants that dominate it a must;
- bounds: a branch ends when the tenants that must be placed cannot all fit (in total, or on the
  one or two nodes they are confined to) or when even the most that could still fit (those that
  must be placed first) cannot beat the best found;
- symmetry: nodes with the same capacity left and the same static class are tried once;
- transpositions: a search state (the tenants decided, the capacity left per node, the tenants
  ruled out, forced and the GPUs claimed) reached again at no better value is not searched again:
  its completions were all looked at the first time.

Before the depth-first search, nodes alike (one class and one room) are counted together
(placement_bins: no tenant counted on two of them): a proof of the best found, or a lower ceiling
for the search to stop at; from DUALS_FROM tenants on, so is the host split in two at the nodes
some tenants are confined to, each part's configuration bound rounded down on its own, and then
that split decided in whole tenants on both parts at once (placement_parts: each set of the small
part's tenants that fit there, with the large part's own search): a proof, or a plan placing more.

The bounds are asked by the mixin of placement/search_bounds.py. Where each tenant fits is kept
per node as the search takes and gives back (each node's room packed into one integer, so that a
demand is checked by one subtraction), and so is the room left over all the nodes. After
``budget`` search nodes it stops and keeps the best found (``exhausted``).
"""

from __future__ import absolute_import, division, print_function

from bisect import bisect_right
from operator import ge, itemgetter, mul, sub

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import Configurations, guard_fields, pack_all
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.dominance import dominance
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.parts import by_parts
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.search_bounds import BINS_STEPS, SCALE, Bounds

__metaclass__ = type

# the most steps spent finding how many tenants fit on each node together, for the ceiling
TOGETHER_STEPS = 1000

# the fewest tenants still to decide for which the Lagrangian bounds pay for their steps (fewer:
# the depth-first search is quicker)
DUALS_FROM = 20

# the configuration bound (placement_lagrange): rounds of subgradient steps, each then a guess
CONFIG_ROUNDS = 4
CONFIG_STEPS = 15
# the guesses' weights of a tenant over its price (0: by the prices alone; more: more tenants),
# the next only while the best found is not proven
CONFIG_BONUSES = (0.3, 0.0)
# more steps when the bound is this close to proving the best found
CONFIG_CLOSE = 0.5
CONFIG_MORE = 30

# demand/capacity vector layout (the best-fit order reads GPUs, VFs, CPUs left)
CPU, GPU, VF = 0, 1, 2


class Candidate:
    """One tenant for the search: its options and what it is worth."""

    __slots__ = ("options", "online", "claims", "need", "fits", "multi", "least")

    def __init__(self, options, online, claims=0):
        # options: [(node slot, demand tuple, rank, sticky)]; a rank counts as the distance from
        # the tenant's own best, so a tenant without GPU/VF pairs does not win on affinity
        least = min(map(itemgetter(2), options)) if options else 0
        if least:
            self.options = [(slot, demand, rank - least, sticky) for slot, demand, rank, sticky in options]
        else:
            self.options = list(options)
        self.online = 1 if online else 0
        # explicit GPUs as a bit mask: two tenants asking for one GPU never both go in
        self.claims = claims
        # the least it takes of each resource on any node (for the aggregate bound)
        self.need = tuple(map(min, zip(*map(itemgetter(1), options))))
        self.fits = [(slot, demand) for slot, demand, _rank, _sticky in self.options]
        # more than one way to take a node (which switch its devices come from, say)
        self.multi = len(set(map(itemgetter(0), self.fits))) < len(self.fits)
        # per node slot, the least it takes there of each resource over its ways to take the node
        # (what the bounds that count a node's tenants by one demand each read)
        if self.multi:
            least = {}
            for slot, demand in self.fits:
                least[slot] = tuple(map(min, least[slot], demand)) if slot in least else demand
            self.least = least
        else:
            self.least = dict(self.fits)


class Search(Bounds):
    """``Search(capacities, classes, candidates, budget).run()`` -> list of node slot or None per
    candidate; ``best_choice`` then has the demand each placed candidate takes there."""

    def __init__(self, capacities, classes, candidates, budget):
        self.caps = [list(cap) for cap in capacities]
        self.classes = list(classes)
        self.items = candidates
        self.budget = budget
        self.width = len(self.caps[0]) if self.caps else 0
        self.all_slots = (1 << len(self.caps)) - 1
        self.nodes = 0
        self.exhausted = False
        self.best = None
        self.best_assignment = [None] * len(candidates)
        self.ceiling = None
        # the search's own order: the largest tenants first (a small tenant left out then rules out
        # every larger one still to come, see placement_dominance), equal ones in list order
        totals = list(map(sum, zip(*self.caps)))
        # the capacity left over all the nodes, kept as the depth-first search takes and gives back
        self.total = list(totals)
        self.rooms = self.guards = self.packed = None
        # (each resource's shares in one list, added up per tenant: no generator per tenant)
        shares = [[item.need[r] * SCALE // totals[r] for item in candidates] for r in range(self.width) if totals[r]]
        size = list(map(sum, zip(*shares))) if shares else [0] * len(candidates)
        # (a stable sort: equal sizes stay in list order)
        self.order = sorted(range(len(candidates)), key=[-share for share in size].__getitem__)
        self.queue = [candidates[number] for number in self.order]
        self.dominated = self.dominators = None
        # the configuration bound (placement_lagrange), once the root needs it, and how many online tenants it may count
        self.configs = None
        self.config_online = 0
        self.config_members = None
        # where each tenant in the queue fits now (a bit per node), kept up to date as the search
        # takes and gives back (with takers: per node, the tenants that may go there)
        caps = self.caps
        self.masks = [sum({1 << slot for slot, demand in item.fits if all(map(ge, caps[slot], demand))}) for item in self.queue]
        self.choice = [None] * len(candidates)
        self.best_choice = [None] * len(candidates)
        self.together_left = TOGETHER_STEPS
        self.together = {}
        # _in_bins's answers, and the steps it may still take
        self.in_bins = {}
        self.bins_sets = {}
        self.bins_left = BINS_STEPS
        # _count's answers: (tenants, capacity) -> how many of them it holds
        self.counted = {}
        self.bits = [1 << number for number in range(len(self.queue))]
        self.online_bits = sum(item.online << number for number, item in enumerate(self.queue))
        self.slot_lists = {}
        self.takers = self.taker_positions = None
        # per resource some tenant needs: what each tenant in the queue needs of it at least
        self.columns = [(r, [item.need[r] for item in self.queue]) for r in range(self.width)
                        if any(item.need[r] for item in self.queue)]
        self.assignment = [None] * len(candidates)
        self.claimed = 0
        # tenants (bits by position in the queue) that may no longer be placed / left out
        self.blocked = 0
        self.forced = 0
        # the Lagrangian bound (see _duals): prices per node and resource, what the capacity left
        # is worth at them, and per queue position what the tenants from there on can add
        self.prices = self.suffix = None
        self.dual_cap = 0.0
        # per search state (_dfs), the best value it was reached at
        self.seen = {}
        # whether the root may split the host and decide both parts in whole tenants (not in the
        # search of one part: placement_parts)
        self.by_parts = True

    def run(self):
        self.best, self.best_assignment, self.best_choice = self._greedy()
        # the greedy is often provably the best: by the quick bound, else by the exact one
        fitting = self._fitting(0)
        self.ceiling = self._bound(0, 0, 0, 0, fitting=fitting)
        if self.best < self.ceiling:
            self.ceiling = self._bound(0, 0, 0, 0, exact=True, fitting=fitting)
        if self.best < self.ceiling and self.budget > 2 * len(self.items):
            # a second guess for the count, the smallest tenants first: one descent, as many
            # search nodes as tenants
            self.nodes += len(self.items)
            value, assignment, choice = self._greedy(self.order[::-1])
            if value > self.best:
                self.best, self.best_assignment, self.best_choice = value, assignment, choice
        if self.best < self.ceiling:
            self.dominated, self.dominators, above = dominance(self.queue)
            # some optimum places, with each tenant, every tenant that dominates it: a tenant that
            # more tenants dominate than the most that can be placed is in none of those
            for _round in range(2):
                out = _bits(number for number, count in enumerate(above) if count >= self.ceiling[0])
                if out & ~self.blocked == 0:
                    break
                self.blocked |= out
                fitting = self._fitting(0)
                self.ceiling = min(self.ceiling, self._bound(0, 0, 0, 0, exact=True, fitting=fitting))
            if self.best < self.ceiling and len(self.items) - bin(self.blocked).count("1") >= DUALS_FROM:
                self._configurations()
            if self.best < self.ceiling and len(self.items) - bin(self.blocked).count("1") >= DUALS_FROM:
                self._duals()
                self.ceiling = min(self.ceiling, self._bound(0, 0, 0, 0, fitting=self._fitting(0)))
            if self.best < self.ceiling and self.suffix is not None and self.budget - self.nodes > 2 * len(self.items):
                # a third guess: the tenants that cost least at the prices first, each where it costs least
                self.nodes += len(self.items)
                value, assignment, choice = self._greedy(self._priced_order(), priced=True)
                if value > self.best:
                    self.best, self.best_assignment, self.best_choice = value, assignment, choice
        if self.best < self.ceiling:
            # the nodes alike counted together (placement_bins): often the proof the bounds above
            # leave one tenant short of, else a lower ceiling for the depth-first search to stop at
            bins = self._bins_bound()
            if bins is not None:
                self.ceiling = min(self.ceiling, bins)
        if self.best < self.ceiling and len(self.items) - bin(self.blocked).count("1") >= DUALS_FROM:
            # the host split in two at the nodes some tenants are confined to, each part's
            # configuration bound rounded down (search_bounds._split_bound): the proof, often,
            # where one rounding of the whole host's bound leaves the plan one tenant short
            split = self._split_bound()
            if split is not None:
                self.ceiling = min(self.ceiling, split)
        if self.best < self.ceiling and self.by_parts and len(self.items) - bin(self.blocked).count("1") >= DUALS_FROM:
            # the same split decided in whole tenants on both parts at once (placement_parts): the
            # proof, or a plan placing more, where each part alone holds more than its share
            self._by_parts()
        if self.best < self.ceiling:
            # per node, the tenants that may go there and what they take
            self.takers = [[] for _cap in self.caps]
            self._pack()
            for number, item in enumerate(self.queue):
                per_slot = {}
                for slot, demand in item.fits:
                    per_slot.setdefault(slot, []).append(self.packed[demand])
                for slot, needs in per_slot.items():
                    self.takers[slot].append((number, needs))
            # per node, the queue position of each of its takers (in order: those after a position start at bisect_right)
            self.taker_positions = [list(map(itemgetter(0), takers)) for takers in self.takers]
            self._dfs(0, 0, 0, 0)
        return list(self.best_assignment)

    def _by_parts(self):
        """The host split at the set of nodes most tenants are confined to, the other nodes'
        tenants decided in whole tenants (placement_parts.by_parts): a plan that places more is
        kept (one more tried after it), a proof lowers the ceiling to the best found."""
        _members, where, _bits = self._fitting(0) or ((), (), 0)
        sets = self._split_sets(where)
        if not sets:
            return
        large = sets[0]
        for _try in range(2):
            found = by_parts(self, Candidate, self.all_slots & ~large, large, self.best[0])
            if found is None:
                return
            most, plan = found
            if plan is None:
                self.ceiling = min(self.ceiling, (most, min(most, self.ceiling[1]), 0))
                return
            if self.budget - self.nodes <= 2 * len(self.items):
                return
            self.nodes += len(self.items)
            chosen = [self.order[position] for position, _slot in plan]
            placed = set(chosen)
            rest = [number for number in self.order[::-1] if number not in placed]
            value, assignment, choice = self._greedy(chosen + rest, slots=[slot for _position, slot in plan] + [None] * len(rest))
            if value <= self.best:
                return
            self.best, self.best_assignment, self.best_choice = value, assignment, choice
            if self.best >= self.ceiling:
                return

    def _pack(self):
        """The room of each node packed into one integer, one layout for all the nodes
        (placement_lagrange.guard_fields, as its Packing does per node): the room left minus a
        packed demand keeps every guard bit exactly when the demand fits, so one subtraction checks
        all the resources and gives the room left. A node already short of something (its memory
        below nothing) holds no demand: no tenant may go there (``masks``), so its room (0) is
        never checked."""
        demands = set(demand for item in self.queue for _slot, demand in item.fits)
        if any(value < 0 for demand in demands for value in demand):
            raise ValueError("placement search: a demand below nothing (%r)" % sorted(demands))
        fields, self.guards = guard_fields([max([cap[r] for cap in self.caps] + [demand[r] for demand in demands] + [0])
                                            for r in range(self.width)])
        self.packed = dict(zip(demands, pack_all(demands, fields)))
        self.rooms = [self.guards + room if min(cap) >= 0 else 0 for cap, room in zip(self.caps, pack_all(self.caps, fields))]

    def _configurations(self):
        """Lower the ceiling by the bound of what each node holds whole (placement_lagrange), and
        try its prices' placement as a fourth guess."""
        fitting = self._fitting(0)
        if fitting is None:
            return
        members, where, bits = fitting
        configs = self.configs = Configurations(self.caps, [self.queue[number].fits for number in members], where)
        self.config_online = bin(self.online_bits & bits).count("1")
        # the tenants of a kind: online ones first, then in the search's order
        self.config_members = {}
        for number, kind in sorted(zip(members, configs.kind_of), key=lambda pair: (-self.queue[pair[0]].online, pair[0])):
            self.config_members.setdefault(kind, []).append(number)
        tried = []
        for _round in range(CONFIG_ROUNDS):
            if not self._config_ceiling(CONFIG_STEPS) or self.best >= self.ceiling:
                return
            for bonus in CONFIG_BONUSES:
                if self.best >= self.ceiling:
                    return
                picks = configs.guess(bonus)
                if picks is None or picks in tried or self.budget - self.nodes <= 2 * len(self.items):
                    continue
                tried.append(picks)
                self._config_guess(picks)
        # a bound this close to proving the best found is worth more steps than a search
        if self.best < self.ceiling and configs.best < self.best[0] + 1 + CONFIG_CLOSE:
            configs.restart()
            self._config_ceiling(CONFIG_MORE)

    def _config_guess(self, picks):
        """Place the tenants of ``picks`` [(slot, kind)] there, then the others where they fit,
        the smallest first; kept when strictly better."""
        self.nodes += len(self.items)
        left = dict((kind, list(numbers)) for kind, numbers in self.config_members.items())
        chosen = [self.order[left[kind].pop(0)] for _slot, kind in picks]
        placed = set(chosen)
        rest = [number for number in self.order[::-1] if number not in placed]
        value, assignment, choice = self._greedy(chosen + rest, slots=[slot for slot, _kind in picks] + [None] * len(rest))
        if value > self.best:
            self.best, self.best_assignment, self.best_choice = value, assignment, choice

    def _config_ceiling(self, steps):
        """Lower the ceiling by up to ``steps`` more steps of the configuration bound; False when it has none."""
        bound = self.configs.most(self.best[0], steps)
        if bound is None:
            return False
        most = int(bound + 1e-7)
        self.ceiling = min(self.ceiling, (most, min(most, self.config_online), 0))
        return True

    # ------------------------------------------------------------------ search
    def _order(self, index):
        """The options of the tenant at ``index`` that fit now, best fit first: [(score, slot, demand, rank)]."""
        caps = self.caps
        item = self.queue[index]
        mask = self.masks[index]
        fitting = []
        if not item.claims & self.claimed:
            for slot, demand, item_rank, sticky in item.options:
                cap = caps[slot]
                if mask >> slot & 1 and (not item.multi or all(map(ge, cap, demand))):
                    fitting.append(((sticky, item_rank, cap[GPU] - demand[GPU], cap[VF] - demand[VF], cap[CPU] - demand[CPU], slot),
                                    slot, demand, item_rank))
        fitting.sort()
        return fitting

    def _priced_order(self):
        """The tenants (list numbers) by what they cost at the prices of _duals, least first."""
        cost = []
        for position, number in enumerate(self.order):
            fits = self.queue[position].fits
            cost.append((min(sum(map(mul, self.prices[slot], demand)) for slot, demand in fits) if fits else 1.0, number))
        return [number for _cost, number in sorted(cost)]

    def _greedy(self, order=None, priced=False, slots=None):
        """The first guess, kept unless the search finds better: each tenant in list order (or
        ``order``) on its best-fit node (or the node of ``slots``, in step with ``order``, where not None).
        -> (value, assignment, demand taken per tenant)"""
        caps = [list(cap) for cap in self.caps]
        claimed = count = online = rank = 0
        assignment = [None] * len(self.items)
        choice = [None] * len(self.items)
        for step, number in enumerate(order or range(len(self.items))):
            item = self.items[number]
            if item.claims & claimed:
                continue
            best = None
            for slot, demand, item_rank, sticky in item.options:
                cap = caps[slot]
                if (slots is None or slots[step] in (None, slot)) and all(map(ge, cap, demand)):
                    score = (sticky, item_rank, cap[GPU] - demand[GPU], cap[VF] - demand[VF], cap[CPU] - demand[CPU], slot)
                    if priced:
                        score = (sum(map(mul, self.prices[slot], demand)),) + score
                    if best is None or score < best[0]:
                        best = (score, slot, demand, item_rank)
            if best is None:
                continue
            _score, slot, demand, item_rank = best
            caps[slot] = list(map(sub, caps[slot], demand))
            claimed |= item.claims
            assignment[number] = slot
            choice[number] = demand
            count, online, rank = count + 1, online + item.online, rank + item_rank
        return (count, online, -rank), assignment, choice

    def _dfs(self, index, count, online, rank):
        if self.nodes >= self.budget:
            self.exhausted = True
            return
        self.nodes += 1
        queue = self.queue
        value = (count, online, -rank)
        if index == len(queue):
            if value > self.best:
                self.best = value
                for number, position in enumerate(self.order):
                    self.best_assignment[position] = self.assignment[number]
                    self.best_choice[position] = self.choice[number]
                if self.configs is not None and self.best < self.ceiling:
                    # more tenants found: the configuration bound may now prove them the most
                    self._config_ceiling(CONFIG_STEPS)
            return
        left = len(queue) - index
        if (count + left, online + left, -rank) <= self.best:
            return
        # the same tenants decided with the same room left, reached before at no lower value: its
        # completions were all looked at then
        key = (index, tuple(self.rooms), self.blocked, self.forced, self.claimed)
        seen = self.seen.get(key)
        if seen is not None and seen >= value:
            return
        self.seen[key] = value
        # at the root the ceiling (no higher than this bound, with the same tenants ruled out) is
        # above the best found, or there is no search
        if index:
            bound = self._bound(index, count, online, rank, cut=True)
            if bound is None or bound <= self.best:
                return
        caps = self.caps
        item = queue[index]
        bit = 1 << index
        if not self.blocked & bit:
            tried = set()
            forced = self.forced
            masks = self.masks
            rooms, guards, total = self.rooms, self.guards, self.total
            for _score, slot, demand, item_rank in self._order(index):
                cap = caps[slot]
                state = (self.classes[slot], rooms[slot], demand)
                if state in tried:
                    continue
                tried.add(state)
                self.forced = forced | self.dominators[index]
                if not self.forced & self.blocked:
                    # the node's room and the total left, new lists (the bounds read them through
                    # ``caps`` and ``total``): given back by putting the old ones back
                    caps[slot] = list(map(sub, cap, demand))
                    self.total = list(map(sub, total, demand))
                    packed = self.packed[demand]
                    rooms[slot] -= packed
                    room = rooms[slot]
                    # only this node changed, and only for the worse
                    self.masks = after = list(masks)
                    on = 1 << slot
                    off = ~on
                    takers = self.takers[slot]
                    for position in range(bisect_right(self.taker_positions[slot], index), len(takers)):
                        number, needs = takers[position]
                        if after[number] & on:
                            for need in needs:
                                if (room - need) & guards == guards:
                                    break
                            else:
                                after[number] &= off
                    self.claimed |= item.claims
                    self.assignment[index] = slot
                    self.choice[index] = demand
                    if self.suffix is not None:
                        cost = sum(map(mul, self.prices[slot], demand))
                        self.dual_cap -= cost
                    self._dfs(index + 1, count + 1, online + item.online, rank + item_rank)
                    if self.suffix is not None:
                        self.dual_cap += cost
                    self.assignment[index] = None
                    self.masks = masks
                    self.claimed &= ~item.claims
                    rooms[slot] += packed
                    caps[slot] = cap
                    self.total = total
                self.forced = forced
                if self.exhausted or self.best >= self.ceiling:
                    return
        if not self.forced & bit:
            blocked = self.blocked
            self.blocked = blocked | self.dominated[index]
            if not self.forced & self.blocked:
                self._dfs(index + 1, count, online, rank)
            self.blocked = blocked


def _bits(slots):
    """The bit mask of node slots (each once)."""
    mask = 0
    for slot in slots:
        mask |= 1 << slot
    return mask
