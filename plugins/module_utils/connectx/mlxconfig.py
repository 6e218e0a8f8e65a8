# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ConnectX firmware configuration through ``mlxconfig`` (MFT) or ``mstconfig`` (mstflint).

``<tool> -d <dev> -e q`` prints every parameter with its Default, Current and Next Boot value
(``SRIOV_EN  False(0)  True(1)  True(1)``). A ``set`` writes the Next Boot value only; the
firmware loads it at the next power cycle, so ``reboot_required`` is true while any Next
differs from Current. Only parameters whose Next value differs from the wanted value are set.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx.pf_lookup import wanted_vfs

__metaclass__ = type

COLUMN_NAMES = {"Default": "default", "Current": "current", "Next Boot": "next", "New": "new"}
VALUE_RE = re.compile(r"^(?P<text>.*?)\((?P<num>-?\d+)\)$")
LOCKDOWN_PATH = "/sys/kernel/security/lockdown"
TOOLS = ("mlxconfig", "mstconfig")
NOT_READ = "N/A"  # what the tools print for a value the firmware could not read (printParam, MLXCFG_UNKNOWN)


class MlxconfigError(StateError):
    """The tool failed; ``kind`` is one of tool_missing, device_not_found, unknown_parameter,
    above_maximum, lockdown, failed."""

    def __init__(self, kind, msg, output=""):
        super().__init__(msg)
        self.kind = kind
        self.output = output
        self.details = {"error_kind": kind}


def parse_value(shown):
    """``False(0)`` -> {'text': 'False', 'num': 0}; ``8`` -> {'text': '8', 'num': 8};
    ``Array[0..7]`` / ``N/A`` -> {'text': ..., 'num': None}."""
    shown = shown.strip()
    match = VALUE_RE.match(shown)
    if match:
        return {"text": match.group("text"), "num": int(match.group("num"))}
    if re.match(r"^-?\d+$", shown):
        return {"text": shown, "num": int(shown)}
    if re.match(r"^0x[0-9a-fA-F]+$", shown):
        return {"text": shown, "num": int(shown, 16)}
    return {"text": shown, "num": None}


# A row's markers, as mlxconfig/mstconfig print them (mstflint mlxconfig/mlxcfg_ui.cpp printSingleParam:
# "%s%s     %-48s"): "*" when Next differs from Default/Current, then "RO" for a read-only parameter, which
# MFT 4.26+ lists in a query by default ("*RO     NAME ...", " RO     NAME ...", "*        NAME ...").
_ROW_MARKERS = re.compile(r"^(?P<modified>\*)?(?P<read_only> ?RO(?= ))?")


def parse_rows(lines, columns):
    """Parameter rows (``[*][RO] NAME v1 v2 ...``) -> ordered dict name -> {column: shown,
    modified, read_only}."""
    params = {}
    for line in lines:
        if not line.strip():
            continue
        markers = _ROW_MARKERS.match(line)
        body = line[markers.end():]
        if not body.startswith(" "):
            break  # the trailing "The '*' shows ..." line, or an -E- line
        fields = body.split()
        if len(fields) != len(columns) + 1:
            continue
        entry = dict(zip(columns, fields[1:]))
        entry["modified"] = bool(markers.group("modified"))
        entry["read_only"] = bool(markers.group("read_only"))
        params[fields[0]] = entry
    return params


def parse_query(text):
    """Parse the output of ``mlxconfig -d DEV [-e] q`` (one device).

    Returns {'device_type', 'name', 'description', 'device', 'columns', 'params'}, where
    params maps each parameter to its shown values per column (default/current/next)."""
    result = {"device_type": None, "name": None, "description": None, "device": None, "columns": [], "params": {}}
    lines = text.splitlines()
    header_at = None
    for i, line in enumerate(lines):
        for label, key in (("Device type:", "device_type"), ("Name:", "name"),
                           ("Description:", "description"), ("Device:", "device")):
            if line.startswith(label) and result[key] is None:
                result[key] = line[len(label):].strip()
        if line.startswith("Configurations:"):
            header = line[len("Configurations:"):]
            result["columns"] = [COLUMN_NAMES[c] for c in re.findall(r"Default|Current|Next Boot|New", header)]
            header_at = i
            break
    if header_at is None:
        return result
    if not result["columns"]:
        result["columns"] = ["next"]  # abridged header: a single value column
    result["params"] = parse_rows(lines[header_at + 1:], result["columns"])
    return result


