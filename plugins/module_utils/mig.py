# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG (Multi-Instance GPU) state, read through ``nvidia-smi``, and a declarative planner.

Parsers read the real text formats of ``nvidia-smi`` (``--query-gpu ... --format=csv``,
``mig -lgip``, ``-lgipp``, ``-lgi``, ``-lci``, ``-cgi ... -C``, ``-dci``/``-dgi``,
``-mig 0/1``, ``--gpu-reset`` and the Processes table of the plain output). The planner
compares a layout (mig-parted v1 semantics) with what a GPU has, validates it against the
GPU's own profiles and placements, and returns the smallest list of actions: mode change,
destroy unwanted GPU instances, create GPU instances with their default compute instances.
No I/O happens here except through the ``run`` callable given to :class:`NvidiaSmi`.
"""

from __future__ import annotations

import re
from collections import Counter

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError

# ---------------------------------------------------------------------------------------
# parsers
# ---------------------------------------------------------------------------------------

NA_VALUES = ("[N/A]", "N/A", "[Not Supported]", "")


class NvidiaSmiError(StateError):
    """nvidia-smi answered with an error line (for example "Insufficient Permissions")."""


def _strip_profile(name):
    name = name.strip()
    return name[4:].strip() if name.startswith("MIG ") else name


def parse_query_csv(text, fields=None):
    """``--query-gpu=a,b --format=csv[,noheader]``: a list of dicts keyed by field name.

    With a header line the keys come from it; without one, ``fields`` names the columns.
    ``[N/A]`` and similar become None."""
    lines = [line.strip() for line in text.replace("\r", "").splitlines() if line.strip()]
    if not lines:
        return []
    first = [cell.strip() for cell in lines[0].split(",")]
    if fields is None or [f.strip() for f in fields] == first:
        if fields is None and not all(re.match(r"^[a-z_][a-z0-9_.]*$", cell) for cell in first):
            raise ValueError("CSV output has no header and no field names were given")
        keys, rows = first, lines[1:]
    else:
        keys, rows = [f.strip() for f in fields], lines
    result = []
    for line in rows:
        cells = [cell.strip() for cell in line.split(", ")] if ", " in line else [line.strip()]
        if len(cells) != len(keys):
            # A name may itself contain ", " only in theory; be strict and say so.
            raise ValueError("CSV row %r has %d fields, expected %d (%s)" % (line, len(cells), len(keys), ", ".join(keys)))
        result.append({key: (None if value in NA_VALUES else value) for key, value in zip(keys, cells)})
    return result


_LGIP_ROW = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)\s+"
    r"(?P<mem>[\d.]+)\s+(?P<p2p>\S+)\s+(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)\s+\|$")


def parse_lgip(text):
    """``nvidia-smi mig -lgip``: ``{gpu_index: [profile]}``, each profile a dict with name,
    id, free, total, memory_gib, sm. Accepts the whole table, a table whose end was cut
    and a fragment without the header (rows are self-describing)."""
    gpus = {}
    for line in text.replace("\r", "").splitlines():
        match = _LGIP_ROW.match(line.rstrip())
        if not match:
            continue
        gpu = int(match.group("gpu"))
        gpus.setdefault(gpu, []).append({
            "name": match.group("name"), "id": int(match.group("id")),
            "free": int(match.group("free")), "total": int(match.group("total")),
            "memory_gib": float(match.group("mem")), "sm": int(match.group("sm")),
        })
    return gpus


_LGIPP_ROW = re.compile(r"^GPU\s+(?P<gpu>\d+)\s+Profile ID\s+(?P<id>\d+)\s+Placements?\s*:\s*\{(?P<starts>[\d,\s]*)\}:(?P<size>\d+)\s*$")


def parse_lgipp(text):
    """``nvidia-smi mig -lgipp``: ``{gpu_index: {profile_id: {"starts": [..], "size": n}}}``."""
    gpus = {}
    for line in text.replace("\r", "").splitlines():
        match = _LGIPP_ROW.match(line.strip())
        if not match:
            continue
        starts = [int(s) for s in match.group("starts").replace(" ", "").split(",") if s]
        gpus.setdefault(int(match.group("gpu")), {})[int(match.group("id"))] = {
            "starts": starts, "size": int(match.group("size"))}
    return gpus


_LGI_ROW = re.compile(r"^\|\s+(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<pid>\d+)\s+(?P<id>\d+)\s+(?P<start>\d+):(?P<size>\d+)\s+\|$")
_NOTHING_FOUND = re.compile(r"^No (GPU|compute) instances found|^No MIG-enabled devices found", re.I)
_FAILED = re.compile(r"^(Failed to .*?|Unable to .*?):\s*(?P<reason>.+)$")


def _check_error(text, what):
    for line in text.replace("\r", "").splitlines():
        match = _FAILED.match(line.strip())
        if match:
            raise NvidiaSmiError("nvidia-smi could not %s: %s" % (what, line.strip()))


def parse_lgi(text):
    """``nvidia-smi mig -lgi``: a list of GPU instances (gpu, id, profile, profile_id,
    start, size). Both the 52- and 55-column tables; "No GPU instances found" is empty;
    "Failed to ...: reason" raises NvidiaSmiError."""
    _check_error(text, "list GPU instances")
    result = []
    for line in text.replace("\r", "").splitlines():
        match = _LGI_ROW.match(line.rstrip())
        if match:
            result.append({
                "gpu": int(match.group("gpu")), "id": int(match.group("id")), "profile": match.group("name"),
                "profile_id": int(match.group("pid")), "start": int(match.group("start")), "size": int(match.group("size"))})
    return result


_LCI_ROW = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?P<gi>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<pid>\d+)\s+(?P<id>\d+)(?:\s+(?P<start>\d+):(?P<size>\d+))?\s+\|$")


def parse_lci(text):
    """``nvidia-smi mig -lci``: a list of compute instances (gpu, gpu_instance, id,
    profile, profile_id). Tables with or without the Placement column; "Failed to display
    compute instances: Insufficient Permissions" raises NvidiaSmiError."""
    _check_error(text, "list compute instances")
    result = []
    for line in text.replace("\r", "").splitlines():
        match = _LCI_ROW.match(line.rstrip())
        if match:
            result.append({
                "gpu": int(match.group("gpu")), "gpu_instance": int(match.group("gi")), "id": int(match.group("id")),
                "profile": match.group("name"), "profile_id": int(match.group("pid"))})
    return result


