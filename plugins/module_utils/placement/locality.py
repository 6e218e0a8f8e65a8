# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a tenant's VFs sit relative to its GPUs (placement/planner.py), and never a farther VF while
a nearer one is free. Pure.

The levels, nearest first (placement/index.py ``LEVELS``): PIX (at most one PCIe switch between
them), PXB (several bridges, no host bridge), PHB (through their host bridge), NODE (the same NUMA
node, another host bridge), SOCKET (another NUMA node of the same CPU package: Sub-NUMA Clustering,
NPS2/4; ``nvidia-smi topo -m`` prints SYS there as across sockets), SYS (another socket). A tenant
without GPUs has its VFs' level relative to its vCPUs' node (NODE, SOCKET or SYS).

- ``nearest_free``: once the plan is made, each new tenant's VF is swapped for a free VF nearer to
  its GPUs (or its node) that its ``numa`` allows, while there is one: the counts of the plan do
  not change, a farther VF is never kept while a nearer one stays free. Kept (existing)
  placements, VFs in IOMMU groups of several devices and tenants spanning nodes are left as they are;
- ``vf_locality``: per tenant ``{level, why}``: the level of its farthest VF and why no nearer
  one: under its GPU's switch, or the nearer VFs held by other tenants (named), none in the VF
  pool, no VF-capable PF on its GPU's node, ``pcie_affinity: ignore``.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import LEVELS, NODE_RANK, SOCKET_RANK, SYS_RANK
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import VF_SOCKET

__metaclass__ = type

WHERE = {
    "PIX": "under the PCIe switch of its GPU %s",
    "PXB": "behind the PCIe bridges of its GPU %s, without its host bridge",
    "PHB": "through the PCIe host bridge of its GPU %s",
}


def _distances(host, placement, ignore, vfs):
    """The ranks of ``vfs`` seen from the tenant of ``placement``: to the nearest of its GPUs (by
    NUMA level only under ``ignore``), else to its node."""
    gpus = placement["gpus"]
    if gpus and not ignore:
        return host.nearest_ranks(gpus, vfs) if vfs else []
    origins = [host.gpu_node.get(gpu) for gpu in gpus] if gpus else [placement["numa_node"]]
    # the level of each VF's node, worked out once per node
    nodes = list(map(host.vf_node.get, vfs))
    level = dict((node, min(host.node_level(origin, node) for origin in origins)) for node in set(nodes))
    return list(map(level.__getitem__, nodes))


def _allowed_nodes(planner, placement, numa):
    """The nodes a tenant's VFs may come from (None: any, a split under numa preferred)."""
    node = placement["numa_node"]
    if numa == "preferred":
        return None
    if numa == VF_SOCKET:
        return planner.host.socket_nodes(node)
    return [node]


def nearest_free(planner, state, tenants, placements):
    """Swap the VFs of the new (not kept) one-node placements of ``tenants`` for nearer free ones
    while there are, in tenant order; ``state`` and the placement records follow. -> [names changed]."""
    host = planner.host
    ignore = planner.policy["pcie_affinity"] == "ignore"
    changed = []
    for tenant in tenants:
        placement = placements.get(tenant["name"])
        if not placement or placement["kept"] or placement.get("cells") or not placement["vfs"]:
            continue
        vfs = list(placement["vfs"])
        ranks = _distances(host, placement, ignore, vfs)
        if max(ranks) == 0:
            continue  # under the GPU's switch already: nothing is nearer
        allowed = _allowed_nodes(planner, placement, tenant.get("numa", planner.policy["numa"]))
        nodes = list(state.free_vfs) if allowed is None else allowed
        free = [vf for node in nodes for vf in state.free_vfs.get(node, ()) if vf not in host.units and not host.companions.get(vf)]
        if not free:
            continue
        distances = _distances(host, placement, ignore, free)
        if min(distances) >= max(ranks):
            continue  # no free VF nearer than its farthest: none to swap (most tenants)
        offered = sorted(zip(distances, map(host.vf_order.__getitem__, free), free))
        # the farthest of its own VFs first, each for the nearest free one of its kind
        for rank, position in sorted(((rank, position) for position, rank in enumerate(ranks)), reverse=True):
            vf = vfs[position]
            if vf in host.units or host.companions.get(vf):
                continue
            network = host.vf_network.get(vf)
            found = next((entry for entry in offered if entry[0] < rank and host.vf_network.get(entry[2]) == network), None)
            if found is None:
                continue
            offered.remove(found)
            _swap(host, state, tenant["name"], vf, found[2])
            vfs[position] = found[2]
        if vfs != placement["vfs"]:
            pins = [placement["vcpu_pins"][str(i)] for i in range(len(placement["vcpu_pins"]))]
            placement.update(planner._record(tenant, placement["numa_node"], placement["gpus"], vfs, pins,
                                             placement["emulator_cpus"], placement["cpus"], resized_from=placement["resized_from"]))
            changed.append(tenant["name"])
    return changed