def render_value(value):
    """The value as given on the ``set`` command line."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def value_matches(wanted, shown):
    """Does the shown value (``True(1)``, ``ETH(2)``, ``8``) equal the wanted one
    (True, 'ETH', 2, '8')?"""
    parsed = parse_value(shown)
    if isinstance(wanted, bool):
        if parsed["num"] is not None:
            return parsed["num"] == int(wanted)
        return parsed["text"].lower() == str(wanted).lower()
    if isinstance(wanted, int):
        return parsed["num"] == wanted
    text = str(wanted).strip()
    if parsed["text"].lower() == text.lower():
        return True
    if re.match(r"^-?\d+$", text) and parsed["num"] is not None:
        return parsed["num"] == int(text)
    if text.lower() in ("true", "false") and parsed["num"] is not None:
        return parsed["num"] == (1 if text.lower() == "true" else 0)
    return False


def classify_failure(output, lockdown_mode):
    """Error kind and message from a failed run's output (``-E- ...`` lines)."""
    errors = [line[3:].strip() for line in output.splitlines() if line.startswith("-E-")]
    first = errors[0] if errors else output.strip().splitlines()[-1] if output.strip() else "no output"
    if "Failed to find Param" in first or "was not found" in first:
        return "unknown_parameter", first
    if "value is larger than maximum allowed" in first:
        return "above_maximum", first
    if "Failed to open the device" in first or "Failed to identify the device" in first or "Cannot open Device" in first:
        if lockdown_mode in ("integrity", "confidentiality"):
            return "lockdown", first
        return "device_not_found", first
    return "failed", first


def lockdown_mode(text):
    """Active mode of ``/sys/kernel/security/lockdown`` (``none [integrity] confidentiality``)."""
    match = re.search(r"\[(\w+)\]", text or "")
    return match.group(1) if match else None


def is_connectx_pf(dev):
    """A ConnectX physical function (Ethernet or InfiniBand) of the host model: what the
    firmware tools configure."""
    return (dev.get("vendor_id") == pci_ids.MELLANOX and not dev.get("physfn") and not dev.get("is_bridge")
            and str(dev.get("class") or "").startswith(("0x02", "0x0c06")))


def tool_names(tool):
    """The tools to look for: ``auto`` prefers mlxconfig (NVIDIA MFT), then mstconfig (mstflint)."""
    return list(TOOLS) if tool == "auto" else [tool]


def find_tool(host, tool):
    """Path of the first of :func:`tool_names` on the host's PATH, or None."""
    for name in tool_names(tool):
        path = host.commands.which(name)
        if path:
            return path
    return None


# NUM_OF_VFS is a 16-bit field of the firmware's nv_global_pci_conf (mstflint,
# mlxconfig/mlxconfig_dbs/mlxconfig_host.db, param total_vfs), as the PCIe SR-IOV TotalVFs is.
# The card's own maximum (nv_global_pci_cap.max_vfs_per_pf) is not in the query output, nor in
# sysfs (sriov_totalvfs is the NUM_OF_VFS set, not what the card allows:
# sriov-network-device-plugin#536): mlxconfig checks it
# before it writes anything (TLVConf::checkRules, mlxcfg_tlv.cpp) and the set fails with
# "Parameter NUM_OF_VFS' value is larger than maximum allowed N", which above_maximum reports.
MAX_VFS = 0xFFFF
MAX_ALLOWED_RE = re.compile(r"Parameter (\w+)'? value is larger than maximum allowed (\d+)")
SET_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:-]+\Z")


