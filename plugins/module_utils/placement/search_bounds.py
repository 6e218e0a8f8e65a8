# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bounds of the placement search (placement/search.py): the most tenants any completion of
a search state could still place, from counts that never say fewer than fit.

``Bounds`` is the part of ``Search`` that asks them: the Lagrangian prices of the root
(placement_lagrange.capacity_prices), the tenants that may still be placed and where, the count
resource by resource (the smallest needs first, and the resources' shares added up), per set of
nodes that some tenants are confined to, and exactly per node where a bound is worth its steps
(placement_lagrange.most_that_fit); at the root, nodes alike counted together (placement_bins),
and the host split in two, each part's configuration bound (placement_lagrange.Configurations)
rounded down on its own.
"""

from __future__ import absolute_import, division, print_function

from bisect import bisect_right
from itertools import accumulate, compress
from operator import mul, not_

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.bins import most_in_bins
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.lagrange import Configurations, capacity_prices, most_that_fit

__metaclass__ = type

# fixed-point scale of a tenant's size (its needs as shares of the host's totals), for the search order and the shares' count
SCALE = 1 << 20
# the most steps of one search spent counting the tenants that nodes alike hold together (placement_bins)
BINS_STEPS = 6000
# how many counts the bound asks the nodes alike about per set of nodes: the best found, then one more
BINS_TRIES = 2
# the split bound (Bounds._split_bound): how many sets of nodes it splits the host at (those most
# tenants are confined to first), and the subgradient steps of the configuration bound per part
SPLIT_SETS = 2
SPLIT_STEPS = 60
# more steps when the confined part's bound is this close to what proves the best found
SPLIT_CLOSE = 0.5


class Bounds:
    """The bounds of ``Search`` (placement_search): a mixin over its state (``caps``, ``queue``,
    ``masks``, ``blocked``, ``forced``, ``claimed``, ``best`` ...)."""

    def _duals(self):
        """Prices for the node capacities at the root (placement_lagrange.capacity_prices): what
        the capacity left is worth at them, and per queue position what the tenants from there on
        can add; the search reads this bound at every node."""
        queue = self.queue
        live = [number for number in range(len(queue)) if not self.blocked >> number & 1 and self.masks[number]]
        # the count proven (the search is after online tenants or ranks): all the steps, for prices
        # that cut deeper, rather than the first that prove the count
        target = self.best[0] - 1 if self.best[0] >= self.ceiling[0] else self.best[0]
        self.prices = capacity_prices(self.caps, [queue[number].fits for number in live], target)
        self.dual_cap = sum(sum(map(mul, row, cap)) for row, cap in zip(self.prices, self.caps))
        gains = [0.0] * (len(queue) + 1)
        for number in live:
            gains[number] = max([0.0] + [1.0 - sum(map(mul, self.prices[slot], demand)) for slot, demand in queue[number].fits])
        self.suffix = list(accumulate(gains[::-1]))[::-1]

    def _fitting(self, index):
        """(queue positions, node bit masks): the tenants from ``index`` on that may still be
        placed and where each fits now; None when one that must be placed fits nowhere."""
        blocked, claimed, masks = self.blocked, self.claimed, self.masks
        members = list(compress(range(index, len(masks)), masks[index:]))
        if blocked:
            members = [number for number in members if not blocked >> number & 1]
        if claimed:
            queue = self.queue
            members = [number for number in members if not queue[number].claims & claimed]
        bits = sum(map(self.bits.__getitem__, members))
        if self.forced >> index << index & ~bits:
            return None
        return members, list(map(masks.__getitem__, members)), bits

    def _bound(self, index, count, online, rank, exact=False, fitting=None, cut=False):
        """The best value any completion from ``index`` could reach (an upper bound), or None
        when a tenant that must be placed fits nowhere: the remaining tenants that still fit on
        some node, no more than each resource's total holds; and for each set of nodes that some
        tenants can only go to (the GPU nodes, say), no more of those than these nodes hold (in
        total, and node by node: resource by resource, or with ``exact`` the most that fit
        together). With ``cut`` (the search's question: does this branch end?) None as soon as
        the bound is known to end it: each part only lowers it, so the answer is the same."""
        if fitting is None:
            fitting = self._fitting(index)
            if fitting is None:
                return None
        members, where, bits = fitting
        online_left = bin(self.online_bits & bits).count("1")
        ceiling = (count + len(members), online + online_left, -rank)
        if ceiling <= self.best:
            return ceiling
        caps = self.caps
        forced = self.forced & bits
        best = self.best
        most = len(members)
        if self.suffix is not None:
            # the Lagrangian bound of the root's multipliers (placement_search._duals)
            most = min(most, int(self.dual_cap + self.suffix[index] + 1e-7))
            if cut and (count + most, online + min(most, online_left), -rank) <= best:
                return None
        total = self.total
        # the tenants that must be placed (dominance) take their part first; which of them are
        # (1 or 0 per member), read again by the sets of nodes below
        flags = [forced >> number & 1 for number in members] if forced else None
        after = self._most_after(members, flags, total)
        if after is None:
            return None
        most = min(most, after)
        if cut and (count + most, online + min(most, online_left), -rank) <= best:
            return None
        # enough to cut the branch: fewer tenants than the best found
        enough = self.best[0] - count
        # the sets of nodes some tenants are confined to: all of them for the ceiling; in the
        # search those of one or two nodes that tenants which must be placed are confined to
        # (most branches these cut end there; wider sets cost more than the branches they cut)
        if exact or index == 0:
            confined = set(where)
        elif forced:
            confined = [its for its in set(compress(where, flags)) if bin(its).count("1") <= 2]
        else:
            confined = ()
        for slots in sorted(confined):
            if slots == self.all_slots:
                continue
            if most < enough and not forced:
                break  # enough to cut already: no later set changes the answer
            group = [number for number, its in zip(members, where) if not its & ~slots]
            chosen = self._slots(slots)
            if exact:
                per_node = sum(self._most_together(group, slot) for slot in chosen)
            else:
                per_node = sum(self._count(group, caps[slot]) for slot in chosen)
            group_flags = [forced >> number & 1 for number in group] if forced else None
            together = self._most_after(group, group_flags, list(map(sum, zip(*[caps[slot] for slot in chosen]))))
            if together is None or (forced and per_node < sum(group_flags)):
                return None
            held = min(per_node, together)
            most = min(most, len(members) - len(group) + held)
            if held and (exact or index == 0 or not forced):
                most = min(most, self._with_rest(members, group, held, total))
            if cut and (count + most, online + min(most, online_left), -rank) <= best:
                return None
        online_most = min(most, online_left)
        # each tenant can at best be on its own best node: no rank added
        return (count + most, online + online_most, -rank)

    def _bins_bound(self):
        """The root's bound with each set of nodes alike counted together (placement_bins): of
        the tenants confined to some nodes (all the nodes among them), no more than those nodes
        hold, each tenant once over the nodes alike; None when some tenant that must be placed
        fits nowhere. An upper bound like ``_bound``'s (never below the best any completion
        reaches), often lower: it does not let every node count the same small tenants."""
        fitting = self._fitting(0)
        if fitting is None:
            return None
        members, where, bits = fitting
        online_left = bin(self.online_bits & bits).count("1")
        # the nodes alike: one static class (the same demand of every tenant) and one room
        kinds = {}
        for slot, cap in enumerate(self.caps):
            kinds[(self.classes[slot], tuple(cap))] = kinds.get((self.classes[slot], tuple(cap)), 0) | 1 << slot
        most = len(members)
        enough = self.best[0]
        # the sets of fewest nodes first; none after the one that proves the best found
        for slots in sorted(set(where) | {self.all_slots}, key=lambda mask: (bin(mask).count("1"), mask)):
            if most <= enough:
                break
            group = [(number, its) for number, its in zip(members, where) if not its & ~slots]
            outside = len(members) - len(group)
            asks = []
            for (_class, room), alike in sorted(kinds.items()):
                inside = alike & slots
                if inside:
                    slot = self._slots(inside)[0]
                    # the least each tenant takes there over its ways to take the node
                    asks.append(([self.queue[number].least[slot] for number, its in group if its >> slot & 1], room, bin(inside).count("1")))
            asks.sort(key=lambda ask: len(ask[0]))
            # first what the group would have to hold for this set to prove the best found, then
            # one more (a ceiling the depth-first search stops at once it finds that many):
            # asking whether the nodes hold more than a count is quicker than asking how many
            least = max(0, enough - outside)
            for _try in range(BINS_TRIES):
                if outside + least >= most:
                    break
                held = 0
                # the nodes fewest tenants fit on first (all of them, often: one on each node)
                for demands, room, alike in asks:
                    held += self._in_bins(demands, room, alike, max(0, least - held))
                    if held > least:
                        break
                if held <= least:
                    most = outside + held
                    break
                least += 1
        return (most, min(most, online_left), 0)

    def _split_sets(self, where):
        """The sets of nodes the host may be split at, from the nodes each tenant may go to
        (``where``): each set some tenants are confined to (not every node), those most tenants
        are confined to first (then by the set's bits, for one order every time)."""
        confined = {}
        for its in where:
            if its != self.all_slots:
                confined[its] = confined.get(its, 0) + 1
        return sorted(confined, key=lambda mask: (-confined[mask], mask))

    def _split_bound(self):
        """The root's bound with the host split in two at a set of nodes some tenants are confined
        to (the GPU nodes, say): the tenants placed there are no more than the configuration bound
        of those nodes and the tenants that may go there (placement_lagrange.Configurations) says,
        rounded down, and those placed on the other nodes no more than theirs, rounded down: the
        sum is never below the most placed (each tenant placed is on one of the two parts, and each
        part's bound is no lower than the most placed there). Rounded down twice, it is often lower
        than the configuration bound of the whole host, rounded once (a half tenant on each part).
        The tenants are counted by kind (the same demand on every node: one price).
        -> (most, online, 0) or None (no set to split at, or a knapsack past its steps)."""
        fitting = self._fitting(0)
        if fitting is None:
            return None
        members, where, bits = fitting
        online_left = bin(self.online_bits & bits).count("1")
        best = None
        for slots in self._split_sets(where)[:SPLIT_SETS]:
            # the other part first (fewer tenants fit there, most often): its count is what the
            # confined part's bound must then stay under
            parts = []
            for part in (self.all_slots & ~slots, slots):
                chosen = part_tenants(members, where, part)
                if not chosen:
                    parts.append(0)
                    continue
                configs = Configurations(self.caps, [self.queue[number].fits for number, _its in chosen], [its for _number, its in chosen])
                target = self.best[0] - sum(parts) if parts else 0
                bound = configs.most(target, SPLIT_STEPS)
                if bound is not None and parts and target + 1 <= bound < target + 1 + SPLIT_CLOSE:
                    # this close to a proof: more steps, from the best prices with larger steps
                    configs.restart()
                    bound = configs.most(target, SPLIT_STEPS)
                if bound is None:
                    break
                parts.append(min(len(chosen), int(bound + 1e-7)))
            if len(parts) == 2 and (best is None or sum(parts) < best):
                best = sum(parts)
            if best is not None and best <= self.best[0]:
                break
        if best is None:
            return None
        return (best, min(best, online_left), 0)

    def _in_bins(self, demands, room, bins, least):
        """How many of ``demands`` ``bins`` nodes of room ``room`` hold together (placement_bins),
        or ``least`` when no more; all of them once the steps of this search for it are spent."""
        if not demands:
            return 0
        key = (tuple(sorted(demands)), room, bins, least)
        most = self.in_bins.get(key)
        if most is None:
            most, steps = most_in_bins(demands, room, bins, self.bins_left, least, self.bins_sets)
            self.bins_left = max(0, self.bins_left - steps)
            if most is None:
                most = len(demands)
            self.in_bins[key] = most
        return most

    def _with_rest(self, members, group, held, total):
        """The most tenants placed when at most ``held`` of ``group`` (confined to some nodes) are:
        ``k`` of them take at least the ``k`` least of each resource, and the others get no more
        than what is left of ``total``, for the best ``k``."""
        inside = set(group)
        rest = [number for number in members if number not in inside]
        if not rest:
            return held
        sums = [(r, list(accumulate(sorted(map(column.__getitem__, group))))) for r, column in self.columns]
        best = self._count(rest, total)
        for k in range(1, held + 1):
            left = list(total)
            for r, running in sums:
                left[r] -= running[k - 1]
            best = max(best, k + self._count(rest, left))
            if best >= held + len(rest):
                break
        return best

    def _most_after(self, members, flags, total):
        """How many of the tenants at ``members`` a capacity ``total`` holds, resource by
        resource, when those flagged (``flags``: 1 or 0 per member, None for none) are all among
        them; None when these do not fit."""
        if flags is None:
            return self._count(members, total)
        must = list(compress(members, flags))
        if not must:
            return self._count(members, total)
        others = list(compress(members, map(not_, flags)))
        left = list(total)
        for r, column in self.columns:
            left[r] -= sum(map(column.__getitem__, must))
            if left[r] < 0:
                return None
        return len(must) + self._count(others, left)

    def _slots(self, mask):
        """The node slots of a bit mask."""
        slots = self.slot_lists.get(mask)
        if slots is None:
            slots = self.slot_lists[mask] = [slot for slot in range(len(self.caps)) if mask >> slot & 1]
        return slots

    def _count(self, members, cap):
        """How many of the tenants at queue positions ``members`` a capacity ``cap`` holds,
        resource by resource (the smallest needs first); each question asked once per search."""
        key = (tuple(members), tuple(cap))
        most = self.counted.get(key)
        if most is not None:
            return most
        most = len(members)
        binding = []
        for r, column in self.columns:
            if sum(map(column.__getitem__, members)) > cap[r]:
                needs = sorted(map(column.__getitem__, members))
                most = min(most, bisect_right(list(accumulate(needs)), cap[r]))
                if cap[r] > 0:
                    binding.append((column, cap[r]))
        if len(binding) > 1 and most > 1:
            # the resources together: each tenant's shares of them, added up, fit in as many shares
            # (one list per resource, then added up per tenant: the same sums without a generator per tenant)
            shares = sorted(map(sum, zip(*[[column[number] * SCALE // room for number in members] for column, room in binding])))
            most = min(most, bisect_right(list(accumulate(shares)), SCALE * len(binding)))
        self.counted[key] = most
        return most

    def _most_together(self, members, slot):
        """The most of the tenants at ``members`` that fit on node ``slot`` together (exact, small
        subsets; the same for nodes of one class with the same room)."""
        key = (tuple(members), self.classes[slot], tuple(self.caps[slot]))
        if key not in self.together:
            self.together[key] = self._count_together(members, slot)
        return self.together[key]

    def _count_together(self, members, slot):
        # one demand per tenant (the least of each resource over its ways to take the node: never fewer)
        demands = []
        queue = self.queue
        for number in members:
            demand = queue[number].least.get(slot)
            if demand is not None:
                demands.append(demand)
        demands.sort()
        limit = self.together_left
        best, steps = most_that_fit(demands, self.caps[slot], limit)
        # cut short: the resource-by-resource count, which never says fewer
        if steps <= limit:
            self.together_left -= steps
            return best
        self.together_left = 0
        return self._count(members, self.caps[slot])


def part_tenants(members, where, part):
    """The tenants (queue positions ``members``, where each fits: ``where``) that may go to some
    node of ``part`` (a bit mask of nodes), each with the nodes of ``part`` it fits: [(position,
    mask)]. A tenant that fits on both parts of a split is in both: either may hold it."""
    return [(number, its & part) for number, its in zip(members, where) if its & part]