def _swap(host, state, name, old, new):
    """Give ``new`` (free) to ``name`` in place of ``old``, which is free again."""
    state.vf_owner.pop(old, None)
    state.vf_owner[new] = name
    old_node, new_node = host.vf_node.get(old), host.vf_node.get(new)
    state.free_vfs[new_node] = [vf for vf in state.free_vfs[new_node] if vf != new]
    free = state.free_vfs.setdefault(old_node, [])
    free.append(old)
    free.sort(key=host.vf_order.__getitem__)
    state.checks = {}


def vf_locality(planner, placements):
    """{name: {level, why}} for each placement with VFs: the level of its farthest VF from its
    nearest GPU (from its node without GPUs), and why none nearer."""
    host = planner.host
    ignore = planner.policy["pcie_affinity"] == "ignore"
    owner = dict((vf, name) for name, placement in placements.items() for vf in placement["vfs"])
    out = {}
    for name, placement in placements.items():
        if not placement["vfs"]:
            out[name] = None
            continue
        if placement.get("cells"):
            out[name] = {"level": "NODE", "why": "each VF on its own guest NUMA cell's node (numa: spread)"}
            continue
        ranks = _distances(host, placement, False, placement["vfs"])
        worst = max(ranks)
        farthest = placement["vfs"][ranks.index(worst)]
        level = LEVELS[worst] if worst < len(LEVELS) else None
        out[name] = {"level": level, "why": _why(planner, name, placement, farthest, worst, owner, ignore)}
    return out


def _nearer(host, placement, worst):
    """The pool's VFs nearer than ``worst`` to the tenant of ``placement`` (to its GPUs, else to its
    node), in pool order: read of the host alone, worked out once per index for each GPU set (or
    node) and rank (``HostIndex.nearer_vfs``), so once per host model where the index is kept. Its
    own farthest VF, at ``worst``, is never among them."""
    gpus = placement["gpus"]
    key = (tuple(gpus), worst) if gpus else (placement["numa_node"], worst)
    nearer = host.nearer_vfs.get(key)
    if nearer is None:
        nearer = host.nearer_vfs[key] = [vf for vf, rank in zip(host.vfs, _distances(host, placement, False, host.vfs)) if rank < worst]
    return nearer


def _why(planner, name, placement, vf, worst, owner, ignore):
    host = planner.host
    gpus = placement["gpus"]
    vf_node = host.vf_node.get(vf)
    if gpus:
        near = min(gpus, key=lambda gpu: host.rank_row(gpu)[vf])
        origin = host.gpu_node.get(near)
        seen = "its GPU %s" % near
    else:
        origin = placement["numa_node"]
        seen = "its vCPUs' node"
    level = LEVELS[worst] if worst < len(LEVELS) else None
    if level in WHERE:
        said = "VF %s %s" % (vf, WHERE[level] % near)
    elif worst == NODE_RANK:
        said = "VF %s on node %s with %s, under another PCIe root" % (vf, vf_node, seen) if gpus else \
            "VF %s on node %s with its vCPUs" % (vf, vf_node)
    elif worst in (SOCKET_RANK, SYS_RANK):
        said = "VF %s on node %s, %s %s (node %s)" % (
            vf, vf_node, "another NUMA node of the socket of" if worst == SOCKET_RANK else "on another socket than", seen, origin)
    else:
        said = "VF %s of unknown PCIe distance to %s (no affinity, no NUMA node)" % (vf, seen)
    if worst == 0:
        return said
    nearer = _nearer(host, placement, worst)
    held = sorted(set(owner[other] for other in nearer if other in owner and owner[other] != name))
    free = [other for other in nearer if other not in owner]
    reasons = []
    if held:
        reasons.append("the nearer VFs are held by %s" % ", ".join(held))
    if free:
        if placement["kept"]:
            reasons.append("kept from its existing assignment, though %d nearer VF(s) are free" % len(free))
        elif ignore:
            reasons.append("pcie_affinity: ignore (%d nearer VF(s) free)" % len(free))
        else:
            reasons.append("%d nearer VF(s) free that its numa policy does not allow" % len(free))
    if not nearer:
        reasons.append("no VF of the pool is nearer")
    if worst >= SOCKET_RANK and origin is not None and not host.node_vfs.get(origin):
        if not host.sriov_pfs.get(origin):
            reasons.append("node %s has no VF-capable PF" % origin)
        else:
            reasons.append("the SR-IOV PFs of node %s (%s) have no VFs in the pool" % (origin, ", ".join(host.sriov_pfs[origin])))
    if worst == SYS_RANK and origin is not None and host.socket.get(origin) is not None:
        mates = host.socket_nodes(origin)
        if not any(host.node_vfs.get(node) for node in mates):
            reasons.append("socket %s has no VF in the pool" % host.socket.get(origin))
    return "%s: %s" % (said, "; ".join(reasons))