_CREATED_GI = re.compile(r"^Successfully created GPU instance ID\s+(?P<id>\d+) on GPU\s+(?P<gpu>\d+) using profile MIG (?P<name>\S+) \(ID\s+(?P<pid>\d+)\)")
_CREATED_CI = re.compile(
    r"^Successfully created compute instance(?: ID\s+(?P<id>\d+))? on GPU\s+(?P<gpu>\d+) GPU instance ID\s+(?P<gi>\d+) "
    r"using profile MIG (?P<name>\S+) \(ID\s+(?P<pid>\d+)\)")
_DESTROYED_CI = re.compile(r"^Successfully destroyed compute instance ID\s+(?P<id>\d+) from GPU\s+(?P<gpu>\d+) GPU instance ID\s+(?P<gi>\d+)")
_DESTROYED_GI = re.compile(r"^Successfully destroyed GPU instance ID\s+(?P<id>\d+) from GPU\s+(?P<gpu>\d+)")


def parse_create(text):
    """``nvidia-smi mig -cgi ... -C``: ``{"gpu_instances": [..], "compute_instances": [..]}``."""
    gis, cis = [], []
    for line in text.replace("\r", "").splitlines():
        line = line.strip()
        match = _CREATED_GI.match(line)
        if match:
            gis.append({"gpu": int(match.group("gpu")), "id": int(match.group("id")), "profile": match.group("name"),
                        "profile_id": int(match.group("pid"))})
            continue
        match = _CREATED_CI.match(line)
        if match:
            cis.append({"gpu": int(match.group("gpu")), "gpu_instance": int(match.group("gi")),
                        "id": None if match.group("id") is None else int(match.group("id")),
                        "profile": match.group("name"), "profile_id": int(match.group("pid"))})
    return {"gpu_instances": gis, "compute_instances": cis}


