# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi: parsers of its real text formats and the adapter that runs it on the host.

Parsers read ``--query-gpu ... --format=csv``, ``mig -lgip``, ``-lgipp``, ``-lgi``, ``-lci``,
``-cgi ... -C``, ``-dci``/``-dgi``, ``-mig 0/1``, ``--gpu-reset`` and the Processes table of the
plain output; they are pure. :class:`NvidiaSmi` runs the program through the host's command
runner and keeps the command lines it ran (the module returns them).
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError

__metaclass__ = type

NA_VALUES = ("[N/A]", "N/A", "[Not Supported]", "")


class NvidiaSmiError(StateError):
    """nvidia-smi answered with an error line (for example "Insufficient Permissions")."""


def strip_profile(name):
    """``MIG 1g.10gb`` (as nvidia-smi names it) -> ``1g.10gb``."""
    name = name.strip()
    return name[4:].strip() if name.startswith("MIG ") else name


def parse_query_csv(text, fields=None, raw=False):
    """``--query-gpu=a,b --format=csv[,noheader]``: a list of dicts keyed by field name.

    With a header line the keys come from it; without one, ``fields`` names the columns.
    ``[N/A]`` and similar become None, unless ``raw`` keeps every cell as printed."""
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
        result.append({key: (None if value in NA_VALUES and not raw else value) for key, value in zip(keys, cells)})
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


# nvidia-smi on the host
QUERY_FIELDS = ("index", "pci.bus_id", "name", "pci.device_id", "mig.mode.current", "mig.mode.pending")


class NvidiaSmi:
    """Runs nvidia-smi (``binary``) through the host's command runner and parses what it
    says. Exit codes are checked per call: some listings answer 6 for "nothing found"."""

    def __init__(self, binary, host):
        self.binary = binary
        self.host = host
        self.commands = []

    def _call(self, args, what, allow_rc=(0,)):
        argv = [self.binary] + list(args)
        rc, out, err = self.host.commands.run(argv, check=False)
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
