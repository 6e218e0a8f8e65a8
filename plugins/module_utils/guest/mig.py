# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG planner, pure: a layout (mig-parted v1 semantics) compared with what each GPU has
(as :mod:`nvidia_smi` read it), validated against the GPU's own profiles and placements, gives
the smallest list of actions: mode change, destroy unwanted GPU instances, create GPU
instances with their default compute instances. No I/O here.
"""

from __future__ import absolute_import, division, print_function

import re
from collections import Counter

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nvidia_smi import normalize_device_id, strip_profile

__metaclass__ = type

# ---------------------------------------------------------------------------------------
# desired state: layout entries and mig-parted v1 files
# ---------------------------------------------------------------------------------------

PROFILE_NAME = re.compile(r"^\d+g\.\d+gb([+-][a-z.]+)?\Z")

# A MIG mode change needs no GPU reset from Hopper on: the driver makes it current at once on an
# idle GPU (NVIDIA/gpu-operator#2600 and #2603, "from Hopper on, enabling it no longer needs a
# reset"; NVIDIA/gpu-admin-tools#2, "On H100 the MIG enablement is controlled by driver"), while
# an Ampere GPU (A100, A30) keeps it pending until a reset or a reboot. The architecture is told
# by the product name nvidia-smi --query-gpu=name prints for the GH100 parts ("NVIDIA H100 PCIe",
# "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA GH200 144G HBM3e", and the H800/H20 names that
# mig-parted's config-default.yaml lists with them).
HOPPER_NAME = re.compile(r"(?:^|\s)(?:NVIDIA\s+)?G?H(?:100|200|800|20)(?:\s|$)", re.I)


def mode_switch_without_reset(gpu):
    """Whether this GPU (as :mod:`nvidia_smi` read it) takes a MIG mode change without a reset or
    a reboot: a Hopper GPU, told by its product name."""
    return bool(HOPPER_NAME.search(str(gpu.get("name") or "")))


def normalize_entry(raw, where):
    """One layout entry (module option or a mig-parted v1 entry, '-' or '_' keys) to
    ``{devices: "all" | [int], device_filter: [ids], mig_enabled: bool, mig_devices: {name: n}}``."""
    if not isinstance(raw, dict):
        raise InputError("%s must be a mapping with devices, mig_enabled and mig_devices, got %r" % (where, raw))
    entry = {}
    for key, value in raw.items():
        entry[str(key).replace("-", "_")] = value
    unknown = set(entry) - {"devices", "device_filter", "mig_enabled", "mig_devices"}
    if unknown:
        raise InputError("%s has unknown keys %s; allowed: devices, device_filter, mig_enabled, mig_devices" % (where, ", ".join(sorted(unknown))))
    devices = entry.get("devices", "all")
    if isinstance(devices, str) and devices.strip() == "all":
        devices = "all"
    else:
        listed = [devices] if isinstance(devices, int) and not isinstance(devices, bool) else devices
        # an index is a whole number >= 0 (-1 or True would name no GPU, or another one)
        if not isinstance(listed, (list, tuple)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 or isinstance(d, str) and re.match(r"^[0-9]+\Z", d)
                for d in listed):
            raise InputError("%s.devices must be 'all' or a list of GPU indexes (0 or more), got %r" % (where, devices))
        devices = sorted({int(d) for d in listed})
    filters = entry.get("device_filter") or []
    if isinstance(filters, str):
        filters = [filters]
    filters = [normalize_device_id(f, "%s.device_filter" % where) for f in filters]
    if "mig_enabled" not in entry or not isinstance(entry["mig_enabled"], bool):
        raise InputError("%s.mig_enabled must be true or false" % where)
    mig_devices = entry.get("mig_devices") or {}
    if not isinstance(mig_devices, dict):
        raise InputError("%s.mig_devices must be a mapping of profile name to count, e.g. {'1g.10gb': 7}" % where)
    devices_out = {}
    for name, count in mig_devices.items():
        profile = strip_profile(check_line_value(str(name), "%s.mig_devices" % where))
        if not PROFILE_NAME.match(profile):
            raise InputError("%s.mig_devices: %r is not a MIG profile name (like 1g.10gb, 1g.10gb+me, 3g.40gb)" % (where, name))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InputError("%s.mig_devices[%s] must be a whole number >= 0, got %r" % (where, name, count))
        if count:
            devices_out[profile] = devices_out.get(profile, 0) + count
    if not entry["mig_enabled"] and devices_out:
        raise InputError("%s sets mig_enabled: false but asks for mig_devices %s; enable MIG or drop the devices" % (where, devices_out))
    return {"devices": devices, "device_filter": filters, "mig_enabled": entry["mig_enabled"], "mig_devices": devices_out}


def select_mig_parted_config(document, config_name, source):
    """The entries of ``mig-configs.<config_name>`` of a mig-parted v1 document."""
    if not isinstance(document, dict) or document.get("version") != "v1":
        raise InputError("config_file %s is not a mig-parted v1 file (needs 'version: v1' and 'mig-configs')" % source)
    configs = document.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise InputError("config_file %s has no 'mig-configs' mapping" % source)
    if config_name not in configs:
        raise InputError("config %r is not in %s; it has: %s" % (config_name, source, ", ".join(sorted(configs))))
    entries = configs[config_name]
    if not isinstance(entries, list) or not entries:
        raise InputError("mig-configs.%s in %s must be a non-empty list of entries" % (config_name, source))
    return [normalize_entry(e, "%s: mig-configs.%s[%d]" % (source, config_name, i)) for i, e in enumerate(entries)]


def desired_per_gpu(entries, gpus, unknown_gpus="error"):
    """Map each GPU (index) to the entry that applies to it; GPUs no entry names are
    absent (left alone). Returns (mapping, warnings). An index the host does not have is an
    error (``unknown_gpus="error"``: a layout written for this host that names another one),
    or a warning for a mig-parted file (``"warn"``), whose configs name the GPUs of every host
    they serve, as mig-parted applies them."""
    wanted, warnings, owner = {}, [], {}
    indexes = {gpu["index"] for gpu in gpus}
    for number, entry in enumerate(entries):
        if entry["devices"] != "all":
            missing = sorted(set(entry["devices"]) - indexes)
            if missing and unknown_gpus == "error":
                raise InputError("layout[%d].devices: GPU %s does not exist on this host (its GPUs: %s); give indexes "
                                 "as nvidia-smi -L lists them, or devices: all"
                                 % (number, ", ".join(str(m) for m in missing),
                                    ", ".join(str(i) for i in sorted(indexes)) or "none"))
            for index in missing:
                warnings.append("layout entry %d names GPU %d, which this host does not have" % (number, index))
        for gpu in gpus:
            if entry["devices"] != "all" and gpu["index"] not in entry["devices"]:
                continue
            if entry["device_filter"] and gpu.get("device_id") not in entry["device_filter"]:
                continue
            if gpu["index"] in wanted:
                raise InputError("layout entries %d and %d both apply to GPU %d (%s); narrow devices or device_filter"
                                 % (owner[gpu["index"]], number, gpu["index"], gpu.get("bus_id")))
            wanted[gpu["index"]] = entry
            owner[gpu["index"]] = number
    return wanted, warnings


# ---------------------------------------------------------------------------------------
# placement
# ---------------------------------------------------------------------------------------

def place(requests, placements, occupied=()):
    """Find non-overlapping placements for ``requests`` (profile ids) given each profile's
    allowed ``{"starts", "size"}`` and the ``occupied`` (start, size) ranges. Returns a
    list of (profile_id, start) or None. Largest first; exhaustive backtracking (at most
    8 slices, so the search is tiny)."""
    used = set()
    for start, size in occupied:
        used.update(range(start, start + size))
    order = sorted(requests, key=lambda pid: (-placements[pid]["size"], pid))
    chosen = []

    def search(i):
        if i == len(order):
            return True
        pid = order[i]
        size = placements[pid]["size"]
        for start in placements[pid]["starts"]:
            cells = set(range(start, start + size))
            if cells & used:
                continue
            # Same profile: keep starts ascending to avoid trying permutations.
            if i and order[i - 1] == pid and chosen and start < chosen[-1][1]:
                continue
            used.update(cells)
            chosen.append((pid, start))
            if search(i + 1):
                return True
            chosen.pop()
            used.difference_update(cells)
        return False

    return list(chosen) if search(0) else None


# ---------------------------------------------------------------------------------------
# planning
# ---------------------------------------------------------------------------------------

def _summary(gis):
    return sorted(gi["profile"] for gi in gis)


def _public_instances(gis, procs_by_gi):
    return [{"gpu_instance_id": gi["id"], "profile": gi["profile"], "profile_id": gi["profile_id"],
             "placement": "%d:%d" % (gi["start"], gi["size"]), "compute_instances": gi.get("compute_instances", []),
             "processes": procs_by_gi.get(gi["id"], 0)} for gi in sorted(gis, key=lambda g: (g["start"], g["id"]))]


def plan_gpu(gpu, entry, reset_policy="auto"):
    """The actions for one GPU: ``{mode, destroy, create, fits, errors}``. ``errors``
    are input problems (the layout cannot be applied to this GPU)."""
    plan = {"mode": None, "destroy": [], "create": [], "keep": [], "profiles_checked": False, "errors": [], "blocked": []}
    label = "GPU %d (%s, %s)" % (gpu["index"], gpu.get("name"), gpu.get("bus_id"))
    want_enabled = entry["mig_enabled"]
    if not gpu["mig_capable"]:
        if want_enabled:
            plan["errors"].append("%s is not MIG-capable (mig.mode.current is N/A); remove it from the layout's devices "
                                  "or add a device_filter" % label)
        return plan
    current, pending = gpu["mig_mode"]["current"], gpu["mig_mode"]["pending"]
    target = "enabled" if want_enabled else "disabled"
    if current != target or pending not in (None, target):
        # Also when the mode is right but a change away from it is pending: set it again.
        plan["mode"] = "enable" if want_enabled else "disable"
        plan["mode_already_pending"] = current != target and pending == target
    procs_by_gi = Counter(p["gpu_instance"] for p in gpu["processes"])
    existing = gpu["instances"]
    # Hopper: a change left pending (a client held the GPU) is made again once idle, no reboot.
    plan["reset_needed"] = not mode_switch_without_reset(gpu)
    if plan["mode"] and plan["mode_already_pending"] and reset_policy == "never" and plan["reset_needed"]:
        # Nothing to do until the host reboots; the instances wait for that.
        plan["mode"] = None
        plan["pending_reboot"] = True
        return plan
    if not want_enabled:
        plan["destroy"] = list(existing)
    elif current == "enabled":
        plan["profiles_checked"] = True
        _plan_instances(gpu, entry, plan, label, procs_by_gi)
    else:
        # MIG is off: the GPU lists no profiles until the mode is on. Names were
        # checked for form; the fit is checked once the mode is current.
        plan["create"] = sorted(Counter(entry["mig_devices"]).elements(), key=lambda n: (-int(n.split("g.", 1)[0]), n))
    for gi in plan["destroy"]:
        if procs_by_gi.get(gi["id"]):
            plan["blocked"].append("%s GPU instance %d (%s) has %d process(es) on it" % (label, gi["id"], gi["profile"], procs_by_gi[gi["id"]]))
    return plan


def _plan_instances(gpu, entry, plan, label, procs_by_gi):
    by_name = {p["name"]: p for p in gpu["profiles"]}
    want = Counter(entry["mig_devices"])
    for name, count in sorted(want.items()):
        if name not in by_name:
            plan["errors"].append("%s has no MIG profile %r; its profiles are: %s" % (label, name, ", ".join(p["name"] for p in gpu["profiles"])))
        elif count > by_name[name]["total"]:
            plan["errors"].append("%s allows at most %d instance(s) of %s, the layout asks for %d" % (label, by_name[name]["total"], name, count))
    if plan["errors"]:
        return
    placements = gpu["placements"]
    missing_placements = [name for name in want if by_name[name]["id"] not in placements]
    if missing_placements:
        plan["errors"].append("%s listed no placements (-lgipp) for %s" % (label, ", ".join(sorted(missing_placements))))
        return
    requests_all = list(Counter({by_name[n]["id"]: c for n, c in want.items()}).elements())
    if place(requests_all, placements) is None:
        plan["errors"].append("%s cannot hold %s at once: no placement of these instances fits its slices (see nvidia-smi mig -lgipp)"
                              % (label, ", ".join("%dx %s" % (c, n) for n, c in sorted(want.items()))))
        return
    # Keep what matches (GIs with compute instances; busy ones first), destroy the rest.
    keep, destroy = [], []
    left = Counter(want)
    ordered = sorted(gpu["instances"], key=lambda g: (-procs_by_gi.get(g["id"], 0), g["id"]))
    for gi in ordered:
        if left.get(gi["profile"], 0) > 0 and gi.get("compute_instances"):
            keep.append(gi)
            left[gi["profile"]] -= 1
        else:
            destroy.append(gi)
    create = list(left.elements())
    if create and place([by_name[n]["id"] for n in create], placements, [(g["start"], g["size"]) for g in keep]) is None:
        # The kept instances leave no room in the right places: start over on this GPU.
        destroy, keep, create = list(gpu["instances"]), [], list(want.elements())
    plan["keep"], plan["destroy"] = keep, sorted(destroy, key=lambda g: g["id"])
    plan["create"] = sorted(create, key=lambda n: (-placements[by_name[n]["id"]]["size"], n))


def plan(wanted, gpus, reset_policy="auto"):
    """Plans of the GPUs a layout entry applies to: (plans by index, errors, blocked)."""
    plans, errors, blocked = {}, [], []
    for gpu in gpus:
        if gpu["index"] not in wanted:
            continue
        plans[gpu["index"]] = plan_gpu(gpu, wanted[gpu["index"]], reset_policy)
        errors.extend(plans[gpu["index"]]["errors"])
        blocked.extend(plans[gpu["index"]]["blocked"])
    return plans, errors, blocked

# -- applying ---------------------------------------------------------------------


def predicted_after(entry, plan):
    """The instance profiles a GPU will have once the plan is applied (for check mode)."""
    if not entry["mig_enabled"]:
        return []
    if plan.get("mode") and not plan.get("profiles_checked"):
        return sorted(plan["create"])
    return sorted([gi["profile"] for gi in plan["keep"]] + list(plan["create"]))


def describe_plan(gpu, plan):
    """Human-readable actions, in the order they will run."""
    out = []
    prefix = "GPU %d" % gpu["index"]
    for gi in plan["destroy"]:
        out.append("%s: destroy GPU instance %d (%s, placement %d:%d) and its compute instances" % (prefix, gi["id"], gi["profile"], gi["start"], gi["size"]))
    if plan["mode"]:
        pending = (" (already pending: reset or reboot)" if plan.get("reset_needed", True)
                   else " (already pending: set again; a Hopper GPU needs no reset or reboot)")
        out.append("%s: %s MIG mode%s" % (prefix, plan["mode"], pending if plan.get("mode_already_pending") else ""))
    for name in plan["create"]:
        out.append("%s: create GPU instance %s with its default compute instance" % (prefix, name))
    return out


def state_view(gpu):
    """What diff shows for one GPU."""
    return {"mig_mode": dict(gpu["mig_mode"]), "instances": _summary(gpu["instances"])}


def public_instances(gpu):
    return _public_instances(gpu["instances"], Counter(p["gpu_instance"] for p in gpu.get("processes", [])))