def parse_destroy(text):
    """``nvidia-smi mig -dci`` / ``-dgi``: ``{"compute_instances": [(gpu, gi, ci)], "gpu_instances": [(gpu, gi)]}``."""
    cis, gis = [], []
    for line in text.replace("\r", "").splitlines():
        line = line.strip()
        match = _DESTROYED_CI.match(line)
        if match:
            cis.append((int(match.group("gpu")), int(match.group("gi")), int(match.group("id"))))
            continue
        match = _DESTROYED_GI.match(line)
        if match:
            gis.append((int(match.group("gpu")), int(match.group("id"))))
    return {"compute_instances": cis, "gpu_instances": gis}


_MODE_SET = re.compile(r"^(?P<verb>Enabled|Disabled) MIG Mode for GPU (?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)")
_MODE_PENDING = re.compile(
    r"^Warning: MIG mode is in pending (?P<verb>enable|disable) state for GPU (?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d):\s*(?P<reason>.*)$")


def parse_mig_mode(text):
    """``nvidia-smi [-i N] -mig 0|1``: one dict per GPU named in the output:
    ``{bus_id, mode: enabled|disabled, pending: bool, reason, in_use: bool}``."""
    result = {}
    for line in text.replace("\r", "").splitlines():
        line = line.strip()
        match = _MODE_SET.match(line)
        if match:
            bus = match.group("bus").upper()
            result[bus] = {"bus_id": bus, "mode": match.group("verb").lower(), "pending": False, "reason": None, "in_use": False}
            continue
        match = _MODE_PENDING.match(line)
        if match:
            bus = match.group("bus").upper()
            reason = match.group("reason").strip()
            in_use = reason.startswith("In use by another client")
            if in_use:
                reason = "In use by another client"
            result[bus] = {"bus_id": bus, "mode": match.group("verb") + "d", "pending": True, "reason": reason, "in_use": in_use}
    return list(result.values())


_RESET_OK = re.compile(r"^GPU (?P<bus>\S+) was successfully reset\.")
_RESET_BUSY = re.compile(r"^GPU (?P<bus>\S+):? (?:is currently in use by another process|In use by another client)")


def parse_gpu_reset(text):
    """``nvidia-smi --gpu-reset``: ``{bus_id: "reset" | "in use"}`` (the bare form and the
    "GPU <bus>: In use by another client" lines mig-parted relays)."""
    result = {}
    for line in text.replace("\r", "").splitlines():
        line = line.strip()
        match = _RESET_OK.match(line)
        if match:
            result[match.group("bus").upper()] = "reset"
            continue
        match = _RESET_BUSY.match(line)
        if match:
            result[match.group("bus").rstrip(":").upper()] = "in use"
    return result


