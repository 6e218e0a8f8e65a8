# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenant placement planner: which tenant gets which GPUs, VFs, host CPUs and hugepages.

Pure Python over the host model of ``topology.read_topology`` (docs/CONTRACTS.md): no I/O,
no clock, no randomness. The same inputs give the same plan.

Guarantees (tested in tests/unit/plugins/module_utils/test_placement.py):

- exclusive: no GPU, VF or host CPU is given to two tenants, hugepages per node never exceed
  the node's pool, reserved CPUs are never given; with ``smt: whole_cores`` no physical core
  is shared between two tenants or between a tenant and the host's reserved CPUs;
- the most placed: the honoured ``existing`` assignments stay as they are; of the other
  (new) tenants, as many are placed NUMA-locally as any assignment could place (then the most
  ``online`` ones, then the nearest GPU/VF pairs the nodes offer), found by a bounded search
  (placement_search.py) that starts from the best fit in list order and is never worse than it;
  ``search`` in the plan says when its budget cut it short and what is then not proven;
- stable across runs: a plan's placements given back as ``existing`` are all kept, in any
  tenant order, whatever tenants are added;
- NUMA-local first: a tenant is split over nodes (``numa: preferred``) only when no node can
  hold it whole next to the tenants placed locally;
- a tenant that cannot be placed gets a reason naming the short resource on each node;
- resize in place: a defined tenant whose vCPU count changed keeps its node, devices, emulator
  CPUs and the pins of the vCPUs it keeps; a growing one gets its extra CPUs on its own node
  after the unchanged tenants are placed, and is re-planned (alone) only when its node is full;
- released: the resources of a tenant marked absent (or no longer listed) are free for the plan;
- IOMMU groups (tests/unit/plugins/module_utils/test_placement_groups.py): the GPUs and VFs of one
  group go to one tenant or to none, with the group's other functions (``companions``: a card's
  audio or USB function); a group holding a function the host keeps leaves them out, with the
  reason (``groups.left_out``); bridges do not count. The counts of the search are exact with
  group sizes that divide each other (placement_counts.py; checked against the CP-SAT oracle).
"""

from __future__ import absolute_import, division, print_function

from bisect import bisect_left
from itertools import accumulate, chain, compress, filterfalse, repeat
from operator import contains, eq, itemgetter, lt

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import affinity
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_name import check_domain_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.hugepage_sizes import SIZES_KB, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.iommu_groups import group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.mac_address import duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.pci_address import normalize_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement_counts import search_nodes, switch_devices
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_request import (
    check_firmware, check_machine, check_size, check_tenant_mac, check_tenant_vlan, over_host)

__metaclass__ = type

LEVELS = affinity.LEVELS
UNKNOWN_RANK = len(LEVELS)

# Search nodes the planner may visit per plan before it keeps the best assignment found.
SEARCH_BUDGET = 20000

POLICY_DEFAULTS = {
    "numa": "required",
    "reserved_cpus": [],
    "smt": "whole_cores",
    "emulator": "isolate",
    "pcie_affinity": "prefer",
    "pcie_affinity_level": "PXB",
    "hugepage_size": "2M",
    "gpus": None,
    "vf_pfs": None,
    "reserved_memory_mb": 0,
    "existing": {},
    "strategy": "best_fit",
    "search_budget": SEARCH_BUDGET,
    "host_devices": {},
}
POLICY_CHOICES = {
    "numa": ("required", "preferred"),
    "smt": ("whole_cores", "threads"),
    "emulator": ("isolate", "housekeeping", "vcpus"),
    "pcie_affinity": ("prefer", "require", "ignore"),
    "pcie_affinity_level": LEVELS,
    "strategy": ("best_fit", "first_fit"),
}
TENANT_KEYS = ("name", "gpus", "vfs", "vcpus", "max_vcpus", "memory_mb", "hugepage_size", "vlan", "mac", "state",
               "priority", "qos", "emulator", "disks", "domain_type", "start", "shutdown_timeout", "force_off")

# PCI base classes of the functions a GPU or VF takes along to its tenant when they share its
# IOMMU group: multimedia (a card's HDMI/DP audio) and serial bus (its USB-C controller, UCSI).
# Any other function (a NIC, a storage controller, another display device) stays with the host
# and keeps the group's GPUs and VFs out of the plan.
COMPANION_CLASSES = (0x04, 0x0C)
GROUP_FIX = ("enable ACS on the PCIe ports above it (BIOS: ACS/PCIe ACS enable), move the card to a slot "
             "with its own IOMMU group, or keep the device for the host (gpuvirt_host_gpus)")

# The existing assignment of a tenant that grows: checked, then given its extra CPUs once
# every tenant kept as it is holds its own (an existing tenant's growth never moves another).
_GROW_LATER = "grow later"


PRIORITIES = ("online", "batch")
TENANT_STATES = ("present", "defined", "running", "absent")

# The planner's input errors are the collection's: the runner and the filter report them alike.
PlacementInputError = InputError

# Names kept for the modules that import them from here (libvirt_domain.py); the vocabulary
# lives in cpulist.py and hugepage_sizes.py.
HUGEPAGE_SIZES = SIZES_KB
parse_cpuset = parse_cpulist
format_cpuset = format_cpulist


def hugepage_size_name(value, what="hugepage_size"):
    """'2M' / '1G' / '2048kB' / 2048 -> '2M' or '1G'; None / 'none' -> None."""
    return size_name(value, what, allow_none=True)


def _node_of(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _pinned_cpus(assignment, bound):
    """The CPUs an assignment's ``vcpu_pins`` name (a dict vCPU -> cpuset, or a list)."""
    pins = assignment.get("vcpu_pins")
    return parse_cpulist(list((pins or {}).values()) if isinstance(pins, dict) else pins, "existing vcpu_pins", bound)


_RANK_OF = dict((level, rank) for rank, level in enumerate(LEVELS))


