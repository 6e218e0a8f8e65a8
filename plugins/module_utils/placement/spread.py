# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenants that span NUMA nodes (``numa: spread``), placed by the planner (placement/planner.py) after
its search, on what the search left: each on as few nodes as hold it, the closest set first by
the host's NUMA distances, one guest NUMA cell per host node. Its GPUs and VFs sit on their own
node's cell; its vCPUs and memory are split over the cells as evenly as the nodes' free room
allows. A greedy step in list order, not a search: the search's proof (the most tenants placed
on one node each) does not cover these tenants, and the plan says so. Pure.
"""

from __future__ import absolute_import, division, print_function

from itertools import combinations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB

__metaclass__ = type

# the most node sets of one size tried in full for one tenant (the closest first): each one that
# passes the totals but not the nodes' own room costs an allocation attempt
SETS_TRIED = 64


def balanced_split(total, caps, minimum=1):
    """``total`` split over ``len(caps)`` parts, each at least ``minimum`` and at most its cap, as
    evenly as the caps allow (the smallest caps filled first, what is left shared by the others;
    the remainder of an uneven split to the first parts); None when it cannot be."""
    count = len(caps)
    if not count or min(caps) < minimum or sum(caps) < total or total < minimum * count:
        return None
    parts = [0] * count
    left = total
    open_parts = list(range(count))
    # the parts whose cap is below the even level take their cap, until none is
    while open_parts:
        level = left // len(open_parts)
        capped = [index for index in open_parts if caps[index] <= level]
        if not capped:
            break
        for index in capped:
            parts[index] = caps[index]
            left -= caps[index]
        open_parts = [index for index in open_parts if index not in capped]
    if not open_parts:
        return parts if not left else None
    level, rest = divmod(left, len(open_parts))
    for rank, index in enumerate(open_parts):
        parts[index] = level + (1 if rank < rest else 0)
    return parts


class SpreadPlacement:
    """The Planner's placement of one tenant over several nodes (a mixin: it needs ``host``,
    ``policy``, ``reserved``, ``whole_cores``, ``_alloc_cpus``, ``_pick_gpus``, ``_pick_vfs``,
    ``_memory_free``, ``_needed_pages`` and ``_record``)."""

    def _spread_all(self, state, tenants, placements, unplaced):
        """Each tenant of ``tenants`` that is ``numa: spread`` and not placed on one node, the
        ``online`` ones first, then in list order, over the fewest nodes that hold it; its reason
        kept when none do. Mutates ``state``, ``placements`` and ``unplaced``; -> the names placed so."""
        spread = []
        for tenant in sorted(tenants, key=lambda t: t["priority"] != "online"):
            name = tenant["name"]
            if tenant.get("numa") != "spread" or name in placements or name not in unplaced:
                continue
            placement, why = self._spread(state, tenant)
            if placement is None:
                unplaced[name] = "%s; across NUMA nodes (numa: spread): %s" % (unplaced[name], why)
                continue
            state.take(name, placement)
            placements[name] = placement
            del unplaced[name]
            spread.append(name)
        return spread

    def _cpu_room(self, state, node):
        if self.whole_cores:
            return sum(map(len, state.free_cores[node]))
        return len(state.free_threads[node])

    def _spread(self, state, tenant):
        """``tenant`` over two or more nodes: -> (placement, None) or (None, why not)."""
        host = self.host
        extra = 1 if tenant["emulator"] == "isolate" else 0
        memory = self._needed_pages(tenant) if tenant["hugepage_size"] else tenant["memory_mb"]
        gpus_needed = len(tenant["gpu_addresses"]) if tenant["gpu_addresses"] is not None else tenant["gpu_count"]
        must = set(host.gpu_node.get(a) for a in tenant["gpu_addresses"] or ())
        if None in must:
            return None, "GPU(s) of unknown NUMA node cannot sit on a guest cell"
        cpus = dict((node, self._cpu_room(state, node)) for node in host.nodes)
        memory_room = dict((node, self._memory_free(state, node, tenant["hugepage_size"])) for node in host.nodes)
        gpus = dict((node, len(state.free_gpus[node])) for node in host.nodes)
        vfs = dict((node, len(state.free_vfs[node])) for node in host.nodes)
        # only nodes that can hold a cell (a vCPU and some memory)
        usable = [node for node in host.nodes if cpus[node] >= 1 and memory_room[node] >= 1]
        why = "the %d of %d nodes with CPUs and memory free do not hold %d vCPUs%s, %d %s, %d GPUs and %d VFs together%s" % (
            len(usable), len(host.nodes), tenant["vcpus"], " + 1 emulator" if extra else "", memory,
            "%s hugepages" % tenant["hugepage_size"] if tenant["hugepage_size"] else "MiB", gpus_needed, tenant["vf_count"],
            "" if must.issubset(usable) else " (its GPUs' nodes %s among them)" % ",".join(map(str, sorted(must))))

        def short(nodes):
            return (sum(cpus[n] for n in nodes) < tenant["vcpus"] + extra or sum(memory_room[n] for n in nodes) < memory
                    or sum(gpus[n] for n in nodes) < gpus_needed or sum(vfs[n] for n in nodes) < tenant["vf_count"])
        if short(usable) or not must.issubset(usable):
            # all the nodes with room together do not hold it: no set of them does
            return None, why
        for size in range(2, len(usable) + 1):
            found = []
            for nodes in combinations(usable, size):
                if not must.issubset(nodes) or short(nodes):
                    continue
                # the closest set first: the smallest sum of distances between its nodes
                found.append((sum(host.distance[pair] for pair in combinations(nodes, 2)), nodes))
            for _cost, nodes in sorted(found)[:SETS_TRIED]:
                result = self._spread_on(state, tenant, list(nodes), cpus, memory_room, memory)
                if isinstance(result, str):
                    why = "nodes %s: %s" % (",".join(map(str, nodes)), result)
                    continue
                return result, None
        return None, why

    def _spread_vfs(self, state, nodes, gpus, count):
        """``count`` free VFs of ``nodes``, one at a time the nearest to the tenant's GPUs, the
        cells taking turns at equal distance (so that each cell's GPUs get a VF near them); None
        when too few are near enough. Hosts without VF groups only (else ``_pick_vfs``'s)."""
        host = self.host
        free = [vf for node in nodes for vf in state.free_vfs[node]]
        affinity = not self.first_fit and self.policy["pcie_affinity"] != "ignore"
        ranks = dict(zip(free, host.nearest_ranks(gpus, free))) if affinity else {}
        if affinity and self.policy["pcie_affinity"] == "require":
            free = [vf for vf in free if ranks[vf] <= self.threshold]
        if len(free) < count:
            return None
        chosen, per_node = [], dict((node, 0) for node in nodes)
        while len(chosen) < count:
            vf = min((vf for vf in free if vf not in chosen),
                     key=lambda vf: (ranks.get(vf, 0), per_node[host.vf_node[vf]], host.vf_order[vf]))
            chosen.append(vf)
            per_node[host.vf_node[vf]] += 1
        return chosen

    def _spread_on(self, state, tenant, nodes, cpus, memory_room, memory):
        """``tenant`` with one guest cell per node of ``nodes`` (in node order): -> placement or why not."""
        host = self.host
        gpus = self._pick_gpus(state, tenant, nodes, nodes[0], bool(tenant["vf_count"]))
        if isinstance(gpus, str):
            return gpus
        vfs = self._pick_vfs(state, tenant, nodes, nodes[0], gpus)
        if isinstance(vfs, str):
            return vfs
        if len(vfs) > 1 and gpus and not host.units:
            vfs = self._spread_vfs(state, nodes, gpus, len(vfs)) or vfs
        isolate = tenant["emulator"] == "isolate"
        # the emulator thread on the node with the most CPUs free
        emulator_node = max(nodes, key=lambda node: (cpus[node], -node)) if isolate else None
        caps = [cpus[node] - (1 if node == emulator_node else 0) for node in nodes]
        shares = balanced_split(tenant["vcpus"], caps)
        if shares is None:
            return "CPUs short: %s free, %d vCPUs%s" % (
                "+".join(map(str, (cpus[n] for n in nodes))), tenant["vcpus"], " + 1 emulator" if isolate else "")
        parts = balanced_split(memory, [memory_room[node] for node in nodes])
        if parts is None:
            return "memory short: %s free" % "+".join(str(memory_room[n]) for n in nodes)
        size = tenant["hugepage_size"]
        cells, pins, held, emulator = [], [], [], []
        for cell, (node, share, part) in enumerate(zip(nodes, shares, parts)):
            alone = dict(tenant, vcpus=share, emulator="isolate" if node == emulator_node else "vcpus")
            taken = self._alloc_cpus(state, node, alone)
            if isinstance(taken, str):
                return taken
            cell_pins, cell_emulator, cell_held = taken
            if node == emulator_node:
                emulator = list(cell_emulator)
            cells.append({
                "id": cell,
                "node": node,
                "vcpus": list(range(len(pins), len(pins) + share)),
                "cpus": list(cell_held),
                "memory_kib": part * SIZES_KB[size] if size else part * 1024,
                "hugepages": part if size else None,
                "gpus": [a for a in gpus if host.gpu_node.get(a) == node],
                "vfs": [a for a in vfs if host.vf_node.get(a) == node],
            })
            pins.extend(cell_pins)
            held.extend(cell_held)
        if tenant["emulator"] == "vcpus":
            emulator = sorted(pins)
        elif tenant["emulator"] == "housekeeping":
            local = sorted(cpu for cpu in self.reserved if host.cpu_node.get(cpu) in nodes)
            emulator = local or sorted(self.reserved)
        placement = self._record(tenant, nodes[0], gpus, vfs, pins, emulator, held)
        placement.update(numa_node=None, numa_nodes=list(nodes), cells=cells, local=True)
        if placement["hugepages"]:
            # the pages come from each cell's node: the cells have their counts
            placement["hugepages"] = dict(placement["hugepages"], node=None)
        return placement
