# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenant placement planner: which tenant gets which GPUs, VFs, host CPUs and hugepages.

Pure Python over the host model of ``topology.read_topology`` (docs/CONTRACTS.md): no I/O,
no clock, no randomness. The same inputs give the same plan.

Guarantees (tested in tests/unit/plugins/module_utils/placement/test_planner.py):

- exclusive: no GPU, VF or host CPU is given to two tenants, hugepages per node never exceed
  the node's pool, reserved CPUs are never given; with ``smt: whole_cores`` no physical core
  is shared between two tenants or between a tenant and the host's reserved CPUs;
- the most placed: the honoured ``existing`` assignments stay as they are; of the other
  (new) tenants, as many are placed NUMA-locally as any assignment could place (then the most
  ``online`` ones, then the nearest GPU/VF pairs the nodes offer), found by a bounded search
  (placement/search.py) that starts from the best fit in list order and is never worse than it;
  ``search`` in the plan says when its budget cut it short and what is then not proven;
- stable across runs: a plan's placements given back as ``existing`` are all kept, in any
  tenant order, whatever tenants are added;
- NUMA-local first: a tenant is split over nodes (``numa: preferred``), or spans nodes with guest
  cells (``numa: spread``: ``search.spread`` names them), only when no node can hold it whole next
  to the tenants placed locally; under spread the search's plan (spanning tenants after it, online
  first) is weighed against plans that place some tenants across nodes first
  (placement/spanning.py), by the most placed, the most online, then the fewest guest cells; such a
  plan is proven only when every tenant is placed or a bound over the host's resources added up
  shows that no plan places more;
- a tenant that cannot be placed gets a reason naming the short resource on each node;
- resize in place: a defined tenant whose vCPU count changed keeps its node, devices, emulator
  CPUs and the pins of the vCPUs it keeps; a growing one gets its extra CPUs on its own node
  after the unchanged tenants are placed, and is re-planned (alone) only when its node is full;
- released: the resources of a tenant marked absent (or no longer listed) are free for the plan;
- IOMMU groups (tests/unit/plugins/module_utils/placement/test_groups.py): the GPUs and VFs of one
  group go to one tenant or to none, with the group's other functions (``companions``: a card's
  audio or USB function); a group holding a function the host keeps leaves them out, with the
  reason (``groups.left_out``); bridges do not count. The counts of the search are exact with
  group sizes that divide each other (placement/counts.py; checked against the CP-SAT oracle).

The planner's files, one concept each (placement/planner.py composes them):

- placement/index.py: ``HostIndex``, the planner's index of the host model (per node its cores,
  GPUs, VFs and pools, per device its IOMMU group, the PCIe ranks of GPUs to VFs), built once per
  host model in a process (placement/index_cache.py: keyed by the bytes of what it reads);