def _level_rank(level):
    rank = _RANK_OF.get(level)
    if rank is None:
        rank = affinity.rank(str(level).upper()) if level is not None else UNKNOWN_RANK
    return rank


class HostModel:
    """The parts of the host model the planner needs, indexed once per plan: per node its
    cores, GPUs and VFs; per CPU its node and core; GPU/VF ranks as they are asked for."""

    def __init__(self, topology, gpu_pool=None, vf_pfs=None, host_devices=None):
        if not isinstance(topology, dict):
            raise PlacementInputError("topology: expected the dict returned by gpuvirt.tenancy.host_topology_info (topology), got %s"
                                      % type(topology).__name__)
        nodes = topology.get("numa_nodes") or []
        if not nodes:
            raise PlacementInputError("topology: numa_nodes is empty; pass the topology read by gpuvirt.tenancy.host_topology_info")
        self.nodes = sorted(int(node["id"]) for node in nodes)
        self.memory_mb = {}
        self.hugepages = {}
        node_cpus = {}
        size_names = {}  # each node lists the same sizes: each key read once
        for node in nodes:
            node_id = int(node["id"])
            self.memory_mb[node_id] = int(node.get("memory_mb") or 0)
            pools = {}
            for key, value in (node.get("hugepages") or {}).items():
                name = size_names.get(key, False)
                if name is False:
                    try:
                        name = size_names[key] = size_name(key, allow_none=True)
                    except InputError:
                        name = size_names[key] = None
                if name:
                    pools[name] = int((value or {}).get("total") or 0)
            self.hugepages[node_id] = pools
            node_cpus[node_id] = list(map(int, node.get("cpus") or []))

        # CPUs: online CPUs per node, and each CPU's physical core (its sibling set). Field by
        # field over the CPU dicts, in comprehensions and C-level maps rather than one loop: with
        # hundreds of CPUs this is most of the time a plan takes to index its host.
        listed_cpus = topology.get("cpus") or []
        ids = [cpu_id if type(cpu_id) is int else int(cpu_id)  # pylint: disable=unidiomatic-typecheck
               for cpu_id in map(itemgetter("id"), listed_cpus)]
        known = set(ids)
        # from here on the online ones
        cpus = listed_cpus
        up = [cpu.get("online", True) is not False for cpu in cpus]
        if False in up:
            ids, cpus = list(compress(ids, up)), list(compress(cpus, up))
        online = set(ids)
        # numa_node: an int >= 0 as it is (most hosts), else as _node_of reads it (None: unknown)
        nodes_read = [cpu.get("numa_node") for cpu in cpus]
        if nodes_read and (set(map(type, nodes_read)) != {int} or min(nodes_read) < 0):
            nodes_read = list(map(_node_of, nodes_read))
        if None in nodes_read:
            self.cpu_node = dict(pair for pair in zip(ids, nodes_read) if pair[1] is not None)
        else:
            self.cpu_node = dict(zip(ids, nodes_read))
        # siblings list one core for all its threads: each distinct list is sorted once
        siblings = [cpu.get("siblings") for cpu in cpus]
        if all(siblings):
            keys = list(map(tuple, siblings))
        else:
            keys = [tuple(listed) if listed else (cpu_id,) for cpu_id, listed in zip(ids, siblings)]
        cores = dict.fromkeys(keys)
        if set(map(type, chain.from_iterable(cores))) <= {int}:
            sizes = set(map(len, cores))
            if sizes == {1} or (sizes == {2} and all(map(lt, map(itemgetter(0), cores), map(itemgetter(1), cores)))):
                # one thread each, or two in order (no SMT, SMT-2): sorted already, checked in one pass
                cores = dict(zip(cores, cores))
            else:
                cores = {key: tuple(sorted(set(key))) for key in cores}
        else:
            cores = {key: tuple(sorted(set(map(int, key)))) for key in cores}
        core_list = list(map(cores.__getitem__, keys))
        self.core_of = dict(zip(ids, core_list))
        if not all(map(contains, core_list, ids)):
            # a CPU its siblings leave out belongs to that core all the same
            for cpu_id, core in zip(ids, core_list):
                self.core_of[cpu_id] = core if cpu_id in core else tuple(sorted(set(core) | {cpu_id}))
        cpu_node, core_of = self.cpu_node, self.core_of
        for node_id, ids in node_cpus.items():
            known.update(ids)
            if not listed_cpus:
                online.update(ids)
                core_of.update((cpu_id, (cpu_id,)) for cpu_id in ids)
            for cpu_id in set(ids).difference(cpu_node):
                cpu_node[cpu_id] = node_id
        self.online = online
        # CPU numbers in inputs are checked against this before a range is expanded
        self.cpu_bound = max(known) + 1 if known else 1
        # a core keeps only its online threads
        # (every core is one of cores, or one of them with an online CPU added)
        if not online.issuperset(chain.from_iterable(cores.values())):
            for cpu_id, core in self.core_of.items():
                self.core_of[cpu_id] = tuple(c for c in core if c in online)
        # the nodes' own CPU lists, when they list every online CPU on its node; else CPU by CPU
        listed = dict((node, sorted(set(filter(online.__contains__, node_cpus.get(node, ()))))) for node in self.nodes)
        if sum(map(len, listed.values())) == len(online) and all(
                all(map(eq, map(cpu_node.get, ids), repeat(node))) for node, ids in listed.items()):
            self.node_cpus = listed
        else:
            in_order = sorted(online)
            owners = list(map(cpu_node.get, in_order))
            self.node_cpus = dict((node, list(compress(in_order, map(eq, owners, repeat(node))))) for node in self.nodes)
        self.node_cores = dict((node, sorted(set(map(self.core_of.__getitem__, self.node_cpus[node])))) for node in self.nodes)

        pci = topology.get("pci_devices") or {}
        # GPUs
        self.gpu_node = {}
        for gpu in topology.get("gpus") or []:
            self.gpu_node[gpu["address"]] = _node_of(gpu.get("numa_node"))
        if gpu_pool is not None:
            pool = list(gpu_pool)
            unknown = [addr for addr in pool if addr not in self.gpu_node]
            if unknown:
                raise PlacementInputError("policy.gpus: %s not GPUs of this host (known: %s); list GPU PCI addresses from the topology"
                                          % (", ".join(unknown), ", ".join(sorted(self.gpu_node)) or "none"))
            self.gpu_node = dict((addr, self.gpu_node[addr]) for addr in pool)
        self.gpus = sorted(self.gpu_node)

        # VFs: the virtfns of the PFs (optionally only the listed PFs), in PF then VF-index order.
        pfs = sorted(addr for addr, dev in pci.items() if dev.get("virtfns"))
        if vf_pfs is not None:
            wanted = list(vf_pfs)
            unknown = [addr for addr in wanted if addr not in pci or not pci[addr].get("virtfns")]
            if unknown:
                raise PlacementInputError("policy.vf_pfs: %s has no VFs in the topology (PFs with VFs: %s); create the VFs first "
                                          "(gpuvirt_sriov_pfs) or fix the address" % (", ".join(unknown), ", ".join(pfs) or "none"))
            pfs = wanted
        self.vf_node = {}
        self.vf_pf = {}
        self.vfs = []
        self.vf_network = {}
        for pf in pfs:
            pf_dev = pci[pf]
            for vf in pf_dev.get("virtfns") or []:
                dev = pci.get(vf) or {}
                node = dev.get("numa_node")
                if type(node) is not int or node < 0:  # pylint: disable=unidiomatic-typecheck
                    node = _node_of(node)
                    if node is None:
                        node = _node_of(pf_dev.get("numa_node"))
                self.vf_node[vf] = node
                self.vf_pf[vf] = pf
                self.vf_network[vf] = str(dev.get("class") or pf_dev.get("class") or "").lower().startswith("0x02")
                self.vfs.append(vf)
        self._groups(topology, pci, host_devices or {})
        self.vf_order = dict((vf, index) for index, vf in enumerate(self.vfs))
        # per node (None: devices of unknown node, usable only by a split placement)
        self.node_gpus = dict((node, []) for node in self.nodes + [None])
        for addr in self.gpus:
            self.node_gpus.setdefault(self.gpu_node[addr], []).append(addr)
        self.node_vfs = dict((node, []) for node in self.nodes + [None])
        for vf in self.vfs:
            self.node_vfs.setdefault(self.vf_node[vf], []).append(vf)
        self.affinity = topology.get("gpu_nic_affinity") or {}
        self._rank_rows = {}

    def _groups(self, topology, pci, host_devices):
        """The IOMMU groups of the GPUs and VFs of the pools: the devices of one group go to one
        tenant or to none. Sets ``units`` (device -> the pool devices of its group, for groups
        of more than one), ``companions`` (device -> the other functions of its group that go
        along with it), ``left_out`` (device -> why its group keeps it out of the plan; such
        devices are taken out of the pools) and ``groups`` (device -> its group number)."""
        self.units, self.companions, self.left_out, self.groups = {}, {}, {}, {}
        self.gpu_node_all = self.gpu_node
        pool = set(self.gpu_node).union(self.vfs)
        host_gpus = set(g["address"] for g in topology.get("gpus") or []) - set(self.gpu_node)
        done = set()
        for address in sorted(pool):
            group = (pci.get(address) or {}).get("iommu_group")
            if group is None or group in done:
                continue
            done.add(group)
            members = sorted([address] + group_endpoints(topology, address))
            placed = [m for m in members if m in pool]
            for member in placed:
                self.groups[member] = group
            blockers, companions = [], []
            if any(m in self.gpu_node for m in placed) and any(m not in self.gpu_node for m in placed):
                blockers.append("GPUs and VFs together (%s)" % ", ".join(placed))
            for other in members:
                if other in pool:
                    continue
                why = _kept_by_host(other, pci.get(other) or {}, host_devices, host_gpus)
                if why:
                    blockers.append("%s (%s)" % (other, why))
                else:
                    companions.append(other)
            if blockers:
                for member in placed:
                    kind = "GPU" if member in self.gpu_node else "VF"
                    self.left_out[member] = ("%s %s left out: its IOMMU group %s also holds %s, and a group goes to one tenant "
                                             "or to none; %s" % (kind, member, group, "; ".join(blockers), GROUP_FIX))
                continue
            if len(placed) > 1:
                for member in placed:
                    self.units[member] = tuple(placed)
            if companions:
                for member in placed:
                    self.companions[member] = tuple(companions)
        if self.left_out:
            self.gpu_node_all = dict(self.gpu_node)
            for address in self.left_out:
                self.gpu_node.pop(address, None)
            self.gpus = sorted(self.gpu_node)
            self.vfs = [vf for vf in self.vfs if vf not in self.left_out]
        # per pool, the sizes of its groups (ascending) and whether each divides the next: then the
        # counts of devices in groups up to each size make the search's counts exact (placement_counts)
        self.unit_size = dict((address, len(unit)) for address, unit in self.units.items())
        self.group_sizes = {}
        for kind, pool_list, node_of in (("gpus", self.gpus, self.gpu_node), ("vfs", self.vfs, self.vf_node)):
            sizes = sorted(set(self.unit_size.get(address, 1) for address in pool_list))
            one_node = all(len(set(map(node_of.get, self.units[address]))) == 1 for address in pool_list if address in self.units)
            self.group_sizes[kind] = (sizes, one_node and all(larger % smaller == 0 for smaller, larger in zip(sizes, sizes[1:])))

    def rank_row(self, gpu):
        """The PCIe distance ranks of one GPU to the VFs (through their PFs), 0 PIX .. 4 SYS,
        5 unknown: ``row[vf]``, each worked out when first asked for."""
        row = self._rank_rows.get(gpu)
        if row is None:
            row = self._rank_rows[gpu] = _RankRow(self, gpu)
        return row

    def nearest_ranks(self, gpus, vfs):
        """Per VF of ``vfs`` (in order), its rank to the nearest of ``gpus`` (at least one)."""
        if len(gpus) == 1:
            return list(map(self.rank_row(gpus[0]).__getitem__, vfs))
        return list(map(min, *[map(self.rank_row(gpu).__getitem__, vfs) for gpu in gpus]))


