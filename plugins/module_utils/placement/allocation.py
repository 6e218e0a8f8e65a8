# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's allocation (placement/planner.py): what is taken and what is free (``State``), and one
tenant's CPUs, GPUs, VFs and memory on one node (``Allocation``), made into the one shape of a
placement, and the best node for a tenant given what is taken (the greedy's step). Pure.
"""

from __future__ import absolute_import, division, print_function

from bisect import bisect_left
from itertools import accumulate, chain, compress, filterfalse, repeat
from operator import eq

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import LEVELS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import VF_SOCKET

__metaclass__ = type


def pick_units(ordered, count, units):
    """``count`` of the devices ``ordered`` (best first) in whole IOMMU groups (``units``: device
    -> the devices of its group, for groups of more than one), or None. Larger groups first, so
    single devices stay for tenants that ask for one; then as ordered."""
    groups, seen = [], set()
    for address in ordered:
        unit = units.get(address) or (address,)
        if unit not in seen:
            seen.add(unit)
            groups.append(unit)
    groups.sort(key=len, reverse=True)
    chosen = []

    def fill(start, left):
        if not left:
            return True
        tried = set()
        for index in range(start, len(groups)):
            size = len(groups[index])
            # groups of one size are alike for the count: the first of them is tried
            if size <= left and size not in tried:
                tried.add(size)
                chosen.append(groups[index])
                if fill(index + 1, left - len(groups[index])):
                    return True
                chosen.pop()
        return False
    found = fill(0, count)
    fill = None  # the recursive closure refers to itself: freed now, not left to the garbage collector
    if not found:
        return None
    return [address for unit in chosen for address in unit]


# the keys of a placement's vcpu_pins ("0", "1", ...), made once for every plan: a fleet's plans
# kept together (a report of many hosts) share these strings instead of holding a copy each
_PIN_KEYS = []


def pin_keys(count):
    """The vCPU numbers 0 .. ``count`` - 1 as strings, the keys of ``vcpu_pins``."""
    if len(_PIN_KEYS) < count:
        _PIN_KEYS.extend(map(str, range(len(_PIN_KEYS), count)))
    return _PIN_KEYS[:count]


def cores_short(free, threads, needed):
    """Whether the whole cores ``free``, ``threads`` threads in all, cannot give a tenant ``needed``
    threads: the one case in which ``choose_cores`` finds none (whatever the cores' sizes, any
    ``needed`` up to ``threads`` is found, see there)."""
    return threads < needed or not free


def choose_cores(free, needed):
    """The cores of ``free`` a tenant of ``needed`` threads takes, or None (``cores_short``): the
    fewest in order that give them; with cores of one and of two online threads (SMT threads
    offline) an odd tenant's last thread on a one-thread core where there is one, then two-thread
    cores, so no thread is left idle that another tenant could use (what placement_counts counts)."""
    sizes = set(map(len, free))
    if len(sizes) > 1 and sizes <= {1, 2}:
        if cores_short(free, sum(map(len, free)), needed):
            return None
        # enough threads: an odd count's one-thread core, then pairs while both are there, then the
        # one-thread cores; a thread still wanted means the ones ran out first, and a pair is left
        ones = [core for core in free if len(core) == 1]
        twos = [core for core in free if len(core) == 2]
        chosen = []
        if needed % 2 and ones:
            chosen.append(ones.pop(0))
            needed -= 1
        pairs = min(needed // 2, len(twos))
        chosen += twos[:pairs]
        needed -= 2 * pairs
        singles = min(needed, len(ones))
        chosen += ones[:singles]
        needed -= singles
        if needed > 0:
            chosen.append(twos[pairs])
        return sorted(chosen)
    running = list(accumulate(map(len, free)))
    if cores_short(free, running[-1] if running else 0, needed):
        return None
    return free[:bisect_left(running, needed) + 1]


class State:
    """What is taken, and by whom; per node what is still free (kept up to date by ``take``)."""

    def __init__(self, host, reserved):
        self.host = host
        self.cpu_owner = {}
        self.gpu_owner = {}
        self.vf_owner = {}
        self.hugepages_used = dict((node, {}) for node in host.nodes)
        self.memory_used = dict((node, 0) for node in host.nodes)
        # whole cores with no thread taken or reserved, and free unreserved threads, in core order
        self.free_cores, self.free_threads = {}, {}
        for node in host.nodes:
            cores = host.node_cores[node]
            # most nodes hold no reserved CPU: one look at all their threads says so
            if not reserved.isdisjoint(chain.from_iterable(cores)):
                self.free_cores[node] = list(filter(reserved.isdisjoint, cores))
                self.free_threads[node] = list(filterfalse(reserved.__contains__, chain.from_iterable(cores)))
            else:
                self.free_cores[node] = list(cores)
                self.free_threads[node] = list(chain.from_iterable(cores))
        self.free_gpus = dict((node, list(addrs)) for node, addrs in host.node_gpus.items())
        self.free_vfs = dict((node, list(vfs)) for node, vfs in host.node_vfs.items())
        # what the allocation has checked since the last take: per node, what its candidates found
        # (Allocation._candidate), and why tenants fit nowhere (Allocation._place)
        self.checks = {}

    def copy(self):
        other = State.__new__(State)
        other.host = self.host
        other.cpu_owner = dict(self.cpu_owner)
        other.gpu_owner = dict(self.gpu_owner)
        other.vf_owner = dict(self.vf_owner)
        other.hugepages_used = dict((node, dict(used)) for node, used in self.hugepages_used.items())
        other.memory_used = dict(self.memory_used)
        for name in ("free_cores", "free_threads", "free_gpus", "free_vfs"):
            setattr(other, name, dict((node, list(items)) for node, items in getattr(self, name).items()))
        other.checks = {}
        return other

    def take(self, name, placement):
        self.checks = {}
        host = self.host
        cpus = set(placement["cpus"])
        self.cpu_owner.update(dict.fromkeys(cpus, name))
        for node in set(map(host.cpu_node.get, cpus)):
            if node in self.free_cores:
                self.free_cores[node] = list(filter(cpus.isdisjoint, self.free_cores[node]))
                self.free_threads[node] = list(filterfalse(cpus.__contains__, self.free_threads[node]))
        for gpu in placement["gpus"]:
            self.gpu_owner[gpu] = name
            node = host.gpu_node.get(gpu)
            self.free_gpus[node] = [addr for addr in self.free_gpus[node] if addr != gpu]
        for vf in placement["vfs"]:
            self.vf_owner[vf] = name
            node = host.vf_node.get(vf)
            self.free_vfs[node] = [addr for addr in self.free_vfs[node] if addr != vf]
        pages = placement.get("hugepages")
        if placement.get("cells"):
            # a tenant spanning nodes: each cell's memory from its own node
            for cell in placement["cells"]:
                if pages:
                    used = self.hugepages_used.setdefault(cell["node"], {})
                    used[pages["size"]] = used.get(pages["size"], 0) + cell["hugepages"]
                else:
                    self.memory_used[cell["node"]] = self.memory_used.get(cell["node"], 0) + cell["memory_kib"] // 1024
        elif pages:
            used = self.hugepages_used.setdefault(pages["node"], {})
            used[pages["size"]] = used.get(pages["size"], 0) + pages["count"]
        elif placement.get("numa_node") is not None:
            node = placement["numa_node"]
            self.memory_used[node] = self.memory_used.get(node, 0) + placement["memory_mb"]


class Allocation:
    """The Planner's allocation on one node (a mixin: it needs ``policy``, ``host``, ``reserved``,
    ``reserved_memory_mb``, ``threshold``, ``first_fit``, ``whole_cores``, ``host_notes`` (a dict:
    what a reason says of the host alone, said once per host index), ``_needed_pages`` and, for NVSwitch
    boards, placement/partitions.py's ``_partitioned``, ``_partition_gpus`` and ``board``)."""

    def _free_cores(self, state, node, prefer=()):
        """Whole cores of ``node`` with no thread taken or reserved, preferred ones first."""
        free = list(state.free_cores[node])
        if prefer:
            free.sort(key=lambda core: (not any(cpu in prefer for cpu in core), core))
        return free

    def _alloc_cpus(self, state, node, tenant, prefer=(), build=True):
        """-> (vcpu CPUs, emulator CPUs, held CPUs) or a shortage string (without ``build``:
        None when they are there)."""
        vcpus = tenant["vcpus"]
        extra = 1 if tenant["emulator"] == "isolate" else 0
        needed = vcpus + extra
        if self.whole_cores:
            free = state.free_cores[node]
            # whether they are there is the count's alone (cores_short): the cores are chosen only to build
            count = sum(map(len, free))
            if cores_short(free, count, needed):
                return "CPUs short on node %d: %d free in whole cores, %d needed (%d vCPUs%s)" % (
                    node, count, needed, vcpus, " + 1 emulator" if extra else "")
            if not build:
                return None
            threads = list(chain.from_iterable(choose_cores(self._free_cores(state, node, prefer) if prefer else free, needed)))
        else:
            free = state.free_threads[node]
            if len(free) < needed:
                return "CPUs short on node %d: %d free, %d needed (%d vCPUs%s)" % (
                    node, len(free), needed, vcpus, " + 1 emulator" if extra else "")
            if not build:
                return None
            # sibling threads next to each other, so a tenant fills cores before spreading
            if prefer:
                free = sorted(free, key=lambda cpu: (cpu not in prefer, self.host.core_of[cpu], cpu))
            threads = free[:needed]
        held = threads
        pins = threads[:vcpus]
        if tenant["emulator"] == "isolate":
            emulator = [threads[vcpus]]
        elif tenant["emulator"] == "vcpus":
            emulator = sorted(pins)
        else:
            local = sorted(cpu for cpu in self.reserved if self.host.cpu_node.get(cpu) == node)
            emulator = local or sorted(self.reserved)
        return pins, emulator, sorted(held)

    def _allowed(self, node, local_only):
        return [node] if local_only else self.host.nodes + [None]

    def _vf_allowed(self, tenant, node, local_only):
        """The nodes ``tenant`` on ``node`` may take VFs from: ``node``, under numa
        required_vf_socket every node of its socket (its own first), else as ``_allowed``."""
        if local_only and tenant.get("numa") == VF_SOCKET:
            return self.host.socket_nodes(node)
        return self._allowed(node, local_only)

    def _pick_gpus(self, state, tenant, allowed_nodes, node, near_vfs, build=True):
        """GPUs for ``tenant``: explicit ones if free, else the best ``count`` free ones
        (without ``build``: any ``count`` of them; with ``near_vfs``: nearest the free VFs of
        ``allowed_nodes`` first)."""
        if tenant["gpu_addresses"] is not None:
            taken = [addr for addr in tenant["gpu_addresses"] if addr in state.gpu_owner]
            if taken:
                return "GPU %s already given to %s" % (", ".join(taken), ", ".join(sorted(set(state.gpu_owner[a] for a in taken))))
            off = [addr for addr in tenant["gpu_addresses"] if self.host.gpu_node.get(addr) not in allowed_nodes]
            if off:
                return "GPU %s not on node %d" % (", ".join(off), node)
            return list(tenant["gpu_addresses"])
        count = tenant["gpu_count"]
        if not count:
            return []
        free = [addr for n in allowed_nodes for addr in state.free_gpus.get(n, ())]
        grouped = self.host.units and any(addr in self.host.units for addr in free)
        if len(free) < count or (grouped and pick_units(free, count, self.host.units) is None):
            on_node = self.host.node_gpus[node]
            held = sorted(set(state.gpu_owner[a] for a in on_node if a in state.gpu_owner))
            return "GPUs short on node %d: %d free of %d, %d needed%s%s%s" % (
                node, len(state.free_gpus[node]), len(on_node), count, " (held by %s)" % ", ".join(held) if held else "",
                " in whole IOMMU groups" if len(free) >= count else "", self._left_out_note(node, self.host.gpu_node_all))
        candidate_vfs = [vf for n in allowed_nodes for vf in state.free_vfs.get(n, ())] if near_vfs and build else []

        def key(addr):
            local = self.host.gpu_node.get(addr) != node
            if self.first_fit or self.policy["pcie_affinity"] == "ignore" or not candidate_vfs:
                return (local, 0, addr)
            return (local, min(map(self.host.rank_row(addr).__getitem__, candidate_vfs)), addr)
        if self._partitioned():
            # an NVSwitch board: one Fabric Manager partition's GPUs (placement/partitions.py)
            return self._partition_gpus(state, free, count, key)
        if not build:
            return free[:count]
        if len(free) == 1:
            return free  # the one there is (its group was checked above)
        if grouped:
            return pick_units(sorted(free, key=key), count, self.host.units)
        return sorted(free, key=key)[:count]

    def _left_out_note(self, node, node_of):
        """The devices of ``node`` (``node_of``: device -> node) that their IOMMU groups keep out."""
        out = sorted(a for a in self.host.left_out if node_of.get(a) == node) if self.host.left_out else ()
        return "; left out for their IOMMU groups: %s" % ", ".join(out) if out else ""

    def _pick_vfs(self, state, tenant, allowed_nodes, node, gpus, build=True):
        count = tenant["vf_count"]
        if not count:
            return []
        free = [vf for n in allowed_nodes for vf in state.free_vfs.get(n, ())]
        use_affinity = gpus and not self.first_fit and self.policy["pcie_affinity"] != "ignore"
        if use_affinity and self.policy["pcie_affinity"] == "require":
            free = list(compress(free, map(self.threshold.__ge__, self.host.nearest_ranks(gpus, free))))
        grouped = self.host.units and any(vf in self.host.units for vf in free)
        if grouped and len(free) >= count and pick_units(free, count, self.host.units) is None:
            return "VFs short on node %d: %d free, not %d in whole IOMMU groups" % (node, len(free), count)
        if len(free) < count:
            on_node = self.host.node_vfs[node]
            if use_affinity and self.policy["pcie_affinity"] == "require":
                return "VFs short on node %d: %d free within %s of GPU %s, %d needed (pcie_affinity: require)" % (
                    node, len(free), self.policy["pcie_affinity_level"], ", ".join(gpus), count)
            if len(allowed_nodes) > 1 and None not in allowed_nodes:
                return "VFs short on socket %s (nodes %s, numa: %s): %d free, %d needed" % (
                    self.host.socket.get(node), ",".join(map(str, allowed_nodes)), VF_SOCKET, len(free), count)
            if not on_node:
                return self._no_vf_note(node, count)
            held = sorted(set(state.vf_owner[v] for v in on_node if v in state.vf_owner))
            return "VFs short on node %d: %d free of %d, %d needed%s%s" % (
                node, len(state.free_vfs[node]), len(on_node), count, " (held by %s)" % ", ".join(held) if held else "",
                self._left_out_note(node, self.host.vf_node))
        if not build:
            return free[:count]
        order = self.host.vf_order
        rank_of = dict(zip(free, self.host.nearest_ranks(gpus, free))) if use_affinity else {}
        if not gpus and self.policy["pcie_affinity"] == "require" and state.free_gpus.get(node) and not self.first_fit:
            # a tenant without GPUs leaves the VFs near the node's GPUs to the tenants that need them near
            rank_of = dict((vf, rank <= self.threshold) for vf, rank in zip(free, self.host.nearest_ranks(state.free_gpus[node], free)))

        # the tenant's node first, then the other nodes of its socket, then the other sockets;
        # among them the nearest to its GPUs
        node_level = self.host.node_level

        def key(vf):
            return (node_level(node, self.host.vf_node.get(vf)), rank_of.get(vf, 0), order[vf])
        if grouped:
            return pick_units(sorted(free, key=key), count, self.host.units)
        return sorted(free, key=key)[:count]

    def _no_vf_note(self, node, count):
        """Why a node with no VF in the pool gives a tenant none, and the fix: no SR-IOV capable PF
        on it (on an SNC/NPS host, its socket's NICs sitting on other nodes), or PFs without VFs.
        Read of the host only: said once per host index for each node and count."""
        key = ("no VF", node, count)
        note = self.host_notes.get(key)
        if note is None:
            note = self.host_notes[key] = self._no_vf_said(node, count)
        return note

    def _no_vf_said(self, node, count):
        host = self.host
        pfs = host.sriov_pfs.get(node) or []
        if pfs:
            several = len(pfs) > 1
            return ("VFs short on node %d: %d needed, none in the pool: its SR-IOV PF%s %s give%s none (create the VFs: "
                    "gpuvirt_sriov_pfs, or list the PF in policy.vf_pfs)"
                    % (node, count, "s" if several else "", ", ".join(pfs), "" if several else "s"))
        mates = [other for other in host.socket_nodes(node)[1:] if host.node_vfs.get(other)]
        where = ("; the VFs of its socket %s are on node %s: numa: %s gives a tenant VFs of another node of its socket, "
                 "its GPUs, vCPUs and memory staying on node %d" % (host.socket.get(node), ",".join(map(str, mates)), VF_SOCKET, node)
                 if mates else "")
        return "VFs short on node %d: %d needed, the node has no VF-capable PF (no SR-IOV NIC on it)%s" % (node, count, where)

    def _pool_mb(self, node):
        return sum(SIZES_KB[s] * n // 1024 for s, n in self.host.hugepages.get(node, {}).items())

    def _memory_free(self, state, node, size):
        """What ``node`` has free for a tenant: hugepages of ``size``, or without one MiB outside the pools."""
        if size:
            return self.host.hugepages.get(node, {}).get(size, 0) - state.hugepages_used.get(node, {}).get(size, 0)
        return self.host.memory_mb.get(node, 0) - self._pool_mb(node) - self.reserved_memory_mb - state.memory_used.get(node, 0)

    def _memory_check(self, state, node, tenant):
        size = tenant["hugepage_size"]
        free = self._memory_free(state, node, size)
        if size:
            needed = self._needed_pages(tenant)
            if free < needed:
                return "hugepages %s short on node %d: %d free of %d, %d needed for %d MiB" % (
                    size, node, free, self.host.hugepages.get(node, {}).get(size, 0), needed, tenant["memory_mb"])
            return None
        if free < tenant["memory_mb"]:
            return "memory short on node %d: %d MiB free outside the hugepage pools, %d MiB needed" % (
                node, free, tenant["memory_mb"])
        return None

    # ------------------------------------------------------------------ the placement record
    def _record(self, tenant, node, gpus, vfs, pins, emulator, held, kept=False, resized_from=None):
        """The one shape of a tenant's placement (see ``plan_tenants``); ``pins`` lists the
        host CPU of vCPU 0, 1, ..."""
        host = self.host
        local = all(map(eq, map(host.gpu_node.get, gpus), repeat(node))) and all(map(eq, map(host.vf_node.get, vfs), repeat(node)))
        worst = self._worst_rank(gpus, vfs)
        size = tenant["hugepage_size"]
        return {
            "name": tenant["name"],
            "numa_node": node,
            "numa_nodes": [node],
            # the guest NUMA cells of a tenant spanning nodes (placement_spread); None on one node
            "cells": None,
            "gpus": list(gpus),
            "vfs": list(vfs),
            "network_vfs": [vf for vf in vfs if host.vf_network.get(vf)],
            "vf_pfs": dict(zip(vfs, map(host.vf_pf.get, vfs))),
            "companions": sorted(set(chain.from_iterable(host.companions.get(a, ()) for a in chain(gpus, vfs)))) if host.companions else [],
            "vcpu_pins": dict(zip(pin_keys(len(pins)), pins)),
            "emulator_cpus": list(emulator),
            "cpus": sorted(held),
            "hugepages": {"size": size, "size_kb": SIZES_KB[size], "count": self._needed_pages(tenant), "node": node} if size else None,
            "memory_mb": tenant["memory_mb"],
            "local": local,
            "pcie_affinity": LEVELS[worst] if worst is not None and worst < len(LEVELS) else None,
            "kept": kept,
            "resized_from": resized_from,
            "vcpus": tenant["vcpus"],
            "max_vcpus": tenant["max_vcpus"],
            "priority": tenant["priority"],
            "mac": tenant.get("mac"),
            "vlan": tenant.get("vlan"),
        }

    def _worst_rank(self, gpus, vfs):
        """The farthest of the tenant's VFs from its nearest GPU; None without both."""
        if not gpus or not vfs:
            return None
        return max(self.host.nearest_ranks(gpus, vfs))

    def _asks(self, tenant, local_only):
        """The keys of what a candidate of ``tenant`` asks a node's checks (State.checks): why a tenant
        of its shape is short there (what a shortage says reads nothing else of the tenant, nor
        ``prefer``), its memory, its CPUs, its count of GPUs and of VFs (from the nodes its numa
        allows, ``_vf_allowed``). The same on every node: made once for a walk over the nodes."""
        numa, size, memory_mb, vcpus = tenant.get("numa"), tenant["hugepage_size"], tenant["memory_mb"], tenant["vcpus"]
        emulator, gpu_count, vf_count = tenant["emulator"], tenant["gpu_count"], tenant["vf_count"]
        return (("short", local_only, numa, size, memory_mb, vcpus, emulator, gpu_count, vf_count), ("memory", size, memory_mb),
                ("cpus", vcpus, emulator), ("gpus", local_only, gpu_count), ("vfs", local_only, numa, vf_count))

    def _candidate(self, state, tenant, node, local_only, prefer, scored=True, devices=None, asks=None):
        """Place ``tenant`` with CPUs and memory on ``node`` (with the GPUs and VFs of ``devices``
        when given); -> (placement, score or None without ``scored``) or shortage. ``asks``: the
        tenant's ``_asks`` for ``local_only``, where the caller made them."""
        shortages = []
        # what is only checked, not chosen, is the same for every tenant that asks as much until
        # the state changes (State.take): asked once per node and amount, and so is why a tenant of
        # this shape does not fit on this node
        checks = state.checks.get(node)
        if checks is None:
            checks = state.checks[node] = {}
        shape, memory_key, cpus_key, gpus_key, vfs_key = asks or self._asks(tenant, local_only)
        explicit = tenant["gpu_addresses"]
        if devices is None and explicit is None:
            short = checks.get(shape)
            if short is not None:
                return short
        else:
            shape = None
        reason = checks.get(memory_key, False)
        if reason is False:
            reason = checks[memory_key] = self._memory_check(state, node, tenant)
        if reason:
            shortages.append(reason)
        # once short, the rest is only counted, for the reason (which GPUs matters to a VF
        # shortage only under pcie_affinity require); the CPUs are chosen once all is there
        cpus = checks.get(cpus_key, False)
        if cpus is False:
            cpus = checks[cpus_key] = self._alloc_cpus(state, node, tenant, build=False)
        if cpus is not None:
            shortages.append(cpus)
        require = self.policy["pcie_affinity"] == "require"
        nearest = not shortages or require
        if devices is not None and self._partitioned() and devices[0] and self.board.partition_of(devices[0]) is None:
            devices = None  # a switch's GPUs that are no NVSwitch partition: picked below, as one
        if devices is not None:
            gpus, vfs = devices
        else:
            # a shortage of GPUs (or of VFs, pcie_affinity other than require) says the same whichever
            # GPUs (VFs) would be picked: kept for every later candidate on this node, picked or only counted
            if explicit is None:
                gpus = checks.get(gpus_key)
                if gpus is not None and nearest and not (gpus.__class__ is str and not self._partitioned()):
                    gpus = None
            else:
                gpus_key = gpus = None
            if gpus is None:
                gpus = self._pick_gpus(state, tenant, self._allowed(node, local_only), node, bool(tenant["vf_count"]) and nearest, build=nearest)
                if gpus_key is not None and (not nearest or gpus.__class__ is str and not self._partitioned()):
                    checks[gpus_key] = gpus
            if gpus.__class__ is str:
                shortages.append(gpus)
                near = []
            else:
                near = gpus if nearest else []
            counted = shortages and not near
            vfs = checks.get(vfs_key)
            if vfs is not None and not counted and not (vfs.__class__ is str and not require):
                vfs = None
            if vfs is None:
                vfs = self._pick_vfs(state, tenant, self._vf_allowed(tenant, node, local_only), node, near, build=not shortages)
                if counted or vfs.__class__ is str and not require:
                    checks[vfs_key] = vfs
        if vfs.__class__ is str:
            shortages.append(vfs)
        if shortages:
            short = ", ".join(shortages)
            if shape is not None:
                checks[shape] = short
            return short
        pins, emulator, held = self._alloc_cpus(state, node, tenant, prefer.get("cpus", ()))
        placement = self._record(tenant, node, gpus, vfs, pins, emulator, held)
        if not scored:
            score = None
        elif self.first_fit:
            score = (node,)
        else:
            worst = self._worst_rank(gpus, vfs)
            rank = 0 if self.policy["pcie_affinity"] == "ignore" or worst is None else worst
            free_gpus = len(state.free_gpus[node]) - len(gpus)
            free_vfs = len(state.free_vfs[node]) - len(vfs)
            free_cores = len(state.free_cores[node]) - len(set(map(self.host.core_of.__getitem__, held)))
            sticky = 0 if prefer.get("node") in (None, node) else 1
            score = (not placement["local"], sticky, rank, free_gpus, free_vfs, free_cores, node)
        return placement, score

    def _place(self, state, tenant, prefer=None):
        """Best placement for ``tenant`` given ``state``, or the reason it does not fit."""
        prefer = prefer or {}
        numa = tenant.get("numa", self.policy["numa"])
        # a split without guest cells only under numa preferred; spread tenants span nodes with
        # cells instead (placement_spread), once no node holds them whole
        modes = [True, False] if numa == "preferred" else [True]
        if tenant["gpu_addresses"] is not None and numa != "preferred":
            nodes = sorted(set(self.host.gpu_node.get(a) for a in tenant["gpu_addresses"]), key=lambda n: (n is None, n))
            if len(nodes) > 1:
                return None, "gpus %s sit on different NUMA nodes (%s) and numa is %s" % (
                    ", ".join(tenant["gpu_addresses"]), ", ".join(str(n) for n in nodes), numa)
        # a tenant that fits nowhere has the reasons of one of its shape that fitted nowhere before
        # it, the state unchanged (State.checks): its candidates are asked once per state and shape
        shape = None
        if not prefer and tenant["gpu_addresses"] is None:
            shape = ("nowhere", numa, tenant["hugepage_size"], tenant["memory_mb"], tenant["vcpus"], tenant["emulator"],
                     tenant["gpu_count"], tenant["vf_count"])
            why = state.checks.get(shape)
            if why is not None:
                return None, "no NUMA node can hold tenant %s (numa: %s): %s" % (tenant["name"], numa, why)
        reasons = []
        for local_only in modes:
            best = None
            asks = self._asks(tenant, local_only)
            for node in self.host.nodes:
                result = self._candidate(state, tenant, node, local_only, prefer, asks=asks)
                if result.__class__ is str:
                    if local_only:
                        reasons.append(result)
                    continue
                if best is None or result[1] < best[1]:
                    best = result
                    if self.first_fit:
                        break
            if best is not None:
                return best[0], None
        why = ("; ".join(reasons) if reasons else "no NUMA node has online CPUs") + self._nodeless_note(tenant, numa)
        if shape is not None:
            state.checks[shape] = why
        return None, "no NUMA node can hold tenant %s (numa: %s): %s" % (tenant["name"], numa, why)

    def _nodeless_note(self, tenant, numa):
        """What a node's shortage does not say: the pool's devices of the tenant's kinds that report no
        NUMA node (sysfs numa_node -1 on a host of several nodes), which only a split placement takes.
        Read of the host only: said once per host index for each kind of tenant."""
        if numa == "preferred":
            return ""
        key = ("nodeless", bool(tenant["gpu_count"]), bool(tenant["vf_count"]))
        note = self.host_notes.get(key)
        if note is None:
            note = self.host_notes[key] = self._nodeless_said(*key[1:])
        return note

    def _nodeless_said(self, with_gpus, with_vfs):
        gpus = self.host.node_gpus.get(None) or [] if with_gpus else []
        vfs = self.host.node_vfs.get(None) or [] if with_vfs else []
        if not gpus and not vfs:
            return ""
        named = (["GPU%s %s" % ("s" if len(gpus) > 1 else "", ", ".join(gpus))] if gpus else []) + (
            ["%d VF%s of %s" % (len(vfs), "s" if len(vfs) > 1 else "", ", ".join(sorted(set(map(self.host.vf_pf.get, vfs)))))]
            if vfs else [])
        return ("; %s report no NUMA node (sysfs numa_node -1), so no node counts them: give the tenant numa: preferred "
                "(placed split, they are usable), or have the firmware/BIOS report the PCIe roots' NUMA node (ACPI _PXM)"
                % " and ".join(named))