_PROC_ROW = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?P<gi>\d+|N/A)\s+(?P<ci>\d+|N/A)\s+(?P<pid>\d+)\s+(?P<type>[A-Z+]+)\s+(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s+\|$")


def parse_processes(text):
    """The "Processes:" table of plain ``nvidia-smi``: a list of {gpu, gpu_instance,
    compute_instance, pid, type, name}. "No running processes found" is empty."""
    result = []
    in_table = False
    for line in text.replace("\r", "").splitlines():
        if "Processes:" in line:
            in_table = True
            continue
        if not in_table:
            continue
        match = _PROC_ROW.match(line.rstrip())
        if match:
            result.append({
                "gpu": int(match.group("gpu")),
                "gpu_instance": None if match.group("gi") == "N/A" else int(match.group("gi")),
                "compute_instance": None if match.group("ci") == "N/A" else int(match.group("ci")),
                "pid": int(match.group("pid")), "type": match.group("type"), "name": match.group("name")})
    return result


# ---------------------------------------------------------------------------------------
# desired state: layout entries and mig-parted v1 files
# ---------------------------------------------------------------------------------------

PROFILE_NAME = re.compile(r"^\d+g\.\d+gb([+-][a-z.]+)?$")


def normalize_device_id(value, where):
    """``0x20B010DE`` (mig-parted / nvidia-smi pci.device_id), ``10de:20b0`` or ``0x20b0``
    (NVIDIA assumed) to ``"10de:20b0"``."""
    text = str(value).strip().lower()
    match = re.match(r"^0x([0-9a-f]{4})([0-9a-f]{4})$", text)
    if match:
        return "%s:%s" % (match.group(2), match.group(1))
    match = re.match(r"^(?:0x)?([0-9a-f]{4}):(?:0x)?([0-9a-f]{4})$", text)
    if match:
        return "%s:%s" % (match.group(1), match.group(2))
    match = re.match(r"^0x([0-9a-f]{4})$", text)
    if match:
        return "10de:%s" % match.group(1)
    raise InputError("%s: device filter %r is not a PCI id; use 0xDDDDVVVV (as mig-parted), vvvv:dddd or 0xdddd" % (where, value))


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
    elif isinstance(devices, int) and not isinstance(devices, bool):
        devices = [devices]
    elif isinstance(devices, (list, tuple)):
        try:
            devices = sorted({int(d) for d in devices})
        except (TypeError, ValueError):
            raise InputError("%s.devices must be 'all' or a list of GPU indexes, got %r" % (where, entry.get("devices")))
    else:
        raise InputError("%s.devices must be 'all' or a list of GPU indexes, got %r" % (where, devices))
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
        profile = _strip_profile(str(name))
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


def desired_per_gpu(entries, gpus):
    """Map each GPU (index) to the entry that applies to it; GPUs no entry names are
    absent (left alone). Returns (mapping, warnings)."""
    wanted, warnings, owner = {}, [], {}
    indexes = {gpu["index"] for gpu in gpus}
    for number, entry in enumerate(entries):
        if entry["devices"] != "all":
            for missing in sorted(set(entry["devices"]) - indexes):
                warnings.append("layout entry %d names GPU %d, which this host does not have" % (number, missing))
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
# reading a host through nvidia-smi
# ---------------------------------------------------------------------------------------

QUERY_FIELDS = ("index", "pci.bus_id", "name", "pci.device_id", "mig.mode.current", "mig.mode.pending")


class NvidiaSmi:
    """Runs nvidia-smi through ``run(argv) -> (rc, out, err)`` and parses what it says."""

    def __init__(self, binary, run):
        self.binary = binary
        self.run = run
        self.commands = []

    def _call(self, args, what, allow_rc=(0,)):
        argv = [self.binary] + list(args)
        rc, out, err = self.run(argv)
        self.commands.append({"cmd": argv, "rc": rc})
        text = (out or "") + ("\n" + err if err else "")
        if rc not in allow_rc:
            raise NvidiaSmiError("nvidia-smi could not %s (rc=%s): %s: %s" % (what, rc, " ".join(argv), text.strip() or "no output"))
        return rc, text

    def gpus(self):
        _rc, text = self._call(["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv"], "list GPUs")
        gpus = []
        for row in parse_query_csv(text):
            device = row.get("pci.device_id")
            current, pending = row.get("mig.mode.current"), row.get("mig.mode.pending")
            gpus.append({
                "index": int(row["index"]), "bus_id": (row.get("pci.bus_id") or "").upper(), "name": row.get("name"),
                "device_id": normalize_device_id(device, "pci.device_id") if device else None,
                "mig_capable": current is not None,
                "mig_mode": {"current": current.lower() if current else None, "pending": pending.lower() if pending else None},
            })
        return gpus

    def profiles(self, index):
        rc, text = self._call(["mig", "-i", str(index), "-lgip"], "list GPU instance profiles", allow_rc=(0, 6))
        profiles = parse_lgip(text).get(index, []) if rc == 0 else []
        rc, text = self._call(["mig", "-i", str(index), "-lgipp"], "list GPU instance placements", allow_rc=(0, 6))
        placements = parse_lgipp(text).get(index, {}) if rc == 0 else {}
        return profiles, placements

    def instances(self, index):
        """GPU instances of one GPU, each with its compute instances."""
        rc, text = self._call(["mig", "-i", str(index), "-lgi"], "list GPU instances", allow_rc=(0, 6))
        gis = [gi for gi in parse_lgi(text) if gi["gpu"] == index] if rc == 0 else []
        rc, text = self._call(["mig", "-i", str(index), "-lci"], "list compute instances", allow_rc=(0, 6))
        cis = parse_lci(text) if rc == 0 else []
        for gi in gis:
            gi["compute_instances"] = sorted(ci["id"] for ci in cis if ci["gpu"] == index and ci["gpu_instance"] == gi["id"])
        return gis

    def processes(self):
        _rc, text = self._call([], "list processes")
        return parse_processes(text)

    def set_mode(self, index, enabled):
        _rc, text = self._call(["-i", str(index), "-mig", "1" if enabled else "0"], "change MIG mode")
        return text, parse_mig_mode(text)

    def destroy(self, index, gi_ids):
        ids = ",".join(str(i) for i in gi_ids)
        _rc, out_ci = self._call(["mig", "-i", str(index), "-gi", ids, "-dci"], "destroy compute instances", allow_rc=(0, 6))
        _rc, out_gi = self._call(["mig", "-i", str(index), "-gi", ids, "-dgi"], "destroy GPU instances")
        return parse_destroy(out_ci + "\n" + out_gi)

    def create(self, index, profile_ids):
        _rc, text = self._call(["mig", "-i", str(index), "-cgi", ",".join(str(p) for p in profile_ids), "-C"], "create GPU instances")
        return parse_create(text)

    def reset(self, index):
        rc, text = self._call(["--gpu-reset", "-i", str(index)], "reset the GPU", allow_rc=tuple(range(256)))
        return rc, text, parse_gpu_reset(text)


# ---------------------------------------------------------------------------------------
# planning and applying
# ---------------------------------------------------------------------------------------

def _summary(gis):
    return sorted(gi["profile"] for gi in gis)


def _public_instances(gis, procs_by_gi):
    return [{"gpu_instance_id": gi["id"], "profile": gi["profile"], "profile_id": gi["profile_id"],
             "placement": "%d:%d" % (gi["start"], gi["size"]), "compute_instances": gi.get("compute_instances", []),
             "processes": procs_by_gi.get(gi["id"], 0)} for gi in sorted(gis, key=lambda g: (g["start"], g["id"]))]


class MigManager:
    """Reads every GPU, plans each against its layout entry, and applies the plan."""

    def __init__(self, smi, reset="auto", force=False, warn=None):
        self.smi = smi
        self.reset_policy = reset
        self.force = force
        self.warn = warn or (lambda msg: None)

    # -- reading ----------------------------------------------------------------------
    def read(self):
        gpus = self.smi.gpus()
        procs = self.smi.processes()
        for gpu in gpus:
            gpu["processes"] = [p for p in procs if p["gpu"] == gpu["index"]]
            gpu["instances"] = []
            gpu["profiles"], gpu["placements"] = [], {}
            if gpu["mig_mode"]["current"] == "enabled":
                gpu["profiles"], gpu["placements"] = self.smi.profiles(gpu["index"])
                gpu["instances"] = self.smi.instances(gpu["index"])
        return gpus

    # -- planning ---------------------------------------------------------------------
    def plan_gpu(self, gpu, entry):
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
        if plan["mode"] and plan["mode_already_pending"] and self.reset_policy == "never":
            # Nothing to do until the host reboots; the instances wait for that.
            plan["mode"] = None
            plan["pending_reboot"] = True
            return plan
        if not want_enabled:
            plan["destroy"] = list(existing)
        elif current == "enabled":
            plan["profiles_checked"] = True
            self._plan_instances(gpu, entry, plan, label, procs_by_gi)
        else:
            # MIG is off: the GPU lists no profiles until the mode is on. Names were
            # checked for form; the fit is checked once the mode is current.
            plan["create"] = sorted(Counter(entry["mig_devices"]).elements(), key=lambda n: (-int(n.split("g.", 1)[0]), n))
        for gi in plan["destroy"]:
            if procs_by_gi.get(gi["id"]):
                plan["blocked"].append("%s GPU instance %d (%s) has %d process(es) on it" % (label, gi["id"], gi["profile"], procs_by_gi[gi["id"]]))
        return plan

    def _plan_instances(self, gpu, entry, plan, label, procs_by_gi):
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

    def plan(self, wanted, gpus):
        plans, errors, blocked = {}, [], []
        for gpu in gpus:
            if gpu["index"] not in wanted:
                continue
            plans[gpu["index"]] = self.plan_gpu(gpu, wanted[gpu["index"]])
            errors.extend(plans[gpu["index"]]["errors"])
            blocked.extend(plans[gpu["index"]]["blocked"])
        return plans, errors, blocked

    # -- applying ---------------------------------------------------------------------
    def apply_gpu(self, gpu, entry, plan):
        """Apply one GPU's plan; returns (reset_performed, reboot_required, messages)."""
        index = gpu["index"]
        reset_performed, reboot_required, messages = False, False, []
        if plan["destroy"]:
            self.smi.destroy(index, [gi["id"] for gi in plan["destroy"]])
        if plan["mode"]:
            want_enabled = plan["mode"] == "enable"
            if not plan.get("mode_already_pending"):
                text, results = self.smi.set_mode(index, want_enabled)
                messages.extend(line for line in text.splitlines() if line.startswith("Warning"))
                if not results:
                    raise NvidiaSmiError("GPU %d: nvidia-smi -mig gave no result: %s" % (index, text.strip()))
            state = self._mode_of(index)
            target = "enabled" if want_enabled else "disabled"
            if state["current"] != target:
                if self.reset_policy == "auto" and not self._busy(index):
                    rc, text, outcome = self.smi.reset(index)
                    if outcome.get(gpu["bus_id"]) == "reset" or (rc == 0 and "successfully reset" in text):
                        reset_performed = True
                    else:
                        messages.append("GPU %d: reset refused: %s" % (index, " ".join(text.split())[:300]))
                    state = self._mode_of(index)
                if state["current"] != target:
                    reboot_required = True
                    plan["create"] = []
                    messages.append("GPU %d: MIG mode change to %s is pending; %s" % (
                        index, target, "reboot the host (reset: never)" if self.reset_policy == "never"
                        else "the GPU is in use; reboot the host or stop its clients and run again"))
                    return reset_performed, reboot_required, messages
        if entry["mig_enabled"]:
            create = plan["create"]
            if not plan["profiles_checked"]:
                # The mode just became current: now the GPU lists its profiles; plan again.
                fresh = dict(gpu)
                fresh["mig_mode"] = self._mode_of(index)
                fresh["profiles"], fresh["placements"] = self.smi.profiles(index)
                fresh["instances"] = self.smi.instances(index)
                again = self.plan_gpu(fresh, entry)
                if again["errors"]:
                    raise InputError("; ".join(again["errors"]) + " (MIG mode was enabled; no instances were created)")
                if again["destroy"]:
                    self.smi.destroy(index, [gi["id"] for gi in again["destroy"]])
                create = again["create"]
                plan.update(create=create, keep=again["keep"], profiles_checked=True)
                by_name = {p["name"]: p for p in fresh["profiles"]}
            else:
                by_name = {p["name"]: p for p in gpu["profiles"]}
            if create:
                self.smi.create(index, [by_name[name]["id"] for name in create])
        return reset_performed, reboot_required, messages

    def _mode_of(self, index):
        for gpu in self.smi.gpus():
            if gpu["index"] == index:
                return gpu["mig_mode"]
        raise NvidiaSmiError("GPU %d disappeared from nvidia-smi --query-gpu" % index)

    def _busy(self, index):
        return any(p["gpu"] == index for p in self.smi.processes())


def predicted_after(gpu, entry, plan):
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
        out.append("%s: %s MIG mode%s" % (prefix, plan["mode"], " (already pending: reset or reboot)" if plan.get("mode_already_pending") else ""))
    for name in plan["create"]:
        out.append("%s: create GPU instance %s with its default compute instance" % (prefix, name))
    return out


def state_view(gpu):
    """What diff shows for one GPU."""
    return {"mig_mode": dict(gpu["mig_mode"]), "instances": _summary(gpu["instances"])}


def public_instances(gpu):
    return _public_instances(gpu["instances"], Counter(p["gpu_instance"] for p in gpu.get("processes", [])))