- placement/planner_request.py: the policy and each tenant's inputs, checked;
- placement/existing.py: previous assignments kept, resized in place, or re-planned;
- placement/allocation.py: what is taken (``State``), one tenant on one node, the greedy's step;
- placement/counts.py and placement/search.py: which tenants go on which node, by counts (the
  search's bounds in placement/search_bounds.py, nodes alike counted together in placement/bins.py);
- placement/spread.py: ``numa: spread`` tenants that no node holds, over the fewest nodes, after the search;
- placement/spanning.py: one-node and spanning placements weighed together, and what is then proven;
- placement/report.py: what removed tenants release, what is left free, the groups' report;
- placement/partitions.py: on HGX boards with NVSwitches, a tenant's GPUs are one Fabric Manager partition.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.allocation import Allocation, State
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.existing import GROW_LATER, ExistingAssignments
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import level_rank, read_host_devices
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index_cache import host_model
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.locality import nearest_free, vf_locality
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.partitions import Partitions
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.report import PlanReport
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner_request import TenantRequests, read_policy
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.pool_groups import groups_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.spanning import SpanningSearch
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.spread import SpreadPlacement
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import VF_SOCKET, stays

__metaclass__ = type


class Planner(TenantRequests, ExistingAssignments, Allocation, SpreadPlacement, SpanningSearch, PlanReport, Partitions):
    """Plans tenants on one host. ``plan()`` returns the plan dict (see ``plan_tenants``)."""

    def __init__(self, topology, policy=None):
        merged = self.policy = read_policy(policy)
        # the index and, on HGX boards with NVSwitches, the board whose Fabric Manager partitions a
        # tenant's GPUs are (placement/partitions.py): built once per host model in this process
        # (placement/index_cache.py)
        self.host, self.board = host_model(topology, merged["gpus"], merged["vf_pfs"], read_host_devices(merged["host_devices"]),
                                           merged["gpu_modules"])
        # what the reasons say of the host alone (placement/allocation.py), said once per index:
        # once per host model where the index is kept
        self.host_notes = self.host.notes
        reserved = parse_cpulist(merged["reserved_cpus"], "policy.reserved_cpus", self.host.cpu_bound)
        outside = [cpu for cpu in reserved if cpu not in self.host.cpu_node]
        if outside:
            raise InputError("policy.reserved_cpus: CPU(s) %s do not exist on this host (CPUs %s)"
                             % (format_cpulist(outside), format_cpulist(self.host.cpu_node)))
        self.reserved = set(reserved)
        try:
            self.reserved_memory_mb = int(merged["reserved_memory_mb"])
            self.budget = int(merged["search_budget"])
        except (TypeError, ValueError):
            raise InputError("policy.reserved_memory_mb and policy.search_budget must be whole numbers (%r, %r)"
                             % (merged["reserved_memory_mb"], merged["search_budget"]))
        # what bounds one tenant's size: the host's online CPUs and its memory
        self.limits = {"cpus": len(self.host.online) or None, "memory_mb": sum(self.host.memory_mb.values()) or None}
        self.threshold = level_rank(merged["pcie_affinity_level"])
        self.first_fit = merged["strategy"] == "first_fit"
        self.whole_cores = merged["smt"] == "whole_cores"
        if not isinstance(merged["existing"] or {}, dict):
            raise InputError("policy.existing: expected a dict tenant name -> assignment (a previous plan's placements)")

    # ------------------------------------------------------------------ plan
    def plan(self, tenants):
        parsed = self._tenants(tenants)
        refused = dict((t["name"], t["refused"]) for t in parsed if t.get("refused"))
        active = [t for t in parsed if stays(t) and not t.get("refused")]
        existing = self.policy["existing"] or {}
        state = State(self.host, self.reserved)
        placements = {}
        notes = {}
        # 1. honour previous assignments, in tenant order; 1b. then grow the ones that grow
        growing = []
        for tenant in active:
            if tenant["name"] not in existing:
                continue
            placement, why = self._existing(state, tenant, existing[tenant["name"]])
            if why == GROW_LATER:
                growing.append(tenant)
                continue
            if placement is None:
                notes[tenant["name"]] = "re-planned: %s" % why
                continue
            self._keep(state, placements, notes, tenant, placement)
        for tenant in growing:
            placement, why = self._existing(state, tenant, existing[tenant["name"]], grow=True)
            if placement is None:
                notes[tenant["name"]] = "re-planned: %s" % why
                continue
            self._keep(state, placements, notes, tenant, placement)
        # 2. place the others: the most of them (best fit), or each in turn (first fit)
        new = [t for t in active if t["name"] not in placements]
        prefer = dict((t["name"], self._prefer(existing.get(t["name"]))) for t in new)
        search = {"nodes": 0, "budget": self.budget, "exhausted": False, "proven": True, "not_proven": [], "kept": "search"}
        spread = []
        if not new:
            # every tenant kept its assignment (a converged host): nothing to search for
            placed, unplaced = {}, {}
        elif self.first_fit:
            placed, unplaced = self._in_turn(state, new, prefer)
            search.update({"proven": False, "not_proven": ["strategy first_fit places each tenant in turn, without a search"],
                           "kept": "first_fit"})
            spread = self._spread_all(state, new, placed, unplaced)
        else:
            # 3. with the numa: spread tenants no node holds over the fewest nodes, and plans that
            # place some of them across nodes first (placement/spanning.py)
            placed, unplaced, state, spread = self._most_spanning(state, new, prefer, search)
        if spread:
            search["spread"] = spread
        placements.update(placed)
        # never a farther VF while a nearer one its numa allows stays free; then where each VF is
        nearest_free(self, state, new, placements)
        for name, where in vf_locality(self, placements).items():
            placements[name]["vf_locality"] = where
        self._partition_report(placements)
        unplaced.update(refused)
        removed = sorted(name for name in existing if name not in set(t["name"] for t in active) | set(refused))
        released = dict((name, self._released(existing[name])) for name in removed)
        for gone in released.values():
            # the partition a removed tenant's GPUs were: the tenants stage deactivates it after the removal
            gone["nvswitch_partition"] = self._partition_of(gone["gpus"])
        # the VFs given back, per PF, as gpuvirt.tenancy.sriov_vfs entries that clear their MAC and VLAN
        vf_resets = {}
        for name in removed:
            for vf, pf in sorted(released[name]["vf_pfs"].items()):
                vf_resets.setdefault(pf, []).append({"address": vf, "clear": True})
        return {"placements": dict((t["name"], placements[t["name"]]) for t in active if t["name"] in placements),
                "unplaced": unplaced, "notes": notes, "free": self._free(state), "removed": removed,
                "released": released, "vf_resets": vf_resets, "search": search, "groups": self._group_report()}

    def _in_turn(self, state, tenants, prefer, placements=None):
        """Each tenant in list order on its best node given those before it (the greedy); the
        reason for each that fits nowhere. Mutates ``state``."""
        placements = {} if placements is None else placements
        unplaced = {}
        for tenant in tenants:
            if tenant["name"] in placements:
                continue
            placement, why = self._place(state, tenant, prefer.get(tenant["name"]))
            if placement is None:
                unplaced[tenant["name"]] = why
                continue
            state.take(tenant["name"], placement)
            placements[tenant["name"]] = placement
        return placements, unplaced

    def _most(self, state, tenants, prefer, report):
        """The most ``tenants`` placed NUMA-locally (placement_counts, placement_search), made
        concrete node by node; the rest in turn (a split under numa preferred, or the reason).
        Never fewer than the greedy: unless the counts were exact, the search finished and every
        node gave what its counts promised (then the plan is the optimum), the greedy plan is
        made too and kept if it is better. -> (placements, unplaced, state)"""
        # Imported here: a call whose tenants all keep their assignments (a converged host's
        # re-run) never searches, and module code is compiled from source on every call.
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.counts import (  # pylint: disable=import-outside-toplevel
            search_nodes, switch_devices)
        base = state
        state = base.copy()
        assignment, ways, search, gaps = search_nodes(self, state, tenants, prefer)
        exhausted = bool(search and search.exhausted)
        placements = {}
        short = []
        # explicit GPUs first: a tenant asking for a count then takes the GPUs they leave; those
        # with GPUs and VFs before the others, which take what they leave (placement_counts); numa
        # required_vf_socket tenants after the others alike, their VFs from what the socket's nodes leave
        for index in sorted(range(len(tenants)), key=lambda i: (tenants[i]["gpu_addresses"] is None,
                                                                tenants[i].get("numa") == VF_SOCKET,
                                                                not (tenants[i]["gpu_count"] and tenants[i]["vf_count"]))):
            tenant, node = tenants[index], assignment[index]
            if node is None:
                continue
            devices = None
            if ways[index]:
                devices = switch_devices(state, node, tenant, ways[index])
                if devices is None:
                    short.append(tenant["name"])
                    continue
            result = self._candidate(state, tenant, node, True, prefer.get(tenant["name"]) or {}, scored=False, devices=devices)
            if isinstance(result, str):
                short.append(tenant["name"])
                continue
            state.take(tenant["name"], result[0])
            placements[tenant["name"]] = result[0]
        placements, unplaced = self._in_turn(state, tenants, prefer, placements)
        not_proven = []
        if exhausted:
            not_proven.append("the search stopped at its budget of %d nodes and kept the best plan found" % self.budget)
        if gaps:
            not_proven.append("the counts are a relaxation for %s" % "; ".join(gaps))
        if short:
            not_proven.append("the nodes could not give %s what the counts promised" % ", ".join(sorted(short)))
        kept = "search"
        # the search counts local placements only: under numa preferred the greedy, which splits
        # a tenant at its turn, may place more
        if not_proven or self.policy["numa"] == "preferred":
            greedy_state = base.copy()
            greedy, greedy_unplaced = self._in_turn(greedy_state, tenants, prefer)
            if self._value(greedy) > self._value(placements):
                placements, unplaced, state, kept = greedy, greedy_unplaced, greedy_state, "greedy"
        report.update({"nodes": search.nodes if search else 0, "exhausted": exhausted, "proven": not not_proven,
                       "not_proven": not_proven, "kept": kept})
        return placements, unplaced, state

    @staticmethod
    def _value(placements):
        return (len(placements), sum(1 for p in placements.values() if p["priority"] == "online"),
                sum(1 for p in placements.values() if p["local"]))


def plan_tenants(topology, tenants, policy=None):
    """Plan ``tenants`` on the host described by ``topology`` under ``policy``.

    Returns ``{"placements": {name: {numa_node (None for a tenant spanning nodes), numa_nodes,
    cells (None on one node; else per guest cell {id, node, vcpus, cpus, memory_kib, hugepages,
    gpus, vfs}), gpus, vfs, network_vfs, vf_pfs, vcpu_pins,
    emulator_cpus, cpus, hugepages: {size, size_kb, count, node} | None, local, pcie_affinity (the
    farthest GPU/VF level: PIX, PXB, PHB, NODE, SOCKET or SYS), vf_locality ({level, why}: where its
    farthest VF is relative to its nearest GPU, or to its node without GPUs, and why none nearer;
    None without VFs; placement/locality.py), nvswitch_partition (on an HGX board with NVSwitches, the
    Fabric Manager partition its GPUs are: {id, gpus, physical_ids, board}, id None with ``why`` where not
    known; None without GPUs or NVSwitches; placement/partitions.py), kept, resized_from, name, vcpus, max_vcpus,
    priority, memory_mb, mac, vlan, companions: the functions sharing its devices' IOMMU groups, given to it with them}},
    "unplaced": {name: reason}, "notes": {name: why an existing assignment was not kept, or how
    it was resized}, "free": {node: {cpus, gpus, vfs, hugepages}}, "removed": [names in existing
    that are no longer active tenants], "released": {removed name: {gpus, vfs, vf_pfs,
    other_devices, cpus, numa_node, hugepages, nvswitch_partition: the partition its GPUs were, as a
    placement has it}}, "vf_resets": {PF: [{address, clear: true}], the sriov_vfs entries clearing
    the MAC and VLAN of the VFs given back}, "search": {nodes, budget, exhausted: true when the
    search for the most tenants placed stopped at its budget and kept the best found, proven: no
    assignment places more (placement_counts), not_proven: [why not], kept: search, greedy,
    first_fit or spanning_first (a plan placing ``spanning_first``: [names] across nodes before the
    search), spread: [the tenants spanning nodes], only when there are}, "groups":
    {left_out: {GPU or VF: why its IOMMU group keeps it out}, shared: {device: the GPUs or VFs of
    its group}, companions: {device: the functions it takes along}}}``.
    The inputs are read, never modified. Raises common.InputError on bad input.
    """
    return Planner(topology, policy).plan(tenants)


def group_devices(topology, policy=None):
    """The IOMMU groups of the tenant pools (placement/pool_groups.py's ``groups_of``) of a plan of
    no tenant under ``policy``, the whole policy checked as :func:`plan_tenants` checks it (the
    filter ``tenant_group_devices``). Raises common.InputError on bad input."""
    planner = Planner(topology, policy or {})
    planner.plan([])
    return groups_of(planner.host)
