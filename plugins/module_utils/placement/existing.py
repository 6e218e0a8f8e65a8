# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's previous assignments (placement/planner.py): a tenant's ``existing`` assignment (a
previous plan's placement, or what its domain holds) checked against the request and the host and
kept as it is, resized in place (a shrink at once, a growth once the unchanged tenants hold their
own), or the reason it is re-planned; a re-planned tenant's previous node and CPUs, preferred. Pure.
"""

from __future__ import absolute_import, division, print_function

from itertools import chain

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import node_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner_request import hugepage_size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import VF_SOCKET

__metaclass__ = type

# The existing assignment of a tenant that grows: checked, then given its extra CPUs once
# every tenant kept as it is holds its own (an existing tenant's growth never moves another).
GROW_LATER = "grow later"


def pinned_cpus(assignment, bound):
    """The CPUs an assignment's ``vcpu_pins`` name (a dict vCPU -> cpuset, or a list)."""
    pins = assignment.get("vcpu_pins")
    return parse_cpulist(list((pins or {}).values()) if isinstance(pins, dict) else pins, "existing vcpu_pins", bound)


class ExistingAssignments:
    """The Planner's reading of ``policy.existing`` (a mixin: it needs ``policy``, ``host``,
    ``reserved``, ``whole_cores``, ``_memory_check`` and ``_record``)."""

    def _existing(self, state, tenant, raw, grow=False):
        """Check a previous assignment still fits the request and the host; -> placement or reason.

        A changed vCPU count is a resize in place: the pins of vCPUs 0..n-1 are kept; a shrink is
        decided at once, a growth returns ``GROW_LATER`` unless ``grow`` (then the extra CPUs come
        from what is free on the node now)."""
        if not isinstance(raw, dict):
            return None, "existing assignment is not a dict"
        try:
            gpus = list(raw.get("gpus") or [])
            vfs = list(raw.get("vfs") or [])
            if "gpus" not in raw and "vfs" not in raw and raw.get("hostdevs"):
                # read back from a domain definition: split its PCI hostdevs into GPUs and VFs
                hostdevs = [str(addr).lower() for addr in raw["hostdevs"]]
                gpus = [addr for addr in hostdevs if addr in self.host.gpu_node]
                vfs = [addr for addr in hostdevs if addr in self.host.vf_node]
                along = set(chain.from_iterable(self.host.companions.get(a, ()) for a in chain(gpus, vfs)))
                other = [addr for addr in hostdevs if addr not in gpus and addr not in vfs and addr not in along]
                if other:
                    return None, "existing hostdevs %s are neither GPUs nor VFs of the pools" % ", ".join(other)
            pins_raw = raw.get("vcpu_pins") or {}
            if isinstance(pins_raw, (list, tuple)):
                pins_raw = dict(enumerate(pins_raw))
            pins = {}
            for vcpu, cpuset in pins_raw.items():
                cpus = parse_cpulist(cpuset, "existing vcpu_pins", self.host.cpu_bound)
                if len(cpus) != 1:
                    return None, "existing vCPU %s is pinned to %s, not one CPU" % (vcpu, cpuset)
                pins[int(vcpu)] = cpus[0]
            emulator = parse_cpulist(raw.get("emulator_cpus"), "existing emulator_cpus", self.host.cpu_bound)
        except (InputError, TypeError, ValueError) as exc:
            return None, "existing assignment unreadable: %s" % exc
        if isinstance(raw.get("cells"), list) and len(raw["cells"]) > 1:
            return self._existing_cells(state, tenant, raw, gpus, vfs, pins, emulator)
        node = node_of(raw.get("numa_node"))
        if node is None or node not in self.host.nodes:
            return None, "existing numa_node %r is not a node of this host" % (raw.get("numa_node"),)
        if not pins or sorted(pins) != list(range(len(pins))):
            return None, "existing vCPU pins %s are not vCPUs 0..n-1" % sorted(pins)
        old_count = len(pins)
        if tenant["vcpus"] > old_count and not grow:
            return None, GROW_LATER
        pins = dict((vcpu, cpu) for vcpu, cpu in pins.items() if vcpu < tenant["vcpus"])
        why = self._existing_devices(state, tenant, gpus, vfs)
        if why:
            return None, why
        vcpu_cpus = sorted(pins.values())
        used = set(vcpu_cpus) | (set(emulator) if tenant["emulator"] == "isolate" else set())
        if len(set(vcpu_cpus)) != len(vcpu_cpus):
            return None, "existing assignment pins two vCPUs on one CPU"
        if tenant["emulator"] == "isolate" and set(emulator) & set(vcpu_cpus):
            return None, "existing emulator CPUs overlap its vCPUs (emulator: isolate)"
        bad = sorted(cpu for cpu in used if cpu not in self.host.online or cpu in self.reserved)
        if bad:
            return None, "existing CPUs %s are offline or reserved" % format_cpulist(bad)
        held = set(used)
        if self.whole_cores:
            for cpu in used:
                held.update(self.host.core_of[cpu])
            if held & self.reserved:
                return None, "existing CPUs share a core with reserved CPUs %s" % format_cpulist(held & self.reserved)
        clash = sorted(cpu for cpu in held if cpu in state.cpu_owner)
        if clash:
            return None, "existing CPUs %s are also held by %s" % (format_cpulist(clash), ", ".join(sorted(set(state.cpu_owner[c] for c in clash))))
        old = raw.get("hugepages") or {}
        if tenant["hugepage_size"] and old:
            try:
                old_size = hugepage_size_name(old.get("size"))
            except InputError:
                old_size = None
            if old_size != tenant["hugepage_size"] or node_of(old.get("node")) not in (None, node):
                return None, "existing hugepages %s differ from the request (%s on node %d)" % (old, tenant["hugepage_size"], node)
        reason = self._memory_check(state, node, tenant)
        if reason:
            return None, "existing assignment no longer fits: %s" % reason
        extra = tenant["vcpus"] - len(pins)
        if extra > 0:
            added = self._grow_cpus(state, node, held, used, extra)
            if isinstance(added, str):
                return None, "cannot grow from %d to %d vCPUs in place: %s" % (old_count, tenant["vcpus"], added)
            for cpu in added:
                pins[len(pins)] = cpu
                held.update(self.host.core_of[cpu] if self.whole_cores else (cpu,))
        numa = tenant.get("numa", self.policy["numa"])
        # under numa required_vf_socket a VF of another node of its socket is as good as local
        vf_nodes = self.host.socket_nodes(node) if numa == VF_SOCKET else [node]
        remote = sum(1 for g in gpus if self.host.gpu_node.get(g) != node) + sum(1 for v in vfs if self.host.vf_node.get(v) not in vf_nodes)
        if remote and numa != "preferred":
            return None, "existing assignment is not NUMA-local and numa is %s" % tenant.get("numa", self.policy["numa"])
        return self._record(tenant, node, gpus, vfs, [pins[index] for index in sorted(pins)], emulator, held, kept=True,
                            resized_from=old_count if old_count != tenant["vcpus"] else None), None

    def _existing_devices(self, state, tenant, gpus, vfs):
        """Why a previous assignment's GPUs and VFs no longer serve the tenant, or None."""
        if tenant["gpu_addresses"] is not None:
            if sorted(gpus) != sorted(tenant["gpu_addresses"]):
                return "existing GPUs %s differ from the requested %s" % (gpus, tenant["gpu_addresses"])
        elif len(gpus) != tenant["gpu_count"]:
            return "existing assignment has %d GPUs, the tenant asks for %d" % (len(gpus), tenant["gpu_count"])
        if len(vfs) != tenant["vf_count"]:
            return "existing assignment has %d VFs, the tenant asks for %d" % (len(vfs), tenant["vf_count"])
        missing = [g for g in gpus if g not in self.host.gpu_node] + [v for v in vfs if v not in self.host.vf_node]
        if missing:
            return "existing devices %s are not in the host's pools" % ", ".join(missing)
        left = [self.host.left_out[a] for a in chain(gpus, vfs) if a in self.host.left_out]
        if left:
            return "; ".join(left)
        devices = set(gpus).union(vfs)
        partial = sorted(set(self.host.units[a] for a in devices if a in self.host.units and not devices.issuperset(self.host.units[a])))
        if partial:
            return "existing devices hold part of an IOMMU group (%s): a group goes to one tenant or to none" % (
                "; ".join(", ".join(unit) for unit in partial))
        taken = [g for g in gpus if g in state.gpu_owner] + [v for v in vfs if v in state.vf_owner]
        if taken:
            return "existing devices %s are also assigned to another tenant" % ", ".join(taken)
        return None

    def _existing_cells(self, state, tenant, raw, gpus, vfs, pins, emulator):
        """A previous assignment over several nodes (guest cells, placement_spread) kept as it
        is, or the reason it is re-planned (a resize among them: its split is the planner's)."""
        host = self.host
        if tenant.get("numa") != "spread":
            return None, "existing assignment spans NUMA nodes and numa is %s" % tenant.get("numa")
        if len(pins) != tenant["vcpus"] or sorted(pins) != list(range(len(pins))):
            return None, "existing assignment spans NUMA nodes with %d vCPUs, the tenant asks for %d" % (len(pins), tenant["vcpus"])
        try:
            # the vCPUs above the current count (max_vcpus, in the last cell) are not placed
            cells = [{"node": int(cell["node"]), "vcpus": [int(v) for v in cell["vcpus"] if int(v) < len(pins)],
                      "memory_kib": int(cell["memory_kib"])} for cell in raw["cells"]]
        except (KeyError, TypeError, ValueError) as exc:
            return None, "existing cells unreadable: %s" % exc
        empty = [index for index, cell in enumerate(cells) if not cell["vcpus"] or cell["memory_kib"] <= 0]
        if empty:
            # a memory-only cell (libvirt takes one; the domain code and the planner's split give
            # each cell vCPUs and memory): re-planned, not handed on to be refused
            return None, "existing cell(s) %s hold no vCPUs of the %d placed, or no memory: each cell needs both" % (
                ", ".join(map(str, empty)), len(pins))
        nodes = [cell["node"] for cell in cells]
        if len(set(nodes)) != len(nodes) or not set(nodes).issubset(host.nodes):
            return None, "existing cells' nodes %s are not distinct nodes of this host" % nodes
        if sorted(chain.from_iterable(cell["vcpus"] for cell in cells)) != list(range(len(pins))):
            return None, "existing cells do not hold vCPUs 0..%d once each" % (len(pins) - 1)
        why = self._existing_devices(state, tenant, gpus, vfs)
        if why:
            return None, why
        astray = [a for a in chain(gpus, vfs) if host.gpu_node.get(a, host.vf_node.get(a)) not in nodes]
        if astray:
            return None, "existing devices %s are on none of its cells' nodes" % ", ".join(astray)
        size = tenant["hugepage_size"]
        want_kib = self._needed_pages(tenant) * SIZES_KB[size] if size else tenant["memory_mb"] * 1024
        if sum(cell["memory_kib"] for cell in cells) != want_kib:
            return None, "existing cells hold %d KiB, the tenant asks for %d" % (sum(cell["memory_kib"] for cell in cells), want_kib)
        used = set(pins.values()) | (set(emulator) if tenant["emulator"] == "isolate" else set())
        bad = sorted(cpu for cpu in used if cpu not in host.online or cpu in self.reserved)
        if bad or len(set(pins.values())) != len(pins):
            return None, "existing CPUs %s are offline, reserved or pinned twice" % format_cpulist(bad or sorted(pins.values()))
        if tenant["emulator"] == "isolate" and (set(emulator) & set(pins.values()) or not emulator
                                                or any(host.cpu_node.get(cpu) not in nodes for cpu in emulator)):
            return None, "existing emulator CPUs %s are not apart from its vCPUs on its nodes (emulator: isolate)" % format_cpulist(emulator)
        held = set(used)
        if self.whole_cores:
            held.update(chain.from_iterable(host.core_of[cpu] for cpu in used))
            if held & self.reserved:
                return None, "existing CPUs share a core with reserved CPUs %s" % format_cpulist(held & self.reserved)
        clash = sorted(cpu for cpu in held if cpu in state.cpu_owner)
        if clash:
            return None, "existing CPUs %s are also held by %s" % (format_cpulist(clash), ", ".join(sorted(set(state.cpu_owner[c] for c in clash))))
        out = []
        for index, cell in enumerate(cells):
            node = cell["node"]
            off = [pins[v] for v in cell["vcpus"] if host.cpu_node.get(pins[v]) != node]
            if off:
                return None, "existing cell %d pins vCPUs to CPUs %s off its node %d" % (index, format_cpulist(off), node)
            pages = cell["memory_kib"] // SIZES_KB[size] if size else None
            if size and pages * SIZES_KB[size] != cell["memory_kib"]:
                return None, "existing cell %d memory is not whole %s pages" % (index, size)
            room = self._memory_free(state, node, size)
            if (pages if size else cell["memory_kib"] // 1024) > room:
                return None, "existing cell %d no longer fits node %d: %d %s free" % (index, node, room, size + " pages" if size else "MiB")
            out.append({"id": index, "node": node, "vcpus": list(cell["vcpus"]), "cpus": sorted(c for c in held if host.cpu_node.get(c) == node),
                        "memory_kib": cell["memory_kib"], "hugepages": pages,
                        "gpus": [a for a in gpus if host.gpu_node.get(a) == node], "vfs": [a for a in vfs if host.vf_node.get(a) == node]})
        placement = self._record(tenant, nodes[0], gpus, vfs, [pins[index] for index in sorted(pins)], emulator, held, kept=True)
        placement.update(numa_node=None, numa_nodes=nodes, cells=out, local=True)
        if placement["hugepages"]:
            placement["hugepages"] = dict(placement["hugepages"], node=None)
        return placement, None

    def _grow_cpus(self, state, node, held, used, extra):
        """``extra`` CPUs of ``node`` for a growing tenant: the unused threads of cores it already
        holds first, then free ones (whole free cores with ``smt: whole_cores``); -> list or shortage."""
        spare = sorted(cpu for cpu in held if cpu not in used)
        if self.whole_cores:
            free = [cpu for core in state.free_cores[node] if not held.intersection(core) for cpu in core]
        else:
            free = [cpu for cpu in state.free_threads[node] if cpu not in held]
        found = (spare + free)[:extra]
        if len(found) < extra:
            return "CPUs short on node %d: %d free, %d more needed" % (node, len(spare) + len(free), extra)
        return found

    def _prefer(self, old):
        """A re-planned tenant's previous node and CPUs: kept where they still fit."""
        if not isinstance(old, dict):
            return {}
        try:
            cpus = set(pinned_cpus(old, self.host.cpu_bound))
        except InputError:
            cpus = set()
        return {"node": node_of(old.get("numa_node")), "cpus": cpus}

    @staticmethod
    def _keep(state, placements, notes, tenant, placement):
        if placement.get("resized_from"):
            notes[tenant["name"]] = "resized in place from %d to %d vCPUs on node %d" % (
                placement["resized_from"], tenant["vcpus"], placement["numa_node"])
        state.take(tenant["name"], placement)
        placements[tenant["name"]] = placement
