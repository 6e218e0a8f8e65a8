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

The HGX A100 board's NVSwitch (10de:1af1) is not in the table: no published listing of its
partitions was found, so a multi-GPU tenant there is refused rather than planned on a guess.

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
    known = [BOARDS[ident] for ident in ids if ident in BOARDS]
    name, table = known[0] if len(known) == 1 and len(ids) == 1 else (
        "NVSwitch %s" % ", ".join("%s:%s" % (v[2:], d[2:]) for v, d in ids), None)
    addresses = [address for address, _ident in switches]
    if not gpu_modules:
        return Board(name, addresses, table)
    if table is None:
        raise InputError("policy.gpu_modules: the partitions of this %s are not known to the collection (known boards: %s); "
                         "leave gpu_modules out" % (name, ", ".join(board for board, _table in BOARDS.values())))
    return Board(name, addresses, table, read_modules(gpu_modules, gpus, table, name))


def read_modules(value, gpus, table, name):
    """``policy.gpu_modules`` checked against the host's ``gpus`` and the board's ``table``: -> {address: module ID}."""
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
    missing = [m for m in wanted if m not in modules.values()]
    if missing:
        raise InputError("policy.gpu_modules: no GPU has module ID(s) %s; the %s board's partitions need all of %s: give every "
                         "GPU of the board, %s" % (", ".join(map(str, missing)), name, ", ".join(map(str, wanted)), WHERE_MODULES))
    return modules