class _RankRow(dict):
    """One GPU's PCIe ranks to VFs (HostModel.rank_row): a plain lookup once a rank is known, so the
    planner's many nearest-pair questions cost no call each."""

    __slots__ = ("host", "gpu", "levels")

    def __init__(self, host, gpu):
        dict.__init__(self)
        self.host, self.gpu = host, gpu
        # the GPU's row of the affinity matrix: VF or PF -> level
        self.levels = host.affinity.get(gpu) or {}

    def __missing__(self, vf):
        host, levels = self.host, self.levels
        if vf in levels:
            rank = _level_rank(levels[vf])
        else:
            pf = host.vf_pf.get(vf)
            if pf in levels:
                rank = _level_rank(levels[pf])
            else:
                gpu_node, vf_node = host.gpu_node.get(self.gpu), host.vf_node.get(vf)
                rank = affinity.rank("SYS") if gpu_node is not None and vf_node is not None and gpu_node != vf_node else UNKNOWN_RANK
        self[vf] = rank
        return rank


def _kept_by_host(address, device, host_devices, host_gpus):
    """Why the host keeps a function that shares a pool device's IOMMU group (it cannot go along
    to the tenant), or None when it goes along."""
    if address in host_devices:
        return host_devices[address] or "the host needs it"
    if address in host_gpus:
        return "a GPU that stays with the host: not in the tenant GPU pool (gpuvirt_gpus)"
    if device.get("physfn"):
        return "a VF that is not in the VF pool"
    if device.get("virtfns") or device.get("sriov_totalvfs"):
        return "an SR-IOV PF the host keeps"
    try:
        base = int(str(device.get("class")), 16) >> 16
    except ValueError:
        return "a function of unknown class"
    if base not in COMPANION_CLASSES:
        return "class %s%s, not a function given along with a GPU" % (
            device.get("class"), ", driver %s" % device["driver"] if device.get("driver") else "")
    return None


