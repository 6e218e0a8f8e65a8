# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The counts model of the placement search: what each NUMA node has left and what each tenant
takes there, as vectors that add up (placement/search.py finds the most tenants that fit).

A set of tenants fits on a node exactly when the sums of their demand vectors are within the
node's capacity vector, for these resources:

- CPUs: whole free cores (``smt: whole_cores``) or free threads. With cores of one and two online
  threads on one node (SMT threads offline) a tenant of ``t`` threads takes ``ceil(t / 2)`` cores and
  ``t`` threads: the tenants fit together exactly when both sums fit, taking a one-thread core for an
  odd tenant's last thread where there is one (placement_allocation.choose_cores does);
- GPUs and VFs in whole IOMMU groups: with group sizes ``s1 < s2 < ...`` each dividing the next, a
  tenant of ``k`` devices takes ``k mod s(j+1)`` of them in groups of size up to ``s(j)``, for each
  ``j``, and ``k`` in all; tenants fit together exactly when each of these sums fits (the devices
  left in small groups always make up whole larger units);
- under ``pcie_affinity: require`` the VFs of a tenant with GPUs must lie within the level of one
  of its GPUs: on a node whose GPUs sit under more than one switch, the GPUs and the near VFs of
  each switch are counted apart, and a tenant with both has one option per way to take them
  (its VFs only from switches it has a GPU under); the tenants with GPUs or VFs only take what the
  others leave, in the node's totals (the concrete pass places them after the tenants with both);
- 2M and 1G pages, memory outside the pools.

Where a node falls outside these cases the counts are a relaxation (no set that fits is refused)
and ``gaps`` says what is then not proven.
"""

from __future__ import absolute_import, division, print_function

from itertools import product
from operator import le

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import UNKNOWN_RANK
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import VF_SOCKET
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.search import Candidate, Search

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
    are a relaxation only (empty: the counts are exact).

    Under ``numa: required_vf_socket`` the VFs of a socket are shared by its nodes: each node counts
    all of them first (a relaxation). Where the best assignment so found asks a socket for more VFs
    than it has, the socket's VFs are split between its nodes, each split counted exactly (a node
    holds its tenants' VFs within its share, its own VFs for the numa required ones), and the best
    over the splits kept: the most there is, once the splits are all tried or one reaches the
    relaxation's value."""
    free, tight = socket_vfs(planner, state, tenants)
    found = _counted(planner, state, tenants, prefer, free)
    if not tight or found[2] is None:
        return found
    host = planner.host
    has = dict((host.socket[node], free[node]) for node in host.nodes if host.socket.get(node) in tight)

    def over(assignment):
        asked = dict((socket, 0) for socket in tight)
        for tenant, node in zip(tenants, assignment):
            if node is not None and host.socket.get(node) in asked:
                asked[host.socket[node]] += tenant["vf_count"]
        return [socket for socket in tight if asked[socket] > has[socket]]

    spent = found[2].nodes
    split = []
    while True:
        violated = over(found[0])
        if not violated:
            # no socket asked for more VFs than it has: the best of the relaxation, so the best
            break
        # one socket more at a time: the fewer split, the fewer ways
        split.append(next(socket for socket in violated if socket not in split))
        splits = _splits(planner, state, tenants, split)
        if splits is None:
            found[3].append("the VFs of socket %s shared by its nodes (numa: %s): more than %d ways to split them, counted per node"
                            % (", ".join(map(str, split)), VF_SOCKET, MOST_SPLITS))
            break
        bound, best, stopped, exhausted = found[2].best, None, False, False
        for number, shares in enumerate(splits):
            attempt = _counted(planner, state, tenants, prefer, _merged(free, shares))
            if attempt[2] is None:
                continue
            spent += attempt[2].nodes
            exhausted = exhausted or attempt[2].exhausted
            key = (attempt[2].best, not over(attempt[0]))
            if best is None or key > best[0]:
                best = (key, attempt)
            if key >= (bound, True):
                break
            if spent >= planner.budget:
                stopped = number + 1 < len(splits)
                break
        if best is None:
            found = ([None] * len(tenants), [None] * len(tenants), found[2], found[3])
            break
        found = best[1]
        found[2].exhausted = found[2].exhausted or exhausted
        if stopped:
            found[3].append("the VFs of socket %s shared by its nodes (numa: %s): the search budget ran out before every way "
                            "to split them was tried" % (", ".join(map(str, split)), VF_SOCKET))
            break
    found[2].nodes = spent
    return found


# the most ways to split the VFs of the sockets between their nodes that the search tries
MOST_SPLITS = 1024