def check_values(wanted):
    """The firmware values as ``set`` gets them, before any set: one word each (``8``, ``True``,
    ``ETH``), NUM_OF_VFS a whole number from 0 to MAX_VFS."""
    for key, value in sorted(wanted.items()):
        shown = render_value(value)
        if isinstance(value, float) or not SET_VALUE_RE.match(shown):
            raise InputError("firmware.%s: %r is not a value mlxconfig sets (a number, True/False or a name such as "
                             "ETH)" % (key, value))
    if "NUM_OF_VFS" in wanted:
        value = wanted["NUM_OF_VFS"]
        text = render_value(value)
        if isinstance(value, bool) or not re.match(r"^[0-9]+\Z", text) or int(text) > MAX_VFS:
            raise InputError("firmware.NUM_OF_VFS: %r is not a VF count: give a whole number from 0 to %d (the width "
                             "of the firmware's NUM_OF_VFS field; the card's own maximum, which the query does not "
                             "print, is checked by mlxconfig at the set)" % (value, MAX_VFS))


class FirmwareConfig:
    """Query and set ConnectX firmware parameters with ``tool_path`` on the host: commands
    through ``host.commands`` (a non-zero exit is classified, not raised), the kernel's
    lockdown state through ``host.fs``."""

    def __init__(self, tool_path, device, host):
        self.tool = tool_path
        self.device = device
        self.host = host

    def run(self, argv):
        return self.host.commands.run(argv, check=False)

    def _lockdown(self):
        return lockdown_mode(self.host.fs.read(LOCKDOWN_PATH))

    def _fail(self, argv, rc, out, err):
        output = "\n".join(x for x in (out, err) if x)
        kind, detail = classify_failure(output, self._lockdown())
        messages = {
            "device_not_found": "%s cannot open device %s (%s): check the PCI address of the ConnectX PF "
                                "(lspci -d 15b3:) or start mst for /dev/mst paths" % (self.tool, self.device, detail),
            "lockdown": "%s cannot access device %s (%s): the kernel is in lockdown (Secure Boot), which forbids "
                        "direct PCI access; use an mstflint built with kernel access, or change the firmware "
                        "settings with Secure Boot off" % (self.tool, self.device, detail),
            "unknown_parameter": "the firmware of %s does not know a parameter (%s): check the names in firmware "
                                 "against '%s -d %s -e q'" % (self.device, detail, self.tool, self.device),
            "failed": "%s failed (rc=%s): %s" % (" ".join(argv), rc, detail),
        }
        if kind == "above_maximum":
            found = MAX_ALLOWED_RE.search(detail)
            name, most = found.groups() if found else ("a parameter", "its maximum")
            messages[kind] = ("firmware.%s: the firmware of %s allows at most %s (%s refused the set before writing "
                              "anything: %s): give at most %s" % (name, self.device, most, self.tool, detail, most))
        raise MlxconfigError(kind, messages[kind], output)

    def query(self):
        """The device's parameters (default, current, next), read once per module run until a
        set or a reset (:meth:`Host.read_once`)."""
        argv = [self.tool, "-d", self.device, "-e", "q"]
        rc, out, err = self.host.read_once(argv, check=False)
        if rc != 0:
            self._fail(argv, rc, out, err)
        parsed = parse_query(out)
        if not parsed["params"]:
            raise MlxconfigError("failed", "%s printed no parameters for %s" % (" ".join(argv), self.device), out)
        return parsed

    def plan(self, parsed, wanted):
        """Parameters to set: those whose Next Boot value is not the wanted value."""
        unknown = sorted(k for k in wanted if k not in parsed["params"])
        if unknown:
            raise InputError("firmware: the firmware of %s does not know %s; parameters it knows include %s"
                             % (self.device, ", ".join(unknown), ", ".join(sorted(parsed["params"])[:40])))
        check_values(wanted)
        changes = {}
        for key, value in wanted.items():
            if not value_matches(value, parsed["params"][key]["next"]):
                changes[key] = value
        return changes

    def set(self, changes):
        argv = [self.tool, "-y", "-d", self.device, "set"] + ["%s=%s" % (k, render_value(v)) for k, v in sorted(changes.items())]
        self.host.forget_reads()
        rc, out, err = self.run(argv)
        if rc != 0:
            self._fail(argv, rc, out, err)
        return out