def _host_devices(value):
    """policy.host_devices: a list of PCI addresses, or a dict address -> why the host keeps it."""
    if not value:
        return {}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((address, None) for address in value)
    else:
        raise PlacementInputError("policy.host_devices: expected a list of PCI addresses or a dict address -> reason, got %r" % (value,))
    out = {}
    for address, why in items:
        normal = normalize_address(str(address))
        if normal is None:
            raise PlacementInputError("policy.host_devices: %r is not a PCI address (use the form 0000:82:00.0)" % (address,))
        out[normal] = str(why) if why else "the host needs it"
    return out


def _pick_units(ordered, count, units):
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
    if not fill(0, count):
        return None
    return [address for unit in chosen for address in unit]


def _choose_cores(free, needed):
    """The cores of ``free`` a tenant of ``needed`` threads takes, or None: the fewest in order
    that give them; with cores of one and of two online threads (SMT threads offline) an odd
    tenant's last thread on a one-thread core where there is one, then two-thread cores, so no
    thread is left idle that another tenant could use (what placement_counts counts)."""
    sizes = set(map(len, free))
    if len(sizes) > 1 and sizes <= {1, 2}:
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
        if needed > 0 and len(twos) > pairs:
            chosen.append(twos[pairs])
            needed -= 2
        return sorted(chosen) if needed <= 0 else None
    running = list(accumulate(map(len, free)))
    if not running or running[-1] < needed:
        return None
    return free[:bisect_left(running, needed) + 1]


class _State:
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

    def copy(self):
        other = _State.__new__(_State)
        other.host = self.host
        other.cpu_owner = dict(self.cpu_owner)
        other.gpu_owner = dict(self.gpu_owner)
        other.vf_owner = dict(self.vf_owner)
        other.hugepages_used = dict((node, dict(used)) for node, used in self.hugepages_used.items())
        other.memory_used = dict(self.memory_used)
        for name in ("free_cores", "free_threads", "free_gpus", "free_vfs"):
            setattr(other, name, dict((node, list(items)) for node, items in getattr(self, name).items()))
        return other

    def take(self, name, placement):
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
        if pages:
            used = self.hugepages_used.setdefault(pages["node"], {})
            used[pages["size"]] = used.get(pages["size"], 0) + pages["count"]
        elif placement.get("numa_node") is not None:
            node = placement["numa_node"]
            self.memory_used[node] = self.memory_used.get(node, 0) + placement["memory_mb"]


