# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The counts model of the placement search: what each NUMA node has left and what each tenant
takes there, as vectors that add up (placement_search.py finds the most tenants that fit).

A set of tenants fits on a node exactly when the sums of their demand vectors are within the
node's capacity vector, for these resources:

- CPUs: whole free cores (``smt: whole_cores``) or free threads. With cores of one and two online
  threads on one node (SMT threads offline) a tenant of ``t`` threads takes ``ceil(t / 2)`` cores and
  ``t`` threads: the tenants fit together exactly when both sums fit, taking a one-thread core for an
  odd tenant's last thread where there is one (Planner._choose_cores does);
- GPUs and VFs in whole IOMMU groups: with group sizes ``s1 < s2 < ...`` each dividing the next, a
  tenant of ``k`` devices takes ``k mod s(j+1)`` of them in groups of size up to ``s(j)``, for each
  ``j``, and ``k`` in all; tenants fit together exactly when each of these sums fits (the devices
  left in small groups always make up whole larger units);
- under ``pcie_affinity: require`` the VFs of a tenant with GPUs must lie within the level of its
  GPUs: counted per node as the VFs near all of the node's GPUs, exact when each node has its GPUs
  and their near VFs under one switch (the DGX class);
- 2M and 1G pages, memory outside the pools.

Where a node falls outside these cases the counts are a relaxation (no set that fits is refused)
and ``gaps`` says what is then not proven.
"""

from __future__ import absolute_import, division, print_function

from operator import le

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import affinity
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement_search import Candidate, Search

__metaclass__ = type


def _level_counts(sizes, free, unit_size):
    """Per group size but the largest: how many of the ``free`` devices lie in groups of up to it."""
    return tuple(sum(1 for address in free if unit_size.get(address, 1) <= size) for size in sizes[:-1])


def _level_demand(sizes, count, explicit, unit_size):
    """What a tenant of ``count`` devices (or the ``explicit`` ones) takes at each level of
    ``_level_counts`` (``count`` a multiple of the smallest size)."""
    if explicit is not None:
        return tuple(sum(1 for address in explicit if unit_size.get(address, 1) <= size) for size in sizes[:-1])
    return tuple(count % larger for larger in sizes[1:])


def search_nodes(planner, state, tenants, prefer):
    """-> (node or None per tenant, the Search or None, gaps): the most ``tenants`` placed
    NUMA-locally by their counts, with what ``state`` left free; ``gaps`` lists where the counts
    are a relaxation only (empty: the counts are exact)."""
    host = planner.host
    policy = planner.policy
    whole_cores = planner.whole_cores
    require = policy["pcie_affinity"] == "require"
    gaps = []
    isolate_extra = dict((t["name"], 1 if t["emulator"] == "isolate" else 0) for t in tenants)
    gpu_sizes, gpu_chain = host.group_sizes["gpus"]
    vf_sizes, vf_chain = host.group_sizes["vfs"]
    if len(gpu_sizes) > 1 and not gpu_chain:
        gaps.append("GPU IOMMU groups of sizes %s (one does not divide the next)" % ", ".join(map(str, gpu_sizes)))
        gpu_sizes = ()
    if len(vf_sizes) > 1 and not vf_chain:
        gaps.append("VF IOMMU groups of sizes %s (one does not divide the next)" % ", ".join(map(str, vf_sizes)))
        vf_sizes = ()
    unit_size = host.unit_size
    core_sizes = dict((node, set(map(len, state.free_cores[node]))) for node in host.nodes) if whole_cores else {}
    with_threads = any(len(found) > 1 for found in core_sizes.values())
    odd = sorted(node for node, found in core_sizes.items() if len(found) > 1 and not found <= {1, 2})
    if odd:
        gaps.append("cores of more than two thread counts on node %s" % ", ".join(map(str, odd)))
    near = {}
    if require:
        for node in host.nodes:
            gpus, vfs = state.free_gpus[node], state.free_vfs[node]
            if not gpus or not vfs:
                continue
            rows = [host.nearest_ranks([gpu], vfs) for gpu in gpus]
            # VFs near every free GPU of the node: a tenant's GPUs reach them wherever they are
            near[node] = sum(1 for ranks in zip(*rows) if all(rank <= planner.threshold for rank in ranks))
            if any((rank <= planner.threshold) != (column[0] <= planner.threshold) for column in zip(*rows) for rank in column):
                gaps.append("node %d under pcie_affinity require: its GPUs are not all within %s of the same VFs"
                            % (node, policy["pcie_affinity_level"]))
    caps, peak = [], []
    for node in host.nodes:
        used = state.hugepages_used.get(node, {})
        pools = host.hugepages.get(node, {})
        mem = host.memory_mb.get(node, 0) - planner._pool_mb(node) - planner.reserved_memory_mb - state.memory_used.get(node, 0)
        cores = state.free_cores[node]
        peak.append(max(core_sizes[node]) if whole_cores and core_sizes[node] else 1)
        cpu = len(cores) if whole_cores else len(state.free_threads[node])
        cap = (cpu, len(state.free_gpus[node]), len(state.free_vfs[node]),
               pools.get("2M", 0) - used.get("2M", 0), pools.get("1G", 0) - used.get("1G", 0), mem)
        if with_threads:
            cap += (sum(map(len, cores)),)
        if len(gpu_sizes) > 1:
            cap += _level_counts(gpu_sizes, state.free_gpus[node], unit_size)
        if len(vf_sizes) > 1:
            cap += _level_counts(vf_sizes, state.free_vfs[node], unit_size)
        if require:
            cap += (near.get(node, 0),)
        caps.append(cap)
    rank_lists = node_ranks(planner, state) if any(t["gpu_count"] and t["vf_count"] and t["gpu_addresses"] is None for t in tenants) else {}
    claim_bits = {}
    candidates, index_of = [], []
    slots = list(enumerate(host.nodes))
    for index, tenant in enumerate(tenants):
        options = []
        explicit = tenant["gpu_addresses"]
        gpu_nodes = set(host.gpu_node.get(a) for a in explicit) if explicit is not None else None
        if explicit is not None and any(a in state.gpu_owner for a in explicit):
            gpu_nodes = set()
        sticky_node = (prefer.get(tenant["name"]) or {}).get("node")
        pages = planner._needed_pages(tenant)
        size = tenant["hugepage_size"]
        threads = tenant["vcpus"] + isolate_extra[tenant["name"]]
        rest = (tenant["gpu_count"], tenant["vf_count"], pages if size == "2M" else 0, pages if size == "1G" else 0,
                0 if size else tenant["memory_mb"])
        if with_threads:
            rest += (threads,)
        # a count no set of whole groups makes fits nowhere (the concrete pass says why)
        if gpu_sizes and explicit is None and tenant["gpu_count"] % gpu_sizes[0] or vf_sizes and tenant["vf_count"] % vf_sizes[0]:
            continue
        if len(gpu_sizes) > 1:
            rest += _level_demand(gpu_sizes, tenant["gpu_count"], explicit, unit_size)
        if len(vf_sizes) > 1:
            rest += _level_demand(vf_sizes, tenant["vf_count"], None, unit_size)
        if require:
            rest += (tenant["vf_count"] if tenant["gpu_count"] else 0,)
        ranked = tenant["vf_count"] and tenant["gpu_count"] and policy["pcie_affinity"] != "ignore"
        # the demand differs between nodes only by their threads per core
        demands = {}
        for slot, node in slots:
            if gpu_nodes is not None and gpu_nodes - {node}:
                continue
            per_core = peak[slot]
            demand = demands.get(per_core)
            if demand is None:
                demand = demands[per_core] = (-(-threads // per_core),) + rest
            if all(map(le, demand, caps[slot])):
                options.append((slot, demand, rank_estimate(planner, tenant, node, rank_lists) if ranked else 0,
                                0 if sticky_node in (None, node) else 1))
        if not options:
            continue
        claims = 0
        for addr in explicit or ():
            claims |= claim_bits.setdefault(addr, 1 << len(claim_bits))
        candidates.append(Candidate(options, tenant["priority"] == "online", claims))
        index_of.append(index)
    assignment = [None] * len(tenants)
    if not candidates:
        return assignment, None, gaps
    # nodes are interchangeable when every candidate would take and score the same on them
    signatures = dict((slot, []) for slot in range(len(host.nodes)))
    for number, candidate in enumerate(candidates):
        for slot, demand, rank, _sticky in candidate.options:
            signatures[slot].append((number, demand, rank))
    class_ids = {}
    classes = [class_ids.setdefault(tuple(signatures[slot]), len(class_ids)) for slot in range(len(host.nodes))]
    search = Search(caps, classes, candidates, planner.budget)
    for number, slot in enumerate(search.run()):
        if slot is not None:
            assignment[index_of[number]] = host.nodes[slot]
    return assignment, search, gaps


def node_ranks(planner, state):
    """Per node, its free VFs' ranks to the nearest free GPU of the node, nearest first."""
    ranks = {}
    if planner.policy["pcie_affinity"] == "ignore":
        return ranks
    for node in planner.host.nodes:
        gpus = state.free_gpus[node]
        ranks[node] = sorted(planner.host.nearest_ranks(gpus, state.free_vfs[node])) if gpus else []
    return ranks


def rank_estimate(planner, tenant, node, rank_lists):
    """The PCIe rank a tenant with GPUs and VFs can get on ``node``: its VFs the nearest ones."""
    if not tenant["vf_count"] or not tenant["gpu_count"] or planner.policy["pcie_affinity"] == "ignore":
        return 0
    if tenant["gpu_addresses"] is not None:
        nearest = sorted(planner.host.nearest_ranks(tenant["gpu_addresses"], planner.host.node_vfs[node]))
    else:
        nearest = rank_lists.get(node) or []
    return nearest[tenant["vf_count"] - 1] if len(nearest) >= tenant["vf_count"] else len(affinity.LEVELS)