def report(parsed, wanted=None):
    """Per-parameter default/current/next (as shown) for the wanted parameters (all when None)."""
    keys = list(wanted) if wanted else list(parsed["params"])
    result = {}
    for key in keys:
        entry = parsed["params"].get(key)
        if entry is None:
            continue
        result[key] = {"default": entry.get("default"), "current": entry.get("current"), "next": entry.get("next")}
    return result


def pending(parsed):
    """Parameters whose Next Boot value differs from Current (loaded at the next power cycle).
    A value shown as ``N/A`` (the firmware could not read it) says nothing is pending."""
    return sorted(k for k, v in parsed["params"].items()
                  if v.get("current") not in (None, NOT_READ) and v.get("next") not in (None, NOT_READ) and v["current"] != v["next"])


# -- the boot stage: SR-IOV in the firmware, applied by a firmware reset or a cold boot ---------
# The reset tool of each package: mlxfwreset (NVIDIA MFT) and mstfwreset (mstflint), both
# "mlxfwreset -d DEV [--level 0|3|4] [-y] reset"; level 3 is "Driver restart and PCI reset"
# (MFT documentation, mlxfwreset; mstflint's mstfwreset(1)). Their output is not parsed: the
# exit status says whether the reset ran, and a query afterwards whether Next became Current.
RESET_TOOLS = {"mlxconfig": "mlxfwreset", "mstconfig": "mstfwreset"}
SRIOV_PARAMS = ("SRIOV_EN", "NUM_OF_VFS")
LINK_TYPE_PARAMS = ("LINK_TYPE_P1", "LINK_TYPE_P2")
LINK_TYPE_ETH = "ETH"
# PCIe Address Translation Services of the card, for GPUDirect RDMA inside VMs: NVIDIA AI Enterprise,
# "Optimizing VM Configuration for AI Inference", appendix "ATS and ACS configuration" (HGX H200 and
# B300 editions): ``mlxconfig -d DEV set ATS_ENABLED=true``, shown as ``ATS_ENABLED False(0)`` /
# ``True(1)`` in their captures (tests/fixtures/mellanox/mlxconfig-q_ATS_ENABLED_*), loaded at
# the next firmware load like SR-IOV.
ATS_PARAM = "ATS_ENABLED"


def ats_firmware(params, pf):
    """``{ATS_ENABLED: True}`` for a PF whose VFs go to GPU tenants, from its query; InputError
    naming the PF when its firmware has no such parameter (cards before ConnectX-6 Dx)."""
    if ATS_PARAM not in (params or {}):
        raise InputError("firmware.ats_pfs: the firmware of %s does not offer %s (ATS for GPUDirect RDMA in VMs): leave %s out "
                         "of host_boot_firmware_ats, or update the card's firmware (check '<tool> -d %s -e q')"
                         % (pf, ATS_PARAM, pf, pf))
    return {ATS_PARAM: True}


def firmware_targets(topology, sriov_pfs):
    """``[{pf, num_vfs}]``: the ConnectX PFs of ``gpuvirt_sriov_pfs`` that want VFs (the
    firmware must allow them before ``sriov_numvfs`` can). Other PFs are not the tools' business."""
    pci = topology.get("pci_devices") or {}
    targets = []
    for pf, count in sorted(wanted_vfs(topology, sriov_pfs).items()):
        dev = pci.get(pf)
        if dev and count > 0 and is_connectx_pf(dev):
            targets.append({"pf": pf, "num_vfs": count})
    return targets