def _splits(planner, state, tenants, sockets):
    """Every way to split the free VFs of each of ``sockets`` between its nodes ({node: share}),
    no node's share above the VFs of the tenants that fit it one at a time, or None when there are
    more than MOST_SPLITS."""
    host = planner.host
    per_socket = []
    total = 1
    for socket in sockets:
        nodes = [node for node in host.nodes if host.socket.get(node) == socket]
        free = sum(len(state.free_vfs[node]) for node in nodes)
        most = [min(free, sum(t["vf_count"] for t in tenants if t["vf_count"] and _fits_alone(planner, state, t, node))) for node in nodes]
        ways = list(_compositions(min(free, sum(most)), most))
        total *= len(ways)
        if total > MOST_SPLITS:
            return None
        per_socket.append([dict(zip(nodes, way)) for way in ways])
    out = [{}]
    for ways in per_socket:
        out = [_merged(done, way) for done in out for way in ways]
    return out


def _merged(first, second):
    merged = dict(first)
    merged.update(second)
    return merged


def _compositions(total, most):
    """Each tuple of counts from 0 up to ``most`` (one each) adding up to ``total``."""
    if len(most) == 1:
        if total <= most[0]:
            yield (total,)
        return
    for first in range(min(total, most[0]), -1, -1):
        for rest in _compositions(total - first, most[1:]):
            yield (first,) + rest


def _fits_alone(planner, state, tenant, node):
    """Whether ``tenant`` alone could go on ``node`` by its GPUs, CPUs and memory (what bounds the
    VFs a node's share need hold)."""
    explicit = tenant["gpu_addresses"]
    if explicit is not None:
        if any(planner.host.gpu_node.get(a) != node for a in explicit):
            return False
    elif tenant["gpu_count"] > len(state.free_gpus[node]):
        return False
    return planner._alloc_cpus(state, node, tenant, build=False) is None and planner._memory_check(state, node, tenant) is None


