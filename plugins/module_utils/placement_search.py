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

Ties go to the first assignment found. Tenants are tried in list order and, for each, its nodes
in best-fit order (``sticky`` previous node, then rank, then the fewest GPUs, VFs and CPUs left)
before leaving it out, so the first complete assignment is the greedy best fit and the result is
never worse than it. Nodes with the same capacity left and the same static class are tried once.
A branch is cut when even placing every remaining tenant that still fits somewhere (bounded by
each resource's total) cannot beat the best found. After ``budget`` search nodes it stops and
keeps the best found (``exhausted``).
"""

from __future__ import absolute_import, division, print_function

from operator import ge

__metaclass__ = type

# the most steps spent finding how many tenants fit on one node together
TOGETHER_STEPS = 2000

# demand/capacity vector layout (the best-fit order reads GPUs, VFs, CPUs left)
CPU, GPU, VF = 0, 1, 2


class Candidate:
    """One tenant for the search: its options and what it is worth."""

    __slots__ = ("options", "online", "claims", "need")

    def __init__(self, options, online, claims=0):
        # options: [(node slot, demand tuple, rank, sticky)]; a rank counts as the distance from
        # the tenant's own best, so a tenant without GPU/VF pairs does not win on affinity
        least = min(option[2] for option in options) if options else 0
        self.options = [(slot, demand, rank - least, sticky) for slot, demand, rank, sticky in options]
        self.online = 1 if online else 0
        # explicit GPUs as a bit mask: two tenants asking for one GPU never both go in
        self.claims = claims
        width = len(options[0][1]) if options else 0
        # the least it takes of each resource on any node (for the aggregate bound)
        self.need = tuple(min(option[1][r] for option in options) for r in range(width))


class Search:
    """``Search(capacities, classes, candidates, budget).run()`` -> list of node slot or None per candidate."""

    def __init__(self, capacities, classes, candidates, budget):
        self.caps = [list(cap) for cap in capacities]
        self.classes = list(classes)
        self.items = candidates
        self.budget = budget
        self.width = len(self.caps[0]) if self.caps else 0
        self.nodes = 0
        self.exhausted = False
        self.best = None
        self.best_assignment = [None] * len(candidates)
        self.assignment = [None] * len(candidates)
        self.claimed = 0
        count = len(candidates)
        self.online_suffix = [0] * (count + 1)
        for index in range(count - 1, -1, -1):
            self.online_suffix[index] = self.online_suffix[index + 1] + candidates[index].online
        self.ceiling = self._bound(0, 0, 0, 0, exact=True)

    def run(self):
        self._dfs(0, 0, 0, 0)
        return list(self.best_assignment)

    # ------------------------------------------------------------------ search
    @staticmethod
    def _fits(cap, demand):
        return all(map(ge, cap, demand))

    def _dfs(self, index, count, online, rank):
        if self.nodes >= self.budget:
            self.exhausted = True
            return
        self.nodes += 1
        if index == len(self.items):
            value = (count, online, -rank)
            if self.best is None or value > self.best:
                self.best = value
                self.best_assignment = list(self.assignment)
            return
        if self.best is not None:
            if self.best >= self.ceiling:
                return
            cheap = (count + len(self.items) - index, online + self.online_suffix[index], -rank)
            if cheap <= self.best or self._bound(index, count, online, rank) <= self.best:
                return
        caps = self.caps
        item = self.items[index]
        fitting = []
        if not item.claims & self.claimed:
            for slot, demand, item_rank, sticky in item.options:
                cap = caps[slot]
                if all(map(ge, cap, demand)):
                    fitting.append(((sticky, item_rank, cap[GPU] - demand[GPU], cap[VF] - demand[VF], cap[CPU] - demand[CPU], slot),
                                    slot, demand, item_rank))
        fitting.sort(key=lambda entry: entry[0])
        tried = set()
        for _score, slot, demand, item_rank in fitting:
            cap = caps[slot]
            key = (self.classes[slot], tuple(cap))
            if key in tried:
                continue
            tried.add(key)
            for r in range(self.width):
                cap[r] -= demand[r]
            self.claimed |= item.claims
            self.assignment[index] = slot
            self._dfs(index + 1, count + 1, online + item.online, rank + item_rank)
            self.assignment[index] = None
            self.claimed &= ~item.claims
            for r in range(self.width):
                cap[r] += demand[r]
            if self.exhausted or (self.best is not None and self.best >= self.ceiling):
                return
        self._dfs(index + 1, count, online, rank)

    def _bound(self, index, count, online, rank, exact=False):
        """The best value any completion from ``index`` could reach (an upper bound): the
        remaining tenants that still fit on some node, no more than each resource's total
        holds; and for each set of nodes that some tenants can only go to (the GPU nodes, say),
        no more of those than these nodes hold (in total, and node by node: resource by
        resource, or with ``exact`` the most that fit together)."""
        fitting, where = [], []
        caps = self.caps
        for item in self.items[index:]:
            if item.claims & self.claimed:
                continue
            slots = frozenset(option[0] for option in item.options if all(map(ge, caps[option[0]], option[1])))
            if slots:
                fitting.append(item)
                where.append(slots)
        most = min(len(fitting), self._most_in(fitting, caps))
        node_most = self._most_together if exact else self._most_alone
        # enough to cut the branch: fewer tenants than the best found
        enough = self.best[0] - count if self.best is not None else -1
        for slots in sorted(set(where), key=len):
            if len(slots) == len(caps) or most < enough:
                continue
            group = [item for item, its in zip(fitting, where) if its <= slots]
            per_node = sum(node_most(group, slot) for slot in slots)
            most = min(most, len(fitting) - len(group) + min(per_node, self._most_in(group, [caps[slot] for slot in slots])))
        online_most = min(most, sum(item.online for item in fitting))
        # each tenant can at best be on its own best node: no rank added
        return (count + most, online + online_most, -rank)

    def _most_alone(self, items, slot):
        return self._most_in(items, [self.caps[slot]])

    def _most_together(self, items, slot):
        """The most of ``items`` that fit on node ``slot`` together (exact, small subsets)."""
        demands = sorted(option[1] for item in items for option in item.options if option[0] == slot)
        best = [0]
        steps = [0]

        def grow(start, left, placed):
            best[0] = max(best[0], placed)
            for number in range(start, len(demands)):
                steps[0] += 1
                if placed + len(demands) - number <= best[0] or steps[0] > TOGETHER_STEPS:
                    return
                if all(map(ge, left, demands[number])):
                    grow(number + 1, [have - want for have, want in zip(left, demands[number])], placed + 1)
        grow(0, list(self.caps[slot]), 0)
        # cut short: the resource-by-resource count, which never says fewer
        return best[0] if steps[0] <= TOGETHER_STEPS else self._most_alone(items, slot)

    def _most_in(self, items, caps):
        """How many of ``items`` the summed capacity of ``caps`` holds, resource by resource."""
        most = len(items)
        for r in range(self.width):
            total = sum(cap[r] for cap in caps)
            needs = [item.need[r] for item in items]
            if sum(needs) <= total:
                continue
            used = placed = 0
            for need in sorted(needs):
                used += need
                if used > total:
                    break
                placed += 1
            most = min(most, placed)
        return most