def pick_tools(paths):
    """From the paths ``command -v mlxconfig mstconfig mlxfwreset mstfwreset`` printed: the
    configuration tool (``config``, mlxconfig first) and the reset tool of the same package
    (else the other one), each a path or None."""
    found = {}
    for path in paths or []:
        path = str(path).strip()
        name = path.rsplit("/", 1)[-1]
        if path.startswith("/") and name not in found:
            found[name] = path
    config = next((found[t] for t in TOOLS if t in found), None)
    reset = None
    if config:
        own = RESET_TOOLS[config.rsplit("/", 1)[-1]]
        reset = found.get(own) or next((found[t] for t in RESET_TOOLS.values() if t in found), None)
    return {"config": config, "reset": reset}


def sriov_firmware(params, num_vfs):
    """The firmware settings SR-IOV with ``num_vfs`` VFs needs, from a query (``params``: name
    -> {default, current, next}, as mlx_rocev2 returns ``firmware``): SRIOV_EN on, NUM_OF_VFS at
    least ``num_vfs`` (a larger value already set is kept), and on VPI cards (those with
    LINK_TYPE_P1/P2) the Ethernet link type RoCE needs."""
    missing = [p for p in SRIOV_PARAMS if p not in (params or {})]
    if missing:
        raise InputError("firmware: the firmware does not offer %s: it cannot do SR-IOV with this tool "
                         "(check '<tool> -d DEV -e q')" % ", ".join(missing))
    wanted = {"SRIOV_EN": True}
    nxt = parse_value(params["NUM_OF_VFS"].get("next") or "")["num"]
    wanted["NUM_OF_VFS"] = num_vfs if nxt is None or nxt < num_vfs else nxt
    for name in LINK_TYPE_PARAMS:
        if name in params:
            wanted[name] = LINK_TYPE_ETH
    return wanted


def reset_devices(pending_pfs):
    """One PF per card among ``pending_pfs``: a reset of one function resets the whole card."""
    cards = {}
    for pf in sorted(pending_pfs or []):
        cards.setdefault(pf.rsplit(".", 1)[0], pf)
    return sorted(cards.values())


def firmware_outcome(set_results, reset_rc=None, after=None, reset_tool=None, reset_enabled=True):
    """The boot stage's verdict on the ConnectX firmware, JSON-ready.

    ``set_results``: {pf: pending parameters after the set}; ``reset_rc``: {pf: exit status of the
    reset} for the cards reset (a card's other functions share its answer); ``after``: {pf:
    pending parameters read after the resets}. Returns ``pending`` (PFs whose firmware is not yet
    loaded), ``cold_boot`` (pending PFs for which the role can do nothing more: the reset ran and
    did not load it, or no reset is possible), ``reset`` (PFs loaded by a reset), ``messages``
    and ``reset_devices`` (one PF per card still to reset)."""
    reset_rc = reset_rc or {}
    after = after or {}
    pending, cold, done, messages = [], [], [], []
    for pf in sorted(set_results):
        card = pf.rsplit(".", 1)[0]
        rc = next((code for dev, code in reset_rc.items() if dev.rsplit(".", 1)[0] == card), None)
        still = after.get(pf, set_results[pf]) if rc is not None else set_results[pf]
        if not still:
            if set_results[pf]:
                done.append(pf)
            continue
        pending.append(pf)
        if rc is not None or not reset_tool or not reset_enabled:
            cold.append(pf)
            why = ("the firmware reset failed (exit status %s)" % rc if rc not in (None, 0)
                   else "the firmware reset did not load it" if rc == 0
                   else "no mlxfwreset/mstfwreset on the host" if not reset_tool
                   else "firmware resets are turned off (host_boot_firmware_reset)")
            messages.append("%s: %s is set for the next power cycle and %s: a COLD BOOT (power off, then on) is "
                            "needed; a warm reboot does not load it" % (pf, ", ".join(sorted(still)), why))
        else:
            messages.append("%s: %s is set for the next firmware reset; the boot stage runs it before its reboot "
                            "when host_boot_reboot_ok allows" % (pf, ", ".join(sorted(still))))
    return {"pending": pending, "cold_boot": cold, "reset": done, "messages": messages,
            "reset_devices": reset_devices(pf for pf in pending if pf not in cold)}