def _counted(planner, state, tenants, prefer, shares):
    """search_nodes with ``shares``: per node the VFs its numa required_vf_socket tenants (and all
    its tenants with VFs) may take, or None without such tenants."""
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
    switches = _switches(planner, state, gaps) if require else {}
    width = max([len(found) for found in switches.values()] or [0])
    if width and any(len(sizes) > 1 for sizes in (gpu_sizes, vf_sizes)):
        gaps.append("IOMMU groups of more than one device on nodes with GPUs under more than one switch (pcie_affinity require)")
    shared = shares
    if shared is not None and (width or len(vf_sizes) > 1):
        gaps.append("numa: %s with VF IOMMU groups of several sizes or pcie_affinity require over several switches" % VF_SOCKET)
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
        if shared is not None:
            cap += (shared[node],)
        for gpus, vfs in switches.get(node, ()):
            cap += (len(gpus), len(vfs))
        cap += (0, 0) * (width - len(switches.get(node, ())))
        caps.append(cap)
    # every node of one count of threads per core: a tenant's demand is the same on each
    alike = len(set(peak)) == 1
    rank_lists = node_ranks(planner, state) if any(t["gpu_count"] and t["vf_count"] and t["gpu_addresses"] is None for t in tenants) else {}
    claim_bits = {}
    # per VF count: the rank a tenant with GPUs (a count) and that many VFs gets on each node
    node_rank = {}
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
        on_socket = shared is not None and tenant.get("numa") == VF_SOCKET
        # a numa required_vf_socket tenant's VFs come from its socket's count, not its node's
        rest = (tenant["gpu_count"], 0 if on_socket else tenant["vf_count"], pages if size == "2M" else 0, pages if size == "1G" else 0,
                0 if size else tenant["memory_mb"])
        if with_threads:
            rest += (threads,)
        # a count no set of whole groups makes fits nowhere (the concrete pass says why)
        if gpu_sizes and explicit is None and tenant["gpu_count"] % gpu_sizes[0] or vf_sizes and tenant["vf_count"] % vf_sizes[0]:
            continue
        if len(gpu_sizes) > 1:
            rest += _level_demand(gpu_sizes, tenant["gpu_count"], explicit, unit_size)
        if len(vf_sizes) > 1:
            rest += _level_demand(vf_sizes, 0 if on_socket else tenant["vf_count"], None, unit_size)
        if shared is not None:
            rest += (tenant["vf_count"],)
        pairs = width and tenant["gpu_count"] and tenant["vf_count"]
        if width and not pairs:
            rest += (0, 0) * width
        ranked = tenant["vf_count"] and tenant["gpu_count"] and policy["pcie_affinity"] != "ignore"
        ranks = None
        if ranked and explicit is None:
            # the same for every tenant of as many VFs
            ranks = node_rank.get((tenant["vf_count"], on_socket))
            if ranks is None:
                lists = rank_lists if not on_socket else socket_ranks(planner, state)
                ranks = node_rank[(tenant["vf_count"], on_socket)] = [rank_estimate(planner, tenant, node, lists) for node in host.nodes]
        # the demand differs between nodes only by their threads per core
        demands = {}
        if gpu_nodes is None and sticky_node is None and not pairs and alike and (ranks is not None or not ranked):
            # most tenants: one demand on every node, no node of its own to keep, ranks known per node
            demand = (-(-threads // peak[0]),) + rest
            options = [(slot, demand, ranks[slot] if ranks is not None else 0, 0) for slot in range(len(caps))
                       if all(map(le, demand, caps[slot]))]
            slots_left = ()
        else:
            slots_left = slots
        for slot, node in slots_left:
            if gpu_nodes is not None and gpu_nodes - {node}:
                continue
            per_core = peak[slot]
            demand = demands.get(per_core)
            if demand is None:
                demand = demands[per_core] = (-(-threads // per_core),) + rest
            if ranks is not None:
                rank = ranks[slot]
            elif ranked:
                rank = rank_estimate(planner, tenant, node, rank_lists)
            else:
                rank = 0
            sticky = 0 if sticky_node is None or sticky_node == node else 1
            if pairs:
                for way in _switch_ways(switches.get(node, ()), width, len(state.free_gpus[node]), tenant, explicit):
                    if all(map(le, demand + way, caps[slot])):
                        options.append((slot, demand + way, rank, sticky))
            elif all(map(le, demand, caps[slot])):
                options.append((slot, demand, rank, sticky))
        if not options:
            continue
        claims = 0
        for addr in explicit or ():
            claims |= claim_bits.setdefault(addr, 1 << len(claim_bits))
        candidates.append(Candidate(options, tenant["priority"] == "online", claims))
        index_of.append(index)
    assignment = [None] * len(tenants)
    ways = [None] * len(tenants)
    if not candidates:
        return assignment, ways, None, gaps
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
            node = host.nodes[slot]
            assignment[index_of[number]] = node
            tenant = tenants[index_of[number]]
            if width and switches.get(node) and not host.units and tenant["gpu_count"] and tenant["vf_count"]:
                demand = search.best_choice[number]
                ways[index_of[number]] = [(gpus, vfs, demand[len(demand) - 2 * width + 2 * d], demand[len(demand) - 2 * width + 2 * d + 1])
                                          for d, (gpus, vfs) in enumerate(switches[node])]
    return assignment, ways, search, gaps


def _switches(planner, state, gaps):
    """Per node with GPUs under more than one switch (under pcie_affinity require): [(GPUs, the
    VFs within the level of them)], one entry per set of GPUs near the same VFs (a switch). A
    tenant with GPUs and VFs takes its VFs from the switches it has a GPU under."""
    host, threshold = planner.host, planner.threshold
    found, plain = {}, True
    for node in host.nodes:
        gpus, vfs = state.free_gpus[node], state.free_vfs[node]
        if not gpus or not vfs:
            found[node] = []
            continue
        by_near = {}
        for gpu in gpus:
            near = tuple(vf for vf, rank in zip(vfs, host.nearest_ranks([gpu], vfs)) if rank <= threshold)
            by_near.setdefault(near, []).append(gpu)
        near_sets = [near for near in by_near if near]
        # all GPUs near all VFs (one switch): the node's totals say it all
        plain = plain and len(by_near) == 1 and len(near_sets[0] if near_sets else ()) == len(vfs)
        if len(set().union(*near_sets)) < sum(map(len, near_sets)) if near_sets else False:
            # switches sharing VFs: counted as one switch, a relaxation
            gaps.append("node %d under pcie_affinity require: VFs near GPUs of different switches" % node)
            union = sorted(set().union(*near_sets), key=host.vf_order.__getitem__)
            found[node] = [(sorted(g for near in near_sets for g in by_near[near]), union)]
            continue
        found[node] = [(by_near[near], list(near)) for near in sorted(near_sets)]
    return {} if plain else found


def _switch_ways(switches, width, free_gpus, tenant, explicit):
    """The ways a tenant with GPUs and VFs can take them on a node with ``switches``: per switch
    (GPUs, VFs) taken, flattened to ``width`` switches; VFs only from switches it has a GPU under."""
    count, vf_count = tenant["gpu_count"], tenant["vf_count"]
    if explicit is not None:
        gpu_ways = [tuple(sum(1 for a in explicit if a in gpus) for gpus, _vfs in switches)]
    else:
        elsewhere = free_gpus - sum(len(gpus) for gpus, _vfs in switches)
        gpu_ways = [way for way in product(*[range(min(len(gpus), count) + 1) for gpus, _vfs in switches])
                    if count - elsewhere <= sum(way) <= count]
    ways = []
    for gpu_way in gpu_ways:
        rooms = [min(len(vfs), vf_count) if taken else 0 for taken, (_gpus, vfs) in zip(gpu_way, switches)]
        for vf_way in product(*[range(room + 1) for room in rooms]):
            if sum(vf_way) == vf_count:
                flat = ()
                for pair in zip(gpu_way, vf_way):
                    flat += pair
                ways.append(flat + (0, 0) * (width - len(switches)))
    return ways


def node_ranks(planner, state):
    """Per node, its free VFs' ranks to the nearest free GPU of the node, nearest first."""
    ranks = {}
    if planner.policy["pcie_affinity"] == "ignore":
        return ranks
    for node in planner.host.nodes:
        gpus = state.free_gpus[node]
        ranks[node] = sorted(planner.host.nearest_ranks(gpus, state.free_vfs[node])) if gpus else []
    return ranks


def socket_vfs(planner, state, tenants):
    """-> (per node the free VFs of its socket, the sockets of several nodes with fewer free VFs
    than the tenants ask for in all), or (None, []) when no ``numa: required_vf_socket`` tenant
    asks for VFs. Counted so per node, a relaxation: two nodes of one socket may count the same
    VFs (search_nodes then splits them where it matters)."""
    host = planner.host
    if not any(t.get("numa") == VF_SOCKET and t["vf_count"] for t in tenants):
        return None, []
    free = dict((node, sum(len(state.free_vfs[other]) for other in host.socket_nodes(node))) for node in host.nodes)
    wanted = sum(t["vf_count"] for t in tenants)
    tight = sorted(set(host.socket.get(node) for node in host.nodes if len(host.socket_nodes(node)) > 1 and free[node] < wanted))
    return free, tight


def socket_ranks(planner, state):
    """Per node, the free VFs of its socket ranked to the nearest free GPU of the node, nearest first."""
    ranks = {}
    host = planner.host
    for node in host.nodes:
        gpus = state.free_gpus[node]
        vfs = [vf for other in host.socket_nodes(node) for vf in state.free_vfs[other]]
        ranks[node] = sorted(host.nearest_ranks(gpus, vfs)) if gpus and vfs else []
    return ranks


def rank_estimate(planner, tenant, node, rank_lists):
    """The PCIe rank a tenant with GPUs and VFs can get on ``node``: its VFs the nearest ones."""
    if not tenant["vf_count"] or not tenant["gpu_count"] or planner.policy["pcie_affinity"] == "ignore":
        return 0
    if tenant["gpu_addresses"] is not None:
        nodes = planner.host.socket_nodes(node) if tenant.get("numa") == VF_SOCKET else [node]
        nearest = sorted(planner.host.nearest_ranks(tenant["gpu_addresses"], [vf for n in nodes for vf in planner.host.node_vfs[n]]))
    else:
        nearest = rank_lists.get(node) or []
    return nearest[tenant["vf_count"] - 1] if len(nearest) >= tenant["vf_count"] else UNKNOWN_RANK


def switch_devices(state, node, tenant, ways):
    """The GPUs and VFs the search's way (per switch: its GPUs and near VFs, how many of each)
    gives ``tenant`` on ``node``, from what is free now; None when they are not there."""
    taken_gpus, vfs = [], []
    in_switches = set()
    free_gpus, free_vfs = set(state.free_gpus[node]), set(state.free_vfs[node])
    for gpus, near, gpu_count, vf_count in ways:
        in_switches.update(gpus)
        if tenant["gpu_addresses"] is None:
            mine = [gpu for gpu in gpus if gpu in free_gpus][:gpu_count]
            if len(mine) < gpu_count:
                return None
            taken_gpus += mine
        mine = [vf for vf in near if vf in free_vfs][:vf_count]
        if len(mine) < vf_count:
            return None
        vfs += mine
    if tenant["gpu_addresses"] is not None:
        return list(tenant["gpu_addresses"]), vfs
    rest = tenant["gpu_count"] - len(taken_gpus)
    others = [gpu for gpu in state.free_gpus[node] if gpu not in in_switches][:rest]
    if len(others) < rest:
        return None
    return taken_gpus + others, vfs
