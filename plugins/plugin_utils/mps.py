# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which GPUs can host a whole-GPU MPS daemon (the gpu_mps role), from what nvidia-smi printed.
Pure: the role runs nvidia-smi and hands its registered results to the action
``gpuvirt.tenancy.mps_plan`` (:func:`mps_plan`)."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nvidia_smi import parse_query_csv

__metaclass__ = type

# the role's query: --query-gpu=index,pci.bus_id,name,compute_mode,mig.mode.current --format=csv,noheader
GPU_FIELDS = ("index", "bus_id", "name", "compute_mode", "mig")
MPS_SERVER = "nvidia-cuda-mps-server"


def foreign_buses(apps_text):
    """Bus ids (upper case) of the GPUs with a compute process other than the MPS server, from
    ``--query-compute-apps=gpu_bus_id,pid,process_name --format=csv,noheader``."""
    buses = []
    for line in (apps_text or "").splitlines():
        if line.strip() and MPS_SERVER not in line:
            buses.append(line.split(", ")[0].strip().upper())
    return buses


def conflict_text(conflicts):
    """The conflicting GPUs as the role's refusal names them, each as ``0 (NVIDIA H100 PCIe,
    00000000:01:00.0: MIG Enabled, compute mode Default)``, separated by semicolons."""
    return "; ".join("%s (%s, %s: MIG %s, compute mode %s)" % (g["index"], g["name"], g["bus_id"], g["mig"], g["compute_mode"])
                     for g in conflicts)


class InputError(ValueError):
    """A role input the role refuses (not what nvidia-smi printed)."""


class ReadError(ValueError):
    """What nvidia-smi printed, or its failure, that the role cannot read."""


PINNED_LIMIT = re.compile(r"^[0-9]+[KMG]?$")


def check_inputs(wanted, active_thread_percentage=None, pinned_memory_limit=None):
    """Refuse the role's inputs that no argument spec type says are wrong: ``gpus`` is ``all`` or
    a list of indexes, the active thread percentage 1-100, the pinned memory limit like ``20G``
    (empty or none: unset). Raises InputError naming every bad input and where to fix it."""
    bad = []
    if wanted != "all" and not isinstance(wanted, (list, tuple)):
        bad.append("gpus 'all' or a list of indexes (got %r)" % (wanted,))
    if active_thread_percentage not in (None, ""):
        try:
            percentage = int(active_thread_percentage)
        except (TypeError, ValueError):
            percentage = None
        if percentage is None or not 1 <= percentage <= 100:
            bad.append("active_thread_percentage 1-100 (got %r)" % (active_thread_percentage,))
    if pinned_memory_limit not in (None, "") and not PINNED_LIMIT.match(str(pinned_memory_limit)):
        bad.append("pinned_memory_limit like 20G (got %r)" % (pinned_memory_limit,))
    if bad:
        raise InputError("bad input - %s; set them in gpuvirt_mps" % ", ".join(bad))


# how much of what nvidia-smi said a "no NVIDIA GPU" message keeps
SILENCE_TEXT = 200


def no_gpu_message(query):
    """Why no NVIDIA GPU answered, from the GPU query's registered result (``rc``, ``stdout``,
    ``stderr``, ``msg``, ``cmd``), or None when it printed GPUs: the program (missing, or its
    driver not loaded) failed, or it printed no GPU."""
    if query.get("rc", 1) == 0 and (query.get("stdout") or "").strip():
        return None
    cmd = query.get("cmd")
    program = cmd[0] if isinstance(cmd, list) and cmd else (cmd or "nvidia-smi")
    said = " ".join(part for part in (query.get("msg"), query.get("stdout"), query.get("stderr")) if part).strip()
    if len(said) > SILENCE_TEXT:
        said = said[:SILENCE_TEXT - 3].rstrip() + "..."
    return "no NVIDIA GPU answers here (%s: %s)" % (program, said)


def mps_gpus(query_text, apps_text, wanted="all", state="started"):
    """``{gpus, indexes, requested, missing, conflicts, conflicts_text, skipped, selected}``: every
    GPU (cells as printed) and its index, the ones ``wanted`` names (``all`` or indexes), the wanted
    indexes the host lacks, the requested GPUs that cannot host a whole-GPU daemon (MIG mode on,
    Prohibited, or Exclusive_Process held by another process) and those as the role's refusal
    names them, the conflicting GPUs a start skips (none for a stop, which keeps them), and the
    GPUs the role acts on."""
    gpus = parse_query_csv(query_text or "", fields=GPU_FIELDS, raw=True)
    indexes = [g["index"] for g in gpus]
    wanted_indexes = None if wanted == "all" else [str(i) for i in wanted]
    requested = gpus if wanted_indexes is None else [g for g in gpus if g["index"] in wanted_indexes]
    busy = foreign_buses(apps_text)
    conflicts = ([g for g in requested if g["mig"] == "Enabled"]
                 + [g for g in requested if g["compute_mode"] == "Prohibited"]
                 + [g for g in requested if g["compute_mode"] == "Exclusive_Process" and g["bus_id"] in busy])
    conflicting = set(g["index"] for g in conflicts)
    selected = [g for g in requested if g["index"] not in conflicting] if state == "started" else requested
    return {"gpus": gpus, "indexes": indexes, "requested": requested,
            "missing": [i for i in (wanted_indexes or []) if i not in indexes],
            "conflicts": conflicts, "conflicts_text": conflict_text(conflicts),
            "skipped": conflicts if state == "started" else [], "selected": selected}


def mps_plan(query, apps="", wanted="all", state="started", active_thread_percentage=None, pinned_memory_limit=None):
    """:func:`mps_gpus` with ``answered`` and ``message``, the role's inputs checked first (an
    :class:`InputError`). ``query`` and ``apps``: the two nvidia-smi queries' output, or their
    registered results; from a registered GPU query that printed no GPU, ``answered`` is false and
    ``message`` says why (the role then changes nothing). Processes that cannot be read while the
    GPUs answered, or output that cannot be read, are a :class:`ReadError`."""
    check_inputs(wanted, active_thread_percentage, pinned_memory_limit)
    message = no_gpu_message(query) if isinstance(query, dict) else None
    if message:
        return dict(mps_gpus("", "", wanted, state), answered=False, message=message)
    if isinstance(apps, dict):
        if apps.get("rc", 1) != 0:
            raise ReadError("the GPUs answered but their processes could not be read (%s); check nvidia-smi "
                            "--query-compute-apps on this host" % " ".join(
                                part for part in (apps.get("msg"), apps.get("stderr")) if part).strip())
        apps = apps.get("stdout") or ""
    query_text = (query.get("stdout") or "") if isinstance(query, dict) else query
    try:
        return dict(mps_gpus(query_text, apps, wanted, state), answered=True, message="")
    except ValueError as exc:
        raise ReadError("nvidia-smi printed what the role cannot read: %s" % exc)
