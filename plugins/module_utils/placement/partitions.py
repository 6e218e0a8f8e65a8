# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's rule for HGX boards with NVSwitches (vocabulary/nvswitch.py): a tenant's GPUs are
exactly one Fabric Manager partition's GPUs (the Shared NVSwitch virtualization model gives a
tenant NVLink only so), 1, 2, 4 or 8 of them on the HGX H100/H200 board and on one HGX A100
baseboard; each placement says its partition.

A mixin of the Planner (it needs ``host``, ``policy`` and ``board``: ``board_of`` the host), then
``_partition_refusal`` for a tenant no partition fits, ``_partition_gpus`` where the planner picks
GPUs, ``_partition_report`` on the plan. The pick is best fit: of the free partitions of the size
asked, the one whose enclosing partitions have the fewest GPUs free (as a buddy allocator keeps
its free blocks whole). The board's partitions nest (each size divides the next and each
partition lies in one of the next size), so a set of tenants of 1, 2, 4 and 8 GPUs fits a board
whose GPUs are free exactly when their sum does: the planner's counts stay exact when the 1-, 2-
and 4-GPU partitions lie within one NUMA node, as on the HGX H100 board (GPU modules 1-4 on one
socket, 5-8 on the other). One HGX A100 baseboard's partitions nest the same way; two baseboards'
do not (their 8-GPU partitions cross them), and the board refuses them. Pure.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.nvswitch import WHERE_MODULES, read_board

__metaclass__ = type


def board_of(topology, gpu_modules):
    """The host's NVSwitch board (vocabulary/nvswitch.py ``read_board``), or None without NVSwitches."""
    # every GPU of the board, those policy.gpus leaves to the host too: its partitions hold them
    gpus = set(gpu.get("address") for gpu in topology.get("gpus") or ())
    return read_board(topology.get("pci_devices"), gpus, gpu_modules)


class Partitions:
    """The Planner's NVSwitch partitions (a mixin)."""

    board = None

    def _partition_refusal(self, tenant):
        """Why ``tenant`` (the planner's dict) can have no partition of this board; None when it can
        (or the host has no NVSwitch)."""
        board = self.board
        if board is None:
            return None
        explicit = tenant["gpu_addresses"]
        count = len(explicit) if explicit is not None else tenant["gpu_count"]
        if count == 0 or (count == 1 and explicit is None):
            return None
        what = "the %s board (NVSwitch %s)" % (board.name, ", ".join(board.switches))
        if board.table is None:
            if count == 1:
                return None  # a GPU alone needs no NVLink partner; its partition is reported unknown
            return ("tenant %s asks for %d GPUs: on %s a tenant's GPUs reach each other only as one Fabric Manager partition, and "
                    "this board's partitions are not known to the collection; ask for 1 GPU" % (tenant["name"], count, what))
        sizes = ", ".join(map(str, board.sizes()))
        if count not in board.sizes():
            return ("tenant %s asks for %d GPUs: on %s a tenant's GPUs are exactly one Fabric Manager partition's, of %s GPUs; "
                    "ask for one of those counts" % (tenant["name"], count, what, sizes))
        if not board.partitions:
            if count == 1:
                return None
            return ("tenant %s asks for %d GPUs: on %s they must be one Fabric Manager partition's GPUs, which policy.gpu_modules "
                    "names; give each GPU's module ID (%s)" % (tenant["name"], count, what, WHERE_MODULES))
        if explicit is not None and count > 0 and board.partition_of(explicit) is None:
            return ("tenant %s names GPUs %s (module IDs %s), which are no Fabric Manager partition of %s; name the GPUs of one "
                    "partition (%s), or ask for a count" % (tenant["name"], ", ".join(explicit), ", ".join(map(str, board.physical_ids(explicit))),
                                                            what, "; ".join("%d: %s" % (n, ", ".join(g)) for n, g in board.partitions if len(g) == count)))
        return None

    def _partitioned(self):
        return self.board is not None and bool(self.board.partitions)

    def _partition_gpus(self, state, free, count, key):
        """The GPUs of the free partition of ``count`` GPUs (all in ``free``) to take, best fit first,
        then by ``key`` (the planner's order of GPUs); a reason when there is none."""
        free_set = set(free)
        everywhere = set(addr for addrs in state.free_gpus.values() for addr in addrs)
        options = []
        for number, gpus in self.board.partitions:
            if len(gpus) != count or not free_set.issuperset(gpus):
                continue
            around = [sum(1 for g in outer if g in everywhere) for _n, outer in self.board.partitions
                      if len(outer) > count and set(gpus) < set(outer)]
            options.append((sorted(around), sorted(map(key, gpus)), number, gpus))
        if not options:
            return ("no Fabric Manager partition of %d GPUs free (of %s)" % (count, self.board.name) + (
                "; free: %s" % ", ".join(sorted(free_set)) if free_set else ""))
        return list(min(options)[3])

    def _partition_report(self, placements):
        """Each placement's ``nvswitch_partition`` (:meth:`_partition_of` its GPUs)."""
        for placement in placements.values():
            placement["nvswitch_partition"] = self._partition_of(placement.get("gpus") or [])

    def _partition_of(self, gpus):
        """{id, gpus, physical_ids, board} of the partition ``gpus`` are, None where there is no GPU or the
        host no NVSwitch, {id: None, why} where it is not known (a placement's, and a removed tenant's in
        ``released``: the partition its GPUs held)."""
        board = self.board
        if board is None or not gpus:
            return None
        found = board.partition_of(gpus)
        if found:
            return {"id": found[0], "gpus": list(found[1]), "physical_ids": board.physical_ids(found[1]), "board": board.name}
        return {"id": None, "gpus": list(gpus), "physical_ids": board.physical_ids(gpus), "board": board.name,
                "why": "policy.gpu_modules not given: the GPUs' module IDs, and so their partition, are not known"
                if not board.partitions else "the GPUs are no partition of the board"}
