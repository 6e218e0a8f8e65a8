# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric Manager GPU partitions of HGX boards with NVSwitches (the Shared NVSwitch virtualization model).

In that model (NVIDIA Fabric Manager user guide, "Shared NVSwitch Virtualization Model" and "GPU
Partitions", https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html) the
NVSwitches sit in a service VM whose Fabric Manager activates one partition for each tenant before it
starts: a tenant's GPUs reach each other over NVLink only when they are exactly one partition's
GPUs. A board offers a fixed table of partitions, each a set of GPUs named by their physical ID
(the Fabric Manager API's ``physicalId``, "same value as GPU Module ID": ``nvidia-smi -q`` prints it
as the GPU's module ID). Physical IDs do not follow PCI bus order (OpenNebula's Fabric Manager probe
on an HGX host: module IDs 1-4 at buses c3, df, d1, 9d and 5-8 at 43, 61, 52, 1b), so the host model
cannot derive them from sysfs: the inventory gives them (``policy.gpu_modules``).

Boards known here (by their NVSwitch's PCI id; tests/fixtures/fabricmanager has the listings):

- 10de:22a3, the third-generation NVSwitch of the HGX H100/H200 8-GPU board: 15 partitions, one of
  8 GPUs (0), two of 4 (1, 2), four of 2 (3-6), eight of 1 (7-14), as the Fabric Manager lists them
  on such a board (josepselga/NVIDIA-FabricManager-partition-tool README, ``partitioner -o 0``;
  partitions 0-4 also in OpenNebula's ``onefabric list``).
- 10de:1af1, the second-generation NVSwitch of the DGX A100 / HGX A100 board: the guide's "Default
  GPU Partitions" table of that board ("GPU Partitions", "DGX A100 and NVIDIA HGX A100";
  tests/fixtures/fabricmanager has its rows), 35 partitions over two baseboards of 8 GPUs:
  0 (1-16), 1 (1-8), 2 (9-16), 3-6 (8 GPUs, 4 from each baseboard), 7-10 (4), 11-18 (2), 19-34
  (1, physical ID 1-16). The physical IDs follow the baseboard's NVSwitch GPIO straps: 1-8 for one
  baseboard strapped as the bottom tray, 9-16 as the top tray, and the Fabric Manager removes the
  partitions of GPUs that are not there from the list it supports, keeping the IDs. Built in: one
  baseboard (8 GPUs, module IDs 1-8 or 9-16), whose partitions nest as the H100 board's do; two
  baseboards (16 GPUs, whose 8-GPU partitions 3-6 cross the baseboards) are refused.

Pure: no I/O.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address

__metaclass__ = type

# (vendor, device) of the board's NVSwitch -> (board, ((partition ID, GPU physical IDs), ...))
BOARDS = {
    ("0x10de", "0x22a3"): ("HGX H100/H200 8-GPU", (
        (0, (1, 2, 3, 4, 5, 6, 7, 8)),
        (1, (1, 2, 3, 4)), (2, (5, 6, 7, 8)),
        (3, (1, 3)), (4, (2, 4)), (5, (5, 7)), (6, (6, 8)),
        (7, (1,)), (8, (2,)), (9, (3,)), (10, (4,)), (11, (5,)), (12, (6,)), (13, (7,)), (14, (8,)),
    )),
    ("0x10de", "0x1af1"): ("HGX A100 8-GPU", (
        (0, tuple(range(1, 17))), (1, tuple(range(1, 9))), (2, tuple(range(9, 17))),
        (3, (1, 2, 3, 4, 9, 10, 11, 12)), (4, (5, 6, 7, 8, 13, 14, 15, 16)),
        (5, (1, 2, 3, 4, 13, 14, 15, 16)), (6, (5, 6, 7, 8, 9, 10, 11, 12)),
        (7, (1, 2, 3, 4)), (8, (5, 6, 7, 8)), (9, (9, 10, 11, 12)), (10, (13, 14, 15, 16)),
        (11, (1, 2)), (12, (3, 4)), (13, (5, 6)), (14, (7, 8)),
        (15, (9, 10)), (16, (11, 12)), (17, (13, 14)), (18, (15, 16)),
    ) + tuple((18 + module, (module,)) for module in range(1, 17))),
}
# The module IDs one host's board may have, per NVSwitch, where the table spans more GPUs than one
# baseboard: the partitions of the other IDs are not on the host (the HGX A100 baseboard strapped as
# the bottom or the top tray). A board not named here has all of its table's IDs.
BASEBOARDS = {
    ("0x10de", "0x1af1"): (tuple(range(1, 9)), tuple(range(9, 17))),
}
WHERE_MODULES = ("the GPU's module ID as nvidia-smi -q prints it while the nvidia driver holds the GPU "
                 "(the Fabric Manager's physicalId)")


def nvswitches(pci_devices):
    """The NVSwitches of a host model's ``pci_devices``: sorted [(address, (vendor, device))]."""
    return sorted((address, (device.get("vendor_id"), device.get("device_id")))
                  for address, device in (pci_devices or {}).items() if pci_ids.is_nvswitch(device))


class Board:
    """An NVSwitch board's partitions over the host's GPUs: ``name``, ``switches`` (their addresses),
    ``table`` ((ID, physical IDs), ...) or None where the board's table is not known, and with the
    GPUs' module IDs, ``partitions`` [(ID, (GPU addresses, in physical ID order))]."""

    def __init__(self, name, switches, table, modules=None):
        self.name = name
        self.switches = switches
        self.table = table
        self.modules = modules or {}
        by_module = dict((module, address) for address, module in self.modules.items())
        self.partitions = [] if not self.modules or table is None else [
            (number, tuple(by_module[m] for m in members)) for number, members in table]
        self._of = dict((frozenset(gpus), (number, gpus)) for number, gpus in self.partitions)

    def sizes(self):
        """The partition sizes the board offers, ascending (() where its table is not known)."""
        return tuple(sorted(set(len(members) for _number, members in self.table or ())))

    def partition_of(self, gpus):
        """(ID, GPU addresses) of the partition whose GPUs are exactly ``gpus``; None when none is."""
        return self._of.get(frozenset(gpus))

    def physical_ids(self, gpus):
        return [self.modules[gpu] for gpu in gpus if gpu in self.modules]


def read_board(pci_devices, gpus, gpu_modules):
    """The host's NVSwitch board, or None without NVSwitches. ``gpus``: the host's GPU addresses;
    ``gpu_modules`` (``policy.gpu_modules``): a dict GPU PCI address -> module ID, or None / {}
    (the partitions are then not known). Raises InputError naming the input and the fix."""
    switches = nvswitches(pci_devices)
    if not switches:
        if gpu_modules:
            raise InputError("policy.gpu_modules: this host has no NVSwitch (an NVIDIA function of class 0x0680), so it has "
                             "no Fabric Manager partitions; leave gpu_modules out")
        return None
    ids = sorted(set(ident for _address, ident in switches))
    known = len(ids) == 1 and ids[0] in BOARDS
    name, table = BOARDS[ids[0]] if known else (
        "NVSwitch %s" % ", ".join("%s:%s" % (v[2:], d[2:]) for v, d in ids), None)
    baseboards = BASEBOARDS.get(ids[0]) if known else None
    addresses = [address for address, _ident in switches]
    if not gpu_modules:
        # the sizes a tenant may ask for: those of one baseboard where the host has its GPUs' count
        fitting = [board for board in baseboards or () if len(board) == len(gpus)]
        return Board(name, addresses, on_board(table, fitting[0]) if fitting else table)
    if table is None:
        raise InputError("policy.gpu_modules: the partitions of this %s are not known to the collection (known boards: %s); "
                         "leave gpu_modules out" % (name, ", ".join(board for board, _table in BOARDS.values())))
    modules = read_modules(gpu_modules, gpus, table, name, baseboards)
    return Board(name, addresses, on_board(table, set(modules.values())), modules)


def on_board(table, modules):
    """The partitions of ``table`` whose GPUs all have one of the ``modules`` (the Fabric Manager lists
    no partition of a GPU that is not there), their IDs kept."""
    present = set(modules)
    return tuple((number, members) for number, members in table if present.issuperset(members))


def read_modules(value, gpus, table, name, baseboards=None):
    """``policy.gpu_modules`` checked against the host's ``gpus`` and the board's ``table`` (one of the
    ``baseboards``' module IDs where given): -> {address: module ID}."""
    if not isinstance(value, dict):
        raise InputError("policy.gpu_modules: expected a dict GPU PCI address -> module ID (%s), got %r" % (WHERE_MODULES, value))
    wanted = sorted(set(m for _number, members in table for m in members))
    modules = {}
    for key, module in value.items():
        address = normalize_address(key)
        if address is None:
            raise InputError("policy.gpu_modules: %r is not a PCI address (use the form 0000:19:00.0)" % (key,))
        if address not in gpus:
            raise InputError("policy.gpu_modules: %s is not a GPU of this host (GPUs: %s)" % (address, ", ".join(sorted(gpus)) or "none"))
        if isinstance(module, bool) or not isinstance(module, int) or module not in wanted:
            raise InputError("policy.gpu_modules.%s: %r is not a module ID of the %s board (%s); give %s"
                             % (address, module, name, ", ".join(map(str, wanted)), WHERE_MODULES))
        modules[address] = module
    twice = sorted(set(m for m in modules.values() if list(modules.values()).count(m) > 1))
    if twice:
        raise InputError("policy.gpu_modules: module ID(s) %s given to more than one GPU (%s); each GPU of the board has its own"
                         % (", ".join(map(str, twice)), ", ".join(sorted(a for a, m in modules.items() if m in twice))))
    if baseboards:
        given = sorted(modules.values())
        fitting = [list(board) for board in baseboards if set(board) & set(given)]
        if len(fitting) != 1 or given != fitting[0]:
            raise InputError("policy.gpu_modules: module IDs %s are not one baseboard's; the %s board has %s (its NVSwitch GPIO "
                             "straps: the bottom or the top tray): give every GPU of the board, %s"
                             % (", ".join(map(str, given)), name, " or ".join("%d-%d" % (b[0], b[-1]) for b in baseboards),
                                WHERE_MODULES))
        return modules
    missing = [m for m in wanted if m not in modules.values()]
    if missing:
        raise InputError("policy.gpu_modules: no GPU has module ID(s) %s; the %s board's partitions need all of %s: give every "
                         "GPU of the board, %s" % (", ".join(map(str, missing)), name, ", ".join(map(str, wanted)), WHERE_MODULES))
    return modules
