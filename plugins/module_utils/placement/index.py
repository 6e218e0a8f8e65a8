# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's index of the host model (placement/planner.py): what ``topology.read_topology`` reads
(docs/CONTRACTS.md), indexed once per host model for the questions the planner asks (placement/index_cache.py). Per NUMA node its
CPUs, whole cores, GPUs, VFs, memory and hugepage pools; per CPU its node and core; per GPU and VF
its node, PF and IOMMU group (the devices of one group go to one tenant or to none, with the
group's companions: a card's audio or USB function); the PCIe distance ranks of GPUs to VFs,
worked out as they are asked for. Pure: no I/O.
"""

from __future__ import absolute_import, division, print_function

from itertools import chain, compress, repeat
from operator import contains, eq, itemgetter, lt

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import affinity
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import DANGLING_GROUP, GROUP_FIX, dangling_group, group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address

__metaclass__ = type

# nvidia-smi topo -m's levels (vocabulary/affinity.py) with SOCKET between NODE and SYS: two NUMA
# nodes of one CPU package (Sub-NUMA Clustering, NPS2/4), which topo -m prints as SYS like two sockets
LEVELS = affinity.LEVELS[:-1] + ("SOCKET",) + affinity.LEVELS[-1:]
UNKNOWN_RANK = len(LEVELS)
NODE_RANK = LEVELS.index("NODE")
SOCKET_RANK = LEVELS.index("SOCKET")
SYS_RANK = LEVELS.index("SYS")

# PCI base classes of the functions a GPU or VF takes along to its tenant when they share its
# IOMMU group: multimedia (a card's HDMI/DP audio) and serial bus (its USB-C controller, UCSI).
# Any other function (a NIC, a storage controller, another display device) stays with the host
# and keeps the group's GPUs and VFs out of the plan.
COMPANION_CLASSES = (0x04, 0x0C)


def lone_node(topology):
    """The node of a host with one NUMA node, else None. There a PCI device that reports no node
    (sysfs numa_node -1: firmware without _PXM, a kernel built without NUMA) can only sit on it;
    on a host of several its node is unknown."""
    nodes = (topology or {}).get("numa_nodes") or []
    return node_of(nodes[0].get("id")) if len(nodes) == 1 else None


def node_of(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


_RANK_OF = dict((level, rank) for rank, level in enumerate(LEVELS))


def _level_rank(level):
    rank = _RANK_OF.get(level)
    if rank is None:
        rank = _RANK_OF.get(str(level).upper(), UNKNOWN_RANK) if level is not None else UNKNOWN_RANK
    return rank


def level_rank(level):
    """0 for PIX .. 5 for SYS (``LEVELS``); UNKNOWN_RANK for a level it does not know."""
    return _level_rank(level)


def node_sockets(cpus, node_cpus, package=None):
    """node -> the CPU package (socket) of its CPUs, as sysfs ``cpuN/topology/physical_package_id``
    gives it (the topology reader's ``package_id``); None for a node without CPUs (memory only) or
    whose CPUs name no package or more than one. ``package``: CPU id -> its package, where the
    caller has read it already."""
    if package is None:
        package = {cpu.get("id"): cpu.get("package_id") for cpu in cpus or () if isinstance(cpu, dict)}
    out = {}
    for node, ids in node_cpus.items():
        # an offline CPU shows no topology directory: it names no package
        found = set(map(package.get, ids))
        found.discard(None)
        socket = found.pop() if len(found) == 1 else None
        out[node] = socket if isinstance(socket, int) and not isinstance(socket, bool) and socket >= 0 else None
    return out


class HostIndex:
    """The parts of the host model the planner needs, indexed once per plan: per node its
    cores, GPUs and VFs; per CPU its node and core; GPU/VF ranks as they are asked for."""

    def __init__(self, topology, gpu_pool=None, vf_pfs=None, host_devices=None):
        if not isinstance(topology, dict):
            raise InputError("topology: expected the dict returned by gpuvirt.tenancy.host_topology_info (topology), got %s"
                             % type(topology).__name__)
        nodes = topology.get("numa_nodes") or []
        if not nodes:
            raise InputError("topology: numa_nodes is empty; pass the topology read by gpuvirt.tenancy.host_topology_info")
        self.nodes = sorted(int(node["id"]) for node in nodes)
        self.distance = node_distances(nodes, self.nodes)
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

        # CPUs: online CPUs per node, and each CPU's physical core (its sibling set)
        listed_cpus = topology.get("cpus") or []
        plain = _plain_cpus(listed_cpus, self.nodes)
        package = None
        if plain is not None and set(map(type, listed_cpus)) == {dict}:
            # the usual shape, every CPU a dict naming its package: read in one pass, each id once
            try:
                package = dict(zip(plain[0], map(itemgetter("package_id"), listed_cpus)))
            except KeyError:
                package = None
        # each node's socket (CPU package): on SNC/NPS hosts several nodes share one
        self.socket = node_sockets(listed_cpus, node_cpus, package)
        if plain is None:
            self._read_cpus(listed_cpus, node_cpus)
        else:
            self.cpu_node, self.core_of, self.node_cpus, self.node_cores = plain
            self.online = set(self.core_of)
            self._node_listed_cpus(node_cpus, set(self.online))

        pci = topology.get("pci_devices") or {}
        only = lone_node(topology)
        # GPUs
        self.gpu_node = {}
        for gpu in topology.get("gpus") or []:
            node = node_of(gpu.get("numa_node"))
            self.gpu_node[gpu["address"]] = only if node is None else node
        if gpu_pool is not None:
            pool = list(gpu_pool)
            unknown = [addr for addr in pool if addr not in self.gpu_node]
            if unknown:
                raise InputError("policy.gpus: %s not GPUs of this host (known: %s); list GPU PCI addresses from the topology"
                                 % (", ".join(unknown), ", ".join(sorted(self.gpu_node)) or "none"))
            self.gpu_node = dict((addr, self.gpu_node[addr]) for addr in pool)
        self.gpus = sorted(self.gpu_node)

        # VFs: the virtfns of the PFs (optionally only the listed PFs), in PF then VF-index order.
        pfs = sorted(addr for addr, dev in pci.items() if dev.get("virtfns"))
        if vf_pfs is not None:
            wanted = list(vf_pfs)
            unknown = [addr for addr in wanted if addr not in pci or not pci[addr].get("virtfns")]
            if unknown:
                raise InputError("policy.vf_pfs: %s has no VFs in the topology (PFs with VFs: %s); create the VFs first "
                                 "(gpuvirt_sriov_pfs) or fix the address" % (", ".join(unknown), ", ".join(pfs) or "none"))
            pfs = wanted
        self.vf_node = {}
        self.vf_pf = {}
        self.vfs = []
        self.vf_network = {}
        # per PF its VFs (a rank row fills those of one PF and node at once: _RankRow)
        self.pf_vfs = {}
        for pf in pfs:
            pf_dev = pci[pf]
            self.pf_vfs[pf] = virtfns = pf_dev.get("virtfns") or []
            for vf in virtfns:
                dev = pci.get(vf) or {}
                node = dev.get("numa_node")
                if type(node) is not int or node < 0:  # pylint: disable=unidiomatic-typecheck
                    node = node_of(node)
                    if node is None:
                        node = node_of(pf_dev.get("numa_node"))
                    if node is None:
                        node = only
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
        # what the planner's reasons say of the host alone (placement/allocation.py: a node without
        # VFs, the devices without a NUMA node), filled in as they are asked, the same for every plan
        # (strings only): said once per index, so once per host model where the index is kept
        self.notes = {}
        # per GPU set (or node) and rank, the pool's VFs nearer than it (placement/locality.py), filled
        # in as asked, the same for every plan; read only
        self.nearer_vfs = {}
        # per node the SR-IOV capable PFs on it (sysfs sriov_totalvfs above 0), VFs made or not
        self.sriov_pfs = dict((node, []) for node in self.nodes)
        for address, dev in sorted(pci.items()):
            if (dev.get("sriov_totalvfs") or dev.get("virtfns")) and not dev.get("physfn"):
                node = node_of(dev.get("numa_node"))
                self.sriov_pfs.setdefault(only if node is None else node, []).append(address)

    def same_socket(self, first, second):
        """Whether NUMA nodes ``first`` and ``second`` (not the same) are on one socket (False
        when either socket is unknown)."""
        socket = self.socket.get(first)
        return socket is not None and socket == self.socket.get(second)

    def node_level(self, first, second):
        """The rank of node ``second`` seen from node ``first``: NODE (the same), SOCKET (another
        node of its socket), SYS (another socket), UNKNOWN_RANK (a node not known)."""
        if first is None or second is None:
            return UNKNOWN_RANK
        if first == second:
            return NODE_RANK
        return SOCKET_RANK if self.same_socket(first, second) else SYS_RANK

    def socket_nodes(self, node):
        """The nodes of ``node``'s socket, itself first (only itself where its socket is unknown)."""
        socket = self.socket.get(node)
        if socket is None:
            return [node]
        return [node] + [other for other in self.nodes if other != node and self.socket.get(other) == socket]

    def _node_listed_cpus(self, node_cpus, known):
        """The CPUs the nodes list that the CPU list does not place, on their node; ``cpu_bound``
        past every CPU number ``known`` or listed (CPU numbers in inputs are checked against it
        before a range is expanded)."""
        for node_id, ids in node_cpus.items():
            known.update(ids)
            for cpu_id in set(ids).difference(self.cpu_node):
                self.cpu_node[cpu_id] = node_id
        self.cpu_bound = max(known) + 1 if known else 1

    def _read_cpus(self, listed_cpus, node_cpus):
        """The CPUs of any shape (_plain_cpus reads the usual one at once): ``cpu_node``,
        ``core_of``, ``online``, ``cpu_bound``, ``node_cpus`` and ``node_cores``. Field by field
        over the CPU dicts, in comprehensions and C-level maps rather than one loop."""
        ids = [cpu_id if type(cpu_id) is int else int(cpu_id)  # pylint: disable=unidiomatic-typecheck
               for cpu_id in map(itemgetter("id"), listed_cpus)]
        known = set(ids)
        # from here on the online ones
        cpus = listed_cpus
        up = [cpu.get("online", True) is not False for cpu in cpus]
        if False in up:
            ids, cpus = list(compress(ids, up)), list(compress(cpus, up))
        online = set(ids)
        # numa_node: an int >= 0 as it is (most hosts), else as node_of reads it (None: unknown)
        nodes_read = [cpu.get("numa_node") for cpu in cpus]
        if nodes_read and (set(map(type, nodes_read)) != {int} or min(nodes_read) < 0):
            nodes_read = list(map(node_of, nodes_read))
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
        cpu_node = self.cpu_node
        if not listed_cpus:
            # no CPU list: the nodes' own lists, one thread per core, all online
            for ids in node_cpus.values():
                online.update(ids)
                self.core_of.update((cpu_id, (cpu_id,)) for cpu_id in ids)
        self._node_listed_cpus(node_cpus, known)
        self.online = online
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
            if dangling_group(topology, address) is not None:
                # who shares the group cannot be known: vfio_bind refuses it, the planner leaves it out
                kind = "GPU" if address in self.gpu_node else "VF"
                self.left_out[address] = "%s %s left out: %s" % (kind, address, DANGLING_GROUP % (group, address))
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
            if not self.units:
                # every device its own group (most hosts)
                self.group_sizes[kind] = ([1] if pool_list else [], True)
                continue
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


def _plain_cpus(cpus, nodes):
    """The CPUs in the shape read_topology gives them on most hosts, read in one pass: every CPU
    online, its id and NUMA node (one of ``nodes``) ints, its siblings one thread (itself) or two in
    order, listed alike by both, on its node. -> (cpu_node, core_of, node_cpus, node_cores), or
    None for any other shape (HostIndex._read_cpus reads it)."""
    try:
        fields = list(map(itemgetter("id", "numa_node", "siblings", "online"), cpus))
    except (KeyError, TypeError):
        return None
    if not fields:
        return None
    ids, nodes_read, siblings, up = zip(*fields)
    if (set(up) != {True} or set(map(type, ids)) != {int} or set(map(type, nodes_read)) != {int}
            or not set(nodes_read).issubset(nodes) or set(map(type, siblings)) != {list}):
        return None
    cpu_node = dict(zip(ids, nodes_read))
    if len(cpu_node) != len(ids):
        return None
    keys = list(map(tuple, siblings))
    core_of = dict(zip(ids, keys))
    core = core_of.get
    node_cpus = dict((node, []) for node in nodes)
    node_cores = dict((node, []) for node in nodes)
    # each core once (not each thread): its threads ints in order, each of them a CPU that lists
    # this core, on one node. A thread of two cores, or a CPU its siblings leave out, leaves fewer
    # threads in the cores than CPUs
    threads = 0
    for threads_of in dict.fromkeys(keys):
        if len(threads_of) == 2:
            first, second = threads_of
            if (type(first) is not int or type(second) is not int  # pylint: disable=unidiomatic-typecheck
                    or not first < second or core(first) != threads_of or core(second) != threads_of
                    or cpu_node[first] != cpu_node[second]):
                return None
            threads += 2
        elif len(threads_of) != 1 or core(threads_of[0]) != threads_of:
            return None
        else:
            threads += 1
        node = cpu_node[threads_of[0]]
        node_cores[node].append(threads_of)
        node_cpus[node].extend(threads_of)
    if threads != len(ids):
        return None
    for node in nodes:
        node_cores[node].sort()
        node_cpus[node].sort()
    return cpu_node, core_of, node_cpus, node_cores


class _RankRow(dict):
    """One GPU's PCIe ranks to VFs (HostIndex.rank_row): a plain lookup once a rank is known, so the
    planner's many nearest-pair questions cost no call each."""

    # the index's maps, not the index: a row the index holds refers to no cycle back to it, so a
    # plan's index is freed when the plan ends, not left to the garbage collector
    __slots__ = ("gpu_node", "vf_pf", "vf_node", "levels", "socket", "pf_vfs")

    def __init__(self, host, gpu):
        dict.__init__(self)
        self.gpu_node, self.vf_pf, self.vf_node = host.gpu_node.get(gpu), host.vf_pf, host.vf_node
        self.socket = host.socket
        self.pf_vfs = host.pf_vfs
        # the GPU's row of the affinity matrix: VF or PF -> level
        self.levels = host.affinity.get(gpu) or {}

    def __missing__(self, vf):
        levels = self.levels
        vf_node = self.vf_node.get(vf)
        kin = ()
        if vf in levels:
            rank = _level_rank(levels[vf])
        else:
            pf = self.vf_pf.get(vf)
            # the rank read below is the same for every VF of this PF on this node that the
            # affinity matrix does not name itself: those are filled with it now
            kin = self.pf_vfs.get(pf, ())
            if pf in levels:
                rank = _level_rank(levels[pf])
            else:
                gpu_node = self.gpu_node
                rank = SYS_RANK if gpu_node is not None and vf_node is not None and gpu_node != vf_node else UNKNOWN_RANK
        if rank == SYS_RANK:
            # across NUMA nodes: SOCKET when both nodes are on one CPU package
            socket = self.socket.get(self.gpu_node)
            if vf_node != self.gpu_node and socket is not None and socket == self.socket.get(vf_node):
                rank = SOCKET_RANK
        if len(kin) > 1:
            nodes = self.vf_node
            for other in kin:
                if other not in levels and nodes.get(other) == vf_node:
                    self[other] = rank
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


def node_distances(nodes, ids):
    """(node, node) -> the host's NUMA distance (sysfs ``nodeN/distance``: one number per node,
    in node order, as the topology reader reads it); where a node lists none, or not one per
    node, the kernel's defaults: 10 to itself, 20 to any other (LOCAL_DISTANCE and
    REMOTE_DISTANCE, include/linux/topology.h)."""
    listed = dict((int(node["id"]), list(node.get("distances") or [])) for node in nodes)
    out = {}
    for first in ids:
        row = listed.get(first) or []
        for position, second in enumerate(ids):
            if len(row) == len(ids):
                out[(first, second)] = int(row[position])
            else:
                out[(first, second)] = 10 if first == second else 20
    return out


def read_host_devices(value):
    """policy.host_devices: a list of PCI addresses, or a dict address -> why the host keeps it."""
    if not value:
        return {}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((address, None) for address in value)
    else:
        raise InputError("policy.host_devices: expected a list of PCI addresses or a dict address -> reason, got %r" % (value,))
    out = {}
    for address, why in items:
        normal = normalize_address(str(address))
        if normal is None:
            raise InputError("policy.host_devices: %r is not a PCI address (use the form 0000:82:00.0)" % (address,))
        out[normal] = str(why) if why else "the host needs it"
    return out