class Planner:
    """Plans tenants on one host. ``plan()`` returns the plan dict (see ``plan_tenants``)."""

    def __init__(self, topology, policy=None):
        policy = dict(policy or {})
        unknown = sorted(set(policy) - set(POLICY_DEFAULTS))
        if unknown:
            raise PlacementInputError("policy: unknown key(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(POLICY_DEFAULTS))))
        merged = dict(POLICY_DEFAULTS)
        merged.update(dict((k, v) for k, v in policy.items() if v is not None or k in ("gpus", "vf_pfs")))
        for key, choices in POLICY_CHOICES.items():
            value = merged[key]
            if key == "pcie_affinity_level":
                value = str(value).upper()
                merged[key] = value
            if value not in choices:
                raise PlacementInputError("policy.%s: %r is not one of %s" % (key, value, ", ".join(choices)))
        merged["hugepage_size"] = hugepage_size_name(merged["hugepage_size"], "policy.hugepage_size")
        self.policy = merged
        self.host = HostModel(topology, merged["gpus"], merged["vf_pfs"], _host_devices(merged["host_devices"]))
        reserved = parse_cpulist(merged["reserved_cpus"], "policy.reserved_cpus", self.host.cpu_bound)
        outside = [cpu for cpu in reserved if cpu not in self.host.cpu_node]
        if outside:
            raise PlacementInputError("policy.reserved_cpus: CPU(s) %s do not exist on this host (CPUs %s)"
                                      % (format_cpulist(outside), format_cpulist(self.host.cpu_node)))
        self.reserved = set(reserved)
        try:
            self.reserved_memory_mb = int(merged["reserved_memory_mb"])
            self.budget = int(merged["search_budget"])
        except (TypeError, ValueError):
            raise PlacementInputError("policy.reserved_memory_mb and policy.search_budget must be whole numbers (%r, %r)"
                                      % (merged["reserved_memory_mb"], merged["search_budget"]))
        # what bounds one tenant's size: the host's online CPUs and its memory
        self.limits = {"cpus": len(self.host.online) or None, "memory_mb": sum(self.host.memory_mb.values()) or None}
        self.threshold = affinity.rank(merged["pcie_affinity_level"])
        self.first_fit = merged["strategy"] == "first_fit"
        self.whole_cores = merged["smt"] == "whole_cores"
        if not isinstance(merged["existing"] or {}, dict):
            raise PlacementInputError("policy.existing: expected a dict tenant name -> assignment (a previous plan's placements)")

    def _tenant(self, raw, index):
        if not isinstance(raw, dict):
            raise PlacementInputError("tenants[%d]: expected a dict with name, vcpus, memory_mb, ... got %r" % (index, raw))
        name = raw.get("name")
        if not name or not isinstance(name, str):
            raise PlacementInputError("tenants[%d]: name is required (a string, the libvirt domain name)" % index)
        check_domain_name(name, "tenants[%d].name" % index)
        where = "tenants[%d] (%s)" % (index, name)
        if str(raw.get("state") or "present") == "absent":
            # a tenant that leaves needs only its name: what it held is read from its domain
            return {"name": name, "state": "absent"}

        def count(key, default, minimum):
            value = raw.get(key, default)
            if value is None:
                value = default
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise PlacementInputError("%s: %s must be a whole number, got %r" % (where, key, value))
            try:
                value = int(value)
            except ValueError:
                raise PlacementInputError("%s: %s must be a whole number, got %r" % (where, key, value)) from None
            if value < minimum:
                raise PlacementInputError("%s: %s must be at least %d, got %d" % (where, key, minimum, value))
            return value

        tenant = dict(raw)
        tenant["name"] = name
        gpus = raw.get("gpus", 0)
        if isinstance(gpus, (list, tuple)):
            grouped = self._explicit_groups(gpus)
            if grouped:
                return {"name": name, "state": raw.get("state"), "refused": grouped}
            unknown = [addr for addr in gpus if addr not in self.host.gpu_node]
            if unknown:
                raise PlacementInputError("%s: gpus %s are not GPUs this host gives to tenants (%s)"
                                          % (where, ", ".join(map(str, unknown)), ", ".join(self.host.gpus) or "none"))
            if len(set(gpus)) != len(gpus):
                raise PlacementInputError("%s: gpus lists an address twice" % where)
            tenant["gpu_addresses"] = list(gpus)
            tenant["gpu_count"] = len(gpus)
        else:
            tenant["gpu_addresses"] = None
            tenant["gpu_count"] = count("gpus", 0, 0)
        tenant["vf_count"] = count("vfs", 0, 0)
        # the tenant's own inputs, checked as tenant_domain checks them (tenant_request)
        prefix = where + ": "
        tenant["vcpus"], tenant["max_vcpus"], tenant["memory_mb"] = check_size(
            raw.get("vcpus"), raw.get("memory_mb"), raw.get("max_vcpus"), where=prefix)
        beyond = over_host(tenant["vcpus"], tenant["max_vcpus"], tenant["memory_mb"], self.limits)
        if beyond:
            # no node, nor all of them, can ever hold it: not placed, and the input named
            return {"name": name, "state": raw.get("state"), "refused": beyond}
        tenant["mac"] = check_tenant_mac(raw.get("mac"), prefix + "mac")
        tenant["vlan"] = check_tenant_vlan(raw.get("vlan"), prefix + "vlan")
        if raw.get("firmware") is not None:
            tenant["firmware"] = check_firmware(raw["firmware"], prefix + "firmware")
        if raw.get("machine") is not None:
            tenant["machine"] = check_machine(raw["machine"], prefix + "machine")
        priority = raw.get("priority") or "online"
        if priority not in PRIORITIES:
            raise PlacementInputError("%s: priority %r is not one of %s" % (where, priority, ", ".join(PRIORITIES)))
        tenant["priority"] = priority
        if str(raw.get("state") or "present") not in TENANT_STATES:
            raise PlacementInputError("%s: state %r is not one of %s" % (where, raw.get("state"), ", ".join(TENANT_STATES)))
        size = raw.get("hugepage_size", self.policy["hugepage_size"]) if "hugepage_size" in raw else self.policy["hugepage_size"]
        tenant["hugepage_size"] = hugepage_size_name(size, "%s: hugepage_size" % where)
        emulator = raw.get("emulator") or self.policy["emulator"]
        if emulator not in POLICY_CHOICES["emulator"]:
            raise PlacementInputError("%s: emulator %r is not one of %s" % (where, emulator, ", ".join(POLICY_CHOICES["emulator"])))
        if emulator == "housekeeping" and not self.reserved:
            raise PlacementInputError("%s: emulator housekeeping pins emulator threads on policy.reserved_cpus, which is empty; "
                                      "set reserved_cpus or use emulator isolate" % where)
        tenant["emulator"] = emulator
        return tenant

    def _explicit_groups(self, gpus):
        """Why GPUs a tenant names cannot go to it for their IOMMU groups (left out, or only part
        of a group named); None when they can."""
        host = self.host
        left = [host.left_out[a] for a in gpus if a in host.left_out]
        if left:
            return "; ".join(left)
        named = set(gpus)
        partial = sorted(set(host.units[a] for a in gpus if a in host.units and not named.issuperset(host.units[a])))
        if partial:
            return "; ".join("GPUs %s share IOMMU group %s and go to one tenant or to none: list them all, or ask for a count"
                             % (", ".join(unit), host.groups.get(unit[0])) for unit in partial)
        return None

    def _needed_pages(self, tenant):
        size = tenant["hugepage_size"]
        if not size:
            return 0
        size_kb = SIZES_KB[size]
        return -(-tenant["memory_mb"] * 1024 // size_kb)

    # ------------------------------------------------------------------ allocation on one node
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
            free = self._free_cores(state, node, prefer) if prefer and build else state.free_cores[node]
            chosen = _choose_cores(free, needed)
            if chosen is None:
                return "CPUs short on node %d: %d free in whole cores, %d needed (%d vCPUs%s)" % (
                    node, sum(map(len, free)), needed, vcpus, " + 1 emulator" if extra else "")
            if not build:
                return None
            threads = list(chain.from_iterable(chosen))
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
        if len(free) < count or (grouped and _pick_units(free, count, self.host.units) is None):
            on_node = self.host.node_gpus[node]
            held = sorted(set(state.gpu_owner[a] for a in on_node if a in state.gpu_owner))
            return "GPUs short on node %d: %d free of %d, %d needed%s%s%s" % (
                node, len(state.free_gpus[node]), len(on_node), count, " (held by %s)" % ", ".join(held) if held else "",
                " in whole IOMMU groups" if len(free) >= count else "", self._left_out_note(node, self.host.gpu_node_all))
        if not build:
            return free[:count]
        if len(free) == 1:
            return free  # the one there is (its group was checked above)
        candidate_vfs = [vf for n in allowed_nodes for vf in state.free_vfs.get(n, ())] if near_vfs else []

        def key(addr):
            local = self.host.gpu_node.get(addr) != node
            if self.first_fit or self.policy["pcie_affinity"] == "ignore" or not candidate_vfs:
                return (local, 0, addr)
            return (local, min(map(self.host.rank_row(addr).__getitem__, candidate_vfs)), addr)
        if grouped:
            return _pick_units(sorted(free, key=key), count, self.host.units)
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
        if grouped and len(free) >= count and _pick_units(free, count, self.host.units) is None:
            return "VFs short on node %d: %d free, not %d in whole IOMMU groups" % (node, len(free), count)
        if len(free) < count:
            on_node = self.host.node_vfs[node]
            held = sorted(set(state.vf_owner[v] for v in on_node if v in state.vf_owner))
            if use_affinity and self.policy["pcie_affinity"] == "require":
                return "VFs short on node %d: %d free within %s of GPU %s, %d needed (pcie_affinity: require)" % (
                    node, len(free), self.policy["pcie_affinity_level"], ", ".join(gpus), count)
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

        def key(vf):
            return (self.host.vf_node.get(vf) != node, rank_of.get(vf, 0), order[vf])
        if grouped:
            return _pick_units(sorted(free, key=key), count, self.host.units)
        return sorted(free, key=key)[:count]

    def _pool_mb(self, node):
        return sum(SIZES_KB[s] * n // 1024 for s, n in self.host.hugepages.get(node, {}).items())

    def _memory_check(self, state, node, tenant):
        size = tenant["hugepage_size"]
        if size:
            needed = self._needed_pages(tenant)
            total = self.host.hugepages.get(node, {}).get(size, 0)
            free = total - state.hugepages_used.get(node, {}).get(size, 0)
            if free < needed:
                return "hugepages %s short on node %d: %d free of %d, %d needed for %d MiB" % (
                    size, node, free, total, needed, tenant["memory_mb"])
            return None
        free = self.host.memory_mb.get(node, 0) - self._pool_mb(node) - self.reserved_memory_mb - state.memory_used.get(node, 0)
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
            "gpus": list(gpus),
            "vfs": list(vfs),
            "network_vfs": [vf for vf in vfs if host.vf_network.get(vf)],
            "vf_pfs": dict(zip(vfs, map(host.vf_pf.get, vfs))),
            "companions": sorted(set(chain.from_iterable(host.companions.get(a, ()) for a in chain(gpus, vfs)))) if host.companions else [],
            "vcpu_pins": dict(zip(map(str, range(len(pins))), pins)),
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

    def _candidate(self, state, tenant, node, local_only, prefer, scored=True, devices=None):
        """Place ``tenant`` with CPUs and memory on ``node`` (with the GPUs and VFs of ``devices``
        when given); -> (placement, score or None without ``scored``) or shortage."""
        shortages = []
        reason = self._memory_check(state, node, tenant)
        if reason:
            shortages.append(reason)
        # once short, the rest is only counted, for the reason (which GPUs matters to a VF
        # shortage only under pcie_affinity require); the CPUs are chosen once all is there
        cpus = self._alloc_cpus(state, node, tenant, prefer.get("cpus", ()), build=False)
        if cpus is not None:
            shortages.append(cpus)
        allowed = self._allowed(node, local_only)
        nearest = not shortages or self.policy["pcie_affinity"] == "require"
        if devices is not None:
            gpus, vfs = devices
        else:
            gpus = self._pick_gpus(state, tenant, allowed, node, bool(tenant["vf_count"]) and nearest, build=nearest)
            if isinstance(gpus, str):
                shortages.append(gpus)
            vfs = self._pick_vfs(state, tenant, allowed, node, gpus if isinstance(gpus, list) and nearest else [], build=not shortages)
        if isinstance(vfs, str):
            shortages.append(vfs)
        if shortages:
            return ", ".join(shortages)
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
        modes = [True] if self.policy["numa"] == "required" else [True, False]
        if tenant["gpu_addresses"] is not None and self.policy["numa"] == "required":
            nodes = sorted(set(self.host.gpu_node.get(a) for a in tenant["gpu_addresses"]), key=lambda n: (n is None, n))
            if len(nodes) > 1:
                return None, "gpus %s sit on different NUMA nodes (%s) and policy numa is required" % (
                    ", ".join(tenant["gpu_addresses"]), ", ".join(str(n) for n in nodes))
        reasons = []
        for local_only in modes:
            best = None
            for node in self.host.nodes:
                result = self._candidate(state, tenant, node, local_only, prefer)
                if isinstance(result, str):
                    if local_only:
                        reasons.append(result)
                    continue
                if best is None or result[1] < best[1]:
                    best = result
                    if self.first_fit:
                        break
            if best is not None:
                return best[0], None
        why = "; ".join(reasons) if reasons else "no NUMA node has online CPUs"
        return None, "no NUMA node can hold tenant %s (numa: %s): %s" % (tenant["name"], self.policy["numa"], why)

    def _existing(self, state, tenant, raw, grow=False):
        """Check a previous assignment still fits the request and the host; -> placement or reason.

        A changed vCPU count is a resize in place: the pins of vCPUs 0..n-1 are kept; a shrink is
        decided at once, a growth returns ``_GROW_LATER`` unless ``grow`` (then the extra CPUs come
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
        except (PlacementInputError, TypeError, ValueError) as exc:
            return None, "existing assignment unreadable: %s" % exc
        node = _node_of(raw.get("numa_node"))
        if node is None or node not in self.host.nodes:
            return None, "existing numa_node %r is not a node of this host" % (raw.get("numa_node"),)
        if not pins or sorted(pins) != list(range(len(pins))):
            return None, "existing vCPU pins %s are not vCPUs 0..n-1" % sorted(pins)
        old_count = len(pins)
        if tenant["vcpus"] > old_count and not grow:
            return None, _GROW_LATER
        pins = dict((vcpu, cpu) for vcpu, cpu in pins.items() if vcpu < tenant["vcpus"])
        if tenant["gpu_addresses"] is not None:
            if sorted(gpus) != sorted(tenant["gpu_addresses"]):
                return None, "existing GPUs %s differ from the requested %s" % (gpus, tenant["gpu_addresses"])
        elif len(gpus) != tenant["gpu_count"]:
            return None, "existing assignment has %d GPUs, the tenant asks for %d" % (len(gpus), tenant["gpu_count"])
        if len(vfs) != tenant["vf_count"]:
            return None, "existing assignment has %d VFs, the tenant asks for %d" % (len(vfs), tenant["vf_count"])
        missing = [g for g in gpus if g not in self.host.gpu_node] + [v for v in vfs if v not in self.host.vf_node]
        if missing:
            return None, "existing devices %s are not in the host's pools" % ", ".join(missing)
        left = [self.host.left_out[a] for a in chain(gpus, vfs) if a in self.host.left_out]
        if left:
            return None, "; ".join(left)
        devices = set(gpus).union(vfs)
        partial = sorted(set(self.host.units[a] for a in devices if a in self.host.units and not devices.issuperset(self.host.units[a])))
        if partial:
            return None, "existing devices hold part of an IOMMU group (%s): a group goes to one tenant or to none" % (
                "; ".join(", ".join(unit) for unit in partial))
        taken = [g for g in gpus if g in state.gpu_owner] + [v for v in vfs if v in state.vf_owner]
        if taken:
            return None, "existing devices %s are also assigned to another tenant" % ", ".join(taken)
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
            if old_size != tenant["hugepage_size"] or _node_of(old.get("node")) not in (None, node):
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
        remote = sum(1 for g in gpus if self.host.gpu_node.get(g) != node) + sum(1 for v in vfs if self.host.vf_node.get(v) != node)
        if remote and self.policy["numa"] == "required":
            return None, "existing assignment is not NUMA-local and policy numa is required"
        return self._record(tenant, node, gpus, vfs, [pins[index] for index in sorted(pins)], emulator, held, kept=True,
                            resized_from=old_count if old_count != tenant["vcpus"] else None), None

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

    # ------------------------------------------------------------------ plan
    # ------------------------------------------------------------------ plan
    def plan(self, tenants):
        if not isinstance(tenants, (list, tuple)):
            raise PlacementInputError("tenants: expected a list of tenant dicts (gpuvirt_tenants)")
        parsed = []
        names = set()
        for index, raw in enumerate(tenants):
            tenant = self._tenant(raw, index)
            if tenant["name"] in names:
                raise PlacementInputError("tenants[%d]: name %s appears twice; tenant names are domain names and must be unique"
                                          % (index, tenant["name"]))
            names.add(tenant["name"])
            parsed.append(tenant)
        _check_tenant_macs(parsed)
        refused = dict((t["name"], t["refused"]) for t in parsed if t.get("refused"))
        active = [t for t in parsed if str(t.get("state") or "present") != "absent" and not t.get("refused")]
        existing = self.policy["existing"] or {}
        state = _State(self.host, self.reserved)
        placements = {}
        notes = {}
        # 1. honour previous assignments, in tenant order; 1b. then grow the ones that grow
        growing = []
        for tenant in active:
            if tenant["name"] not in existing:
                continue
            placement, why = self._existing(state, tenant, existing[tenant["name"]])
            if why == _GROW_LATER:
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
        if self.first_fit:
            placed, unplaced = self._in_turn(state, new, prefer)
            search.update({"proven": False, "not_proven": ["strategy first_fit places each tenant in turn, without a search"],
                           "kept": "first_fit"})
        else:
            placed, unplaced, state = self._most(state, new, prefer, search)
        placements.update(placed)
        unplaced.update(refused)
        removed = sorted(name for name in existing if name not in set(t["name"] for t in active) | set(refused))
        released = dict((name, self._released(existing[name])) for name in removed)
        # the VFs given back, per PF, as gpuvirt.tenancy.sriov_vfs entries that clear their MAC and VLAN
        vf_resets = {}
        for name in removed:
            for vf, pf in sorted(released[name]["vf_pfs"].items()):
                vf_resets.setdefault(pf, []).append({"address": vf, "clear": True})
        return {"placements": dict((t["name"], placements[t["name"]]) for t in active if t["name"] in placements),
                "unplaced": unplaced, "notes": notes, "free": self._free(state), "removed": removed,
                "released": released, "vf_resets": vf_resets, "search": search, "groups": self._group_report()}

    def _group_report(self):
        """The IOMMU groups that constrain the plan: pool devices left out (with why), those that
        go to one tenant together, and the functions each takes along."""
        host = self.host
        return {"left_out": dict(sorted(host.left_out.items())),
                "shared": dict((a, list(unit)) for a, unit in sorted(host.units.items())),
                "companions": dict((a, list(c)) for a, c in sorted(host.companions.items()))}

    def _prefer(self, old):
        """A re-planned tenant's previous node and CPUs: kept where they still fit."""
        if not isinstance(old, dict):
            return {}
        try:
            cpus = set(_pinned_cpus(old, self.host.cpu_bound))
        except InputError:
            cpus = set()
        return {"node": _node_of(old.get("numa_node")), "cpus": cpus}

    @staticmethod
    def _keep(state, placements, notes, tenant, placement):
        if placement.get("resized_from"):
            notes[tenant["name"]] = "resized in place from %d to %d vCPUs on node %d" % (
                placement["resized_from"], tenant["vcpus"], placement["numa_node"])
        state.take(tenant["name"], placement)
        placements[tenant["name"]] = placement

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
        base = state
        state = base.copy()
        assignment, ways, search, gaps = search_nodes(self, state, tenants, prefer)
        exhausted = bool(search and search.exhausted)
        placements = {}
        short = []
        # explicit GPUs first: a tenant asking for a count then takes the GPUs they leave; those
        # with GPUs and VFs before the others, which take what they leave (placement_counts)
        for index in sorted(range(len(tenants)), key=lambda i: (tenants[i]["gpu_addresses"] is None,
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

    def _released(self, raw):
        """What a removed tenant's domain held, as the pools know it: its GPUs (they stay on
        vfio-pci for the next tenant) and its VFs with their PFs (whose MAC/VLAN get cleared)."""
        raw = raw if isinstance(raw, dict) else {}
        devices = [str(a).lower() for a in (raw.get("hostdevs") or list(raw.get("gpus") or []) + list(raw.get("vfs") or []))]
        vfs = [a for a in devices if a in self.host.vf_node]
        try:
            cpus = sorted(set(_pinned_cpus(raw, self.host.cpu_bound))
                          | set(parse_cpulist(raw.get("emulator_cpus"), "existing emulator_cpus", self.host.cpu_bound)) - self.reserved)
        except InputError:
            cpus = []
        return {"gpus": [a for a in devices if a in self.host.gpu_node], "vfs": vfs,
                "vf_pfs": dict((vf, self.host.vf_pf.get(vf)) for vf in vfs),
                "other_devices": [a for a in devices if a not in self.host.gpu_node and a not in self.host.vf_node],
                "cpus": cpus, "numa_node": _node_of(raw.get("numa_node")),
                "hugepages": dict(raw["hugepages"]) if isinstance(raw.get("hugepages"), dict) else raw.get("hugepages")}

    def _free(self, state):
        free = {}
        taken = self.reserved.union(state.cpu_owner)
        for node in self.host.nodes:
            free[str(node)] = {
                "cpus": list(filterfalse(taken.__contains__, self.host.node_cpus[node])),
                "gpus": list(state.free_gpus[node]),
                "vfs": list(state.free_vfs[node]),
                "hugepages": dict((size, total - state.hugepages_used.get(node, {}).get(size, 0))
                                  for size, total in sorted(self.host.hugepages.get(node, {}).items())),
            }
        return free


def _check_tenant_macs(tenants):
    """The MACs the tenants give are each one VF's: refused when two tenants give the same."""
    owners = []
    for index, tenant in enumerate(tenants):
        given = tenant.get("mac")
        for mac in [given] if isinstance(given, str) else (given or []):
            owners.append((mac, "tenants[%d] (%s)" % (index, tenant["name"])))
    for mac, whos in duplicates(owners):
        raise PlacementInputError("%s: mac %s is also the MAC of %s; a MAC belongs to one VF: give each tenant its own"
                                  % (whos[-1], mac, ", ".join(whos[:-1])))


def plan_tenants(topology, tenants, policy=None):
    """Plan ``tenants`` on the host described by ``topology`` under ``policy``.

    Returns ``{"placements": {name: {numa_node, gpus, vfs, network_vfs, vf_pfs, vcpu_pins,
    emulator_cpus, cpus, hugepages: {size, size_kb, count, node} | None, local, pcie_affinity,
    kept, resized_from, name, vcpus, max_vcpus, priority, memory_mb, mac, vlan, companions: the
    functions sharing its devices' IOMMU groups, given to it with them}},
    "unplaced": {name: reason}, "notes": {name: why an existing assignment was not kept, or how
    it was resized}, "free": {node: {cpus, gpus, vfs, hugepages}}, "removed": [names in existing
    that are no longer active tenants], "released": {removed name: {gpus, vfs, vf_pfs,
    other_devices, cpus, numa_node, hugepages}}, "vf_resets": {PF: [{address, clear: true}], the
    sriov_vfs entries clearing the MAC and VLAN of the VFs given back}, "search": {nodes, budget, exhausted: true when the
    search for the most tenants placed stopped at its budget and kept the best found, proven: no
    assignment places more (placement_counts), not_proven: [why not], kept: search, greedy or
    first_fit}, "groups":
    {left_out: {GPU or VF: why its IOMMU group keeps it out}, shared: {device: the GPUs or VFs of
    its group}, companions: {device: the functions it takes along}}}``.
    The inputs are read, never modified. Raises PlacementInputError (common.InputError) on bad input.
    """
    return Planner(topology, policy).plan(tenants)
