# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One-node and spanning placements decided together (``numa: spread``, placement/planner.py): the
search's plan with the spanning tenants after it (placement/spread.py), and plans that place some
spanning-allowed tenants across nodes *first* and search the others on what they leave; the best
by the plan's order (the most tenants, then the most ``online`` ones, then the fewest guest
cells, then the most local). ``proven`` only where a bound shows that no plan places more. Pure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# the most plans with tenants spanning first tried after the search's own (each one is a search:
# fewer with many tenants, at least 2, at most ALTERNATIVES * 16 // tenants), and the share of the
# search's budget (in nodes) they have together
ALTERNATIVES = 12
SHARE = 4


def _most_within(demands, free):
    """How many of ``demands`` fit ``free`` together at best: the smallest first."""
    count = 0
    for demand in sorted(demands):
        free -= demand
        if free < 0:
            break
        count += 1
    return count


class SpanningSearch:
    """The Planner's placement of one-node and spanning tenants together (a mixin: it needs
    ``policy``, ``host``, ``_most``, ``_spread``, ``_spread_all``, ``_place``, ``_cpu_room``,
    ``_memory_free`` and ``_needed_pages``)."""

    def _spans(self, tenant):
        return tenant.get("numa", self.policy["numa"]) == "spread"

    def _most_spanning(self, base, tenants, prefer, report):
        """The most ``tenants`` placed, spanning allowed: -> (placements, unplaced, state, the
        names placed across nodes). ``report``: the plan's ``search``, updated."""
        placed, unplaced, state = self._most(base, tenants, prefer, report)
        spread = self._spread_all(state, tenants, placed, unplaced)
        allowed = [t for t in tenants if self._spans(t)]
        if not allowed or not (unplaced or spread):
            # every tenant placed on one node each (or none may span): no plan places more
            return placed, unplaced, state, spread
        best = (self._plan_value(placed), placed, unplaced, state, spread, None)
        tried = spent = 0
        budget, share = self.budget, max(1, self.budget // SHARE)
        try:
            # each plan's search gets its part of the share; the greedy it starts from is always made
            self.budget = max(1, share // ALTERNATIVES)
            for first in self._firsts(allowed, placed, unplaced, spread)[:max(2, ALTERNATIVES * 16 // len(tenants))]:
                if spent >= share:
                    break
                trial = dict(report, not_proven=[])
                result = self._spanning_first(base, tenants, prefer, trial, first)
                if result is None:
                    continue
                tried += 1
                spent += trial["nodes"]
                value = self._plan_value(result[0])
                if value > best[0]:
                    best = (value,) + result + (trial,)
        finally:
            self.budget = budget
        _value, placed, unplaced, state, spread, trial = best
        if trial is not None:
            report.update(trial)
            report["kept"] = "spanning_first"
            report["spanning_first"] = sorted(name for name in spread if name in set(t["name"] for t in allowed))
        bound = self._bound(base, tenants)
        value = self._plan_value(placed)
        if value[:2] == bound:
            # as many tenants and online ones as the host's resources added up hold: no plan places more
            report.update(proven=True, not_proven=[])
        else:
            report["proven"] = False
            report["not_proven"].append(
                "tenants may span NUMA nodes (numa: spread): the plan is the best of the search's and of %d with some "
                "of them placed across nodes first; at most %d tenants (%d online) fit the host's free CPUs, memory, "
                "GPUs and VFs added up, and that no plan places more than %d (%d online) is not proven"
                % (tried, bound[0], bound[1], value[0], value[1]))
        return placed, unplaced, state, spread

    def _firsts(self, allowed, placed, unplaced, spread):
        """The sets of tenants placed across nodes first: those the search's plan spans or leaves
        out (together, then the unplaced ones together, then each), then each placed on one node
        (the most vCPUs first); online before batch."""
        def online_first(group):
            return sorted(group, key=lambda t: t["priority"] != "online")
        spanning = online_first(t for t in allowed if t["name"] in unplaced or t["name"] in spread)
        left = [t for t in spanning if t["name"] in unplaced]
        firsts = [spanning]
        if left and len(left) < len(spanning):
            firsts.append(left)
        if len(spanning) > 1:
            firsts.extend([t] for t in spanning)
        firsts.extend([t] for t in sorted((t for t in allowed if t["name"] in placed and t["name"] not in spread),
                                          key=lambda t: (t["priority"] != "online", -t["vcpus"])))
        return firsts[:ALTERNATIVES]

    def _spanning_first(self, base, tenants, prefer, report, first):
        """``first`` across nodes, then the search for the others, then the spanning ones left;
        -> (placements, unplaced, state, spread names) or None when none of ``first`` spans."""
        state = base.copy()
        ahead = {}
        for tenant in first:
            placement, _why = self._spread(state, tenant)
            if placement is not None:
                state.take(tenant["name"], placement)
                ahead[tenant["name"]] = placement
        if not ahead:
            return None
        rest = [t for t in tenants if t["name"] not in ahead]
        if rest:
            placed, unplaced, state = self._most(state, rest, prefer, report)
        else:
            placed, unplaced = {}, {}
        spread = self._spread_all(state, rest, placed, unplaced)
        placed.update(ahead)
        spread = [t["name"] for t in tenants if t["name"] in ahead or t["name"] in spread]
        state, spread = self._tidy(base, tenants, placed, spread)
        return placed, unplaced, state, spread

    def _tidy(self, base, tenants, placed, spread):
        """Each tenant placed across nodes first that one node now holds, next to the others, moved
        there; else re-spread on the fewest nodes if that takes fewer cells. Mutates ``placed``;
        -> (the state of the plan, the names still across nodes)."""
        by_name = dict((t["name"], t) for t in tenants)
        for name in list(spread):
            state = base.copy()
            for other, placement in placed.items():
                if other != name:
                    state.take(other, placement)
            tenant = by_name[name]
            placement, _why = self._place(state, tenant)
            if placement is None:
                placement, _why = self._spread(state, tenant)
                if placement is None or len(placement["cells"]) >= len(placed[name]["cells"]):
                    continue
            placed[name] = placement
        state = base.copy()
        for name, placement in placed.items():
            state.take(name, placement)
        return state, [name for name in spread if placed[name].get("cells")]

    @staticmethod
    def _plan_value(placements):
        """The plan's order: the most tenants, the most online ones, the fewest guest cells, the most local."""
        return (len(placements), sum(1 for p in placements.values() if p["priority"] == "online"),
                -sum(len(p["cells"]) if p.get("cells") else 1 for p in placements.values()),
                sum(1 for p in placements.values() if p["local"]))

    def _bound(self, base, tenants):
        """At most how many ``tenants`` (and online ones) any plan places on what ``base`` leaves:
        the smallest first, each resource of the host added up (CPUs, memory, GPUs, VFs)."""
        host = self.host

        def most(group):
            if not group:
                return 0
            counts = []
            for size in set(t["hugepage_size"] for t in group):
                # memory per page size: the tenants of one size against that pool
                same = [t for t in group if t["hugepage_size"] == size]
                counts.append(_most_within([self._needed_pages(t) if size else t["memory_mb"] for t in same],
                                           sum(self._memory_free(base, node, size) for node in host.nodes))
                              + len(group) - len(same))
            counts.append(_most_within([t["vcpus"] + (1 if t["emulator"] == "isolate" else 0) for t in group],
                                       sum(self._cpu_room(base, node) for node in host.nodes)))
            # every free GPU and VF, those of no node too (a numa: preferred tenant's split takes them)
            counts.append(_most_within([len(t["gpu_addresses"]) if t["gpu_addresses"] is not None else t["gpu_count"] for t in group],
                                       sum(map(len, base.free_gpus.values()))))
            counts.append(_most_within([t["vf_count"] for t in group], sum(map(len, base.free_vfs.values()))))
            return min(counts)
        return most(tenants), most([t for t in tenants if t["priority"] == "online"])
