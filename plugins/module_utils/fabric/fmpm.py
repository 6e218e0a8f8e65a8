# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric Manager partitions through NVIDIA's ``fmpm`` (FM Partition Manager), pure: its listing read,
the wanted partitions checked against it, and the steps decided.

What ``fmpm`` prints and does is read from its source (NVIDIA/Fabric-Manager-Client, ``fmpm.cpp`` at
58c6738d5789f9880e96466623e24d0d7c5f4303): ``fmpm -l`` prints the Fabric Manager's supported partitions
(``fmGetSupportedFabricPartitions``) as one JSON object, ``partitionInfo`` a list of
``{partitionId, isActive, numGpus, gpuInfo: [{physicalId, uuid, pciBusId, numNvLinksAvailable,
maxNumNvLinks, nvlinkLineRateMBps}]}``; ``fmpm -a ID`` and ``fmpm -d ID`` activate and deactivate a
partition (``fmActivateFabricPartition``, ``fmDeactivateFabricPartition``), print nothing on success
and ``Failed to activate partition. fmReturn: N`` with a non-zero status on failure. The Fabric
Manager refuses to activate a partition that is active or whose GPUs another active partition holds
(FM_ST_IN_USE, its user guide's "Activating a GPU Partition"); the collection says so before it asks.
"""

from __future__ import absolute_import, division, print_function

import json

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError

__metaclass__ = type

STATES = ("active", "inactive")


def parse_list(text):
    """``fmpm -l``'s output -> {partition ID: {"active": bool, "physical_ids": [sorted], "gpus": [pciBusId, ...]}}.
    Output that is not that JSON is a StateError quoting its start."""
    try:
        document = json.loads(text)
        partitions = {}
        for entry in document["partitionInfo"]:
            gpus = entry["gpuInfo"]
            partitions[int(entry["partitionId"])] = {
                "active": bool(entry["isActive"]),
                "physical_ids": sorted(int(gpu["physicalId"]) for gpu in gpus),
                "gpus": [gpu["pciBusId"] for gpu in sorted(gpus, key=lambda g: int(g["physicalId"]))],
            }
        return partitions
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError("fmpm -l printed no partition list the collection reads (%s): %r; check that the Fabric Manager runs in "
                         "the Shared NVSwitch mode (FABRIC_MODE=1) and that fmpm reaches it; nothing was changed"
                         % (exc, (text or "")[:200]))


def check_wanted(wanted):
    """The ``partitions`` option checked on its own: each ID once, and no two partitions to be active
    that share a GPU (by the physical IDs given)."""
    seen = {}
    for index, entry in enumerate(wanted):
        number = entry["id"]
        if number < 0 or number >= 64:
            raise InputError("partitions[%d].id: %d is no Fabric Manager partition ID (0-63, FM_MAX_FABRIC_PARTITIONS); give one "
                             "that fmpm -l lists" % (index, number))
        if number in seen:
            raise InputError("partitions[%d]: partition %d is also partitions[%d]; give each partition once" % (index, number, seen[number]))
        seen[number] = index
    return wanted


def _ids(values):
    return ", ".join(map(str, values))


# How a partition another one holds is freed, in fabric_partition's terms (decide's ``free``).
FREE_BY_STATE = "deactivate it first (state inactive, once its tenant is gone)"


def _label(entry, index):
    """What an error calls a wanted entry: its ``label`` (the tenants stage: the tenant), else its place in the list."""
    return entry.get("label") or "partitions[%d]" % index


def decide(listed, wanted, free=FREE_BY_STATE):
    """The steps that bring the Fabric Manager's ``listed`` partitions (parse_list) to ``wanted``
    ([{id, state, physical_ids or None, label (optional)}]): [("deactivate", ID), ..., ("activate", ID), ...],
    deactivations first. Raises InputError for a partition the Fabric Manager does not list or whose
    GPUs differ from the ones given, StateError for one whose GPUs another active partition holds
    (``free`` says how to free it); an error names the entry by its ``label`` where it has one."""
    check_wanted(wanted)
    labels = dict((entry["id"], entry.get("label")) for entry in wanted)
    for index, entry in enumerate(wanted):
        number = entry["id"]
        if number not in listed:
            raise InputError("%s: partition %d is not in the Fabric Manager's list (fmpm -l lists %s); give a partition it "
                             "lists: a GPU the Fabric Manager does not see takes its partitions out of the list; nothing was changed"
                             % (_label(entry, index), number, _ids(sorted(listed)) or "none"))
        given = entry.get("physical_ids")
        if given is not None and sorted(given) != listed[number]["physical_ids"]:
            raise InputError("%s: partition %d holds the GPUs of physical IDs %s on this board, not %s; the plan's module IDs "
                             "(policy.gpu_modules) and the Fabric Manager disagree: fix gpu_modules; nothing was changed"
                             % (_label(entry, index), number, _ids(listed[number]["physical_ids"]), _ids(sorted(given))))
    leaving = set(e["id"] for e in wanted if e["state"] == "inactive" and listed[e["id"]]["active"])
    coming = [e["id"] for e in wanted if e["state"] == "active" and not listed[e["id"]]["active"]]
    active = [n for n, p in sorted(listed.items()) if p["active"] and n not in leaving]
    taken = {}
    for number in coming:
        mine = set(listed[number]["physical_ids"])
        for other in active + [n for n in taken if n != number]:
            shared = sorted(mine & set(listed[other]["physical_ids"]))
            if shared:
                raise StateError("%spartition %d (physical IDs %s) cannot be activated: partition %d (physical IDs %s) %s and holds GPUs %s; "
                                 "%s; nothing was changed"
                                 % (labels[number] + ": " if labels[number] else "", number, _ids(listed[number]["physical_ids"]), other,
                                    _ids(listed[other]["physical_ids"]),
                                    ("is active" if other in active else "is to be activated too")
                                    + (" (%s)" % labels[other] if labels.get(other) else ""), _ids(shared), free))
        taken[number] = True
    return [("deactivate", n) for n in sorted(leaving)] + [("activate", n) for n in coming]


def render_active(listed):
    """The active partitions as diff text: one line each, its ID and physical IDs."""
    return "".join("partition %d: physical IDs %s\n" % (n, _ids(p["physical_ids"])) for n, p in sorted(listed.items()) if p["active"])


def after(listed, steps):
    """``listed`` as ``steps`` leave it (for the diff)."""
    result = dict((n, dict(p)) for n, p in listed.items())
    for action, number in steps:
        result[number]["active"] = action == "activate"
    return result
