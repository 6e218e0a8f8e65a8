# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest stage's decisions (role guest_rdma, docs/rdma_nccl.md), for its actions:
``guest_rdma_calls`` (action rdma_calls: the role's inputs checked and mapped to the options of its
``mlx_rocev2`` call), ``netdev_by_mac`` (action rdma_netdev: the netdev of the VF's MAC in gathered
facts), ``guest_verbs_problem`` (action rdma_verbs: what keeps the verbs library from the RDMA
device), ``rdma_fleet`` and ``rdma_nccl_write`` (action rdma_fleet: the GID index compared across
the tenant guests of a play, and where the NCCL file or the hosts block must still be written, with
the options of that ``nccl_env`` call). Pure: a bad input raises an :class:`RdmaInputError` whose
message names it."""

from __future__ import absolute_import, division, print_function

import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.hosts_block import block_lines
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type


class RdmaInputError(ValueError):
    """An input of the guest stage's decisions that they cannot use: its message names it and the fix."""


HINT = ("Set it right on those hosts (address order decides GID order), or use gid_policy per_host, "
        "or gid_index auto (NCCL >= 2.21).")

# the optional NCCL settings: left out when unset, never passed as null or ""
NCCL_OPTIONAL = ("socket_ifname", "net_gdr_level", "ib_pci_relaxed_ordering", "addr_range", "nccl_version", "topo_file", "topo_links")


def _flag(inputs, name):
    # the role's argument spec has checked the type; Jinja may hand a bool over as text
    return boolean(inputs.get(name), strict=False)


def guest_rdma_calls(inputs, family_packages=None):
    """The guest_rdma role's inputs (``guest_rdma_*`` without the prefix; their types and choices
    checked by the role's argument spec) checked together, and
    the options of its one ``mlx_rocev2`` call: ``rocev2`` (the device named, else the VF's MAC
    to find it by; the packages per OS family when the role installs; ``nccl_env``: the options
    of the NCCL file, decided but not written) and ``soft_roce``. ``family_packages``: the RDMA
    packages per OS family, used unless ``packages`` names some for any family."""
    if not isinstance(inputs, dict):
        raise RdmaInputError("guest_rdma: expected the role's inputs as a dict, got %s" % type(inputs).__name__)
    device = _text(inputs.get("device")).strip()
    vf_mac = _text(inputs.get("vf_mac")).strip()
    netdev = _text(inputs.get("netdev")).strip()
    soft_roce = _flag(inputs, "soft_roce")
    gid_index = _text(inputs.get("gid_index")).strip()
    problems = []
    if not device and not vf_mac:
        problems.append("set guest_rdma_device (gpuvirt_rdma.device, e.g. mlx5_0 or rxe0) or guest_rdma_vf_mac (the MAC "
                        "the GPU host set on the tenant's VF; tenant_guests gives it as gpuvirt_guest_vf_mac)")
    if soft_roce and not device:
        problems.append("soft-RoCE (guest_rdma_soft_roce) needs guest_rdma_device, the name of the rxe device to create")
    if soft_roce and not netdev and not vf_mac:
        problems.append("soft-RoCE needs guest_rdma_netdev or guest_rdma_vf_mac, the netdev it runs on")
    if gid_index not in ("discover", "auto") and not re.match(r"^[0-9]+$", gid_index):
        problems.append("guest_rdma_gid_index must be discover, auto or an integer, got %r" % inputs.get("gid_index"))
    try:
        port = int(inputs.get("port"))
    except (TypeError, ValueError):
        port = None
    if port is None or port < 1:
        problems.append("guest_rdma_port must be a port number (1 on most cards), got %r" % inputs.get("port"))
    if problems:
        raise RdmaInputError("guest_rdma: " + "; ".join(problems) + ".")
    nccl = {
        "path": inputs.get("nccl_conf_path"),
        # empty when the device is to be found by the VF's MAC: the module names the one it found
        "ib_hca": ["%s:%d" % (device, port)] if device else [],
        "gid_index": gid_index,
        "extra": inputs.get("nccl_extra") or {},
        "hosts_path": inputs.get("hosts_file"),
    }
    for name in NCCL_OPTIONAL:
        if inputs.get(name) not in (None, ""):
            nccl[name] = inputs[name]
    if _flag(inputs, "pin_hosts"):
        # [] has the hosts block read only (its lines come from the fleet); without it the file is not read
        nccl["hosts_entries"] = []
    rocev2 = {"port": port, "default_roce_mode": inputs.get("default_roce_mode"), "persist": _flag(inputs, "persist"),
              "nccl_env_write": False, "nccl_env": nccl}
    if device:
        rocev2["rdma_device"] = device
    else:
        rocev2["netdev_mac"] = vf_mac
    if _flag(inputs, "install"):
        named = inputs.get("packages") or []
        rocev2["packages"] = {"default": list(named)} if named else dict(family_packages or {})
    return {"rocev2": rocev2, "soft_roce": soft_roce}


def rdma_fleet(hosts, hostvars, result_var, gid_index):
    """The fleet's GID index comparison from each host's mlx_rocev2 result (``result_var`` in
    ``hostvars``; hosts without one are left out): ``rows`` (host, device, port, index, gid,
    type, ipv4), ``expected`` (the given integer ``gid_index``, else the index most hosts have,
    ties to the first host), ``outliers`` (the hosts whose index differs) and ``report`` (the
    uniform policy's failure message). Hosts are taken in name order, not in ``hosts`` order: a
    play's host order is the order its hosts joined a group (``add_host``, ``group_by``), which
    is the order their tasks finished, so the hosts block and a tie would change between runs."""
    readings = [_reading(host, (hostvars.get(host) or {}).get(result_var)) for host in sorted(hosts)]
    readings = [reading for reading in readings if reading is not None]
    rows = [_row(reading) for reading in readings]
    expected = _expected(rows, gid_index)
    # the index compared with, as the role's Jinja compared it (``expected | int``: none is 0)
    target = 0 if expected is None else expected
    outliers = [row["host"] for row in rows if row["index"] != target]
    tables = dict((reading["host"], reading["table"]) for reading in readings)
    return {"rows": rows, "expected": expected, "outliers": outliers,
            "report": _report(rows, expected, target, outliers, tables)}


def _reading(host, result):
    """host, device, port, index and the port's GID table from one mlx_rocev2 result."""
    if not isinstance(result, dict) or "gid_table" not in result:
        return None
    device, port = result["rdma_device"], int(result["port"])
    index = ((result.get("roce_v2_ipv4_index") or {}).get(device) or {}).get(str(port))
    return {"host": host, "device": device, "port": port, "index": index,
            "table": [row for row in result["gid_table"] if row.get("port") == port]}


def _row(reading):
    hit = next((row for row in reading["table"] if row["index"] == reading["index"]), None) \
        if reading["index"] is not None else None
    row = dict((key, reading[key]) for key in ("host", "device", "port", "index"))
    for key in ("gid", "type", "ipv4"):
        row[key] = hit[key] if hit else None
    return row


def _expected(rows, gid_index):
    if re.match(r"^[0-9]+$", str(gid_index)):
        return int(gid_index)
    indexes = [row["index"] for row in rows if row["index"] is not None]
    # max keeps the first of equal counts: a tie goes to the first host's index
    return max(indexes, key=indexes.count) if indexes else None


def _text(value):
    """A value as the role's Jinja printed it (ansible-core 2.19: none prints as nothing)."""
    return "" if value is None else str(value)


def _report(rows, expected, target, outliers, tables):
    lines = ["gid_policy uniform: the RoCE v2 + IPv4 GID is not at index %s on %s."
             % (_text(expected), ", ".join(outliers)), HINT, "host -> index -> GID -> type"]
    for row in rows:
        differs = row["index"] != target
        lines.append("%s (%s:%s) -> %s -> %s (%s) -> %s%s" % (
            row["host"], row["device"], row["port"], "none" if row["index"] is None else row["index"],
            _text(row["gid"]), _text(row["ipv4"]), _text(row["type"]),
            "   <- differs from index %s" % (expected,) if differs else ""))
        if differs:
            at = next((entry for entry in tables[row["host"]] if entry["index"] == target), None)
            holds = ("%s (%s) -> %s" % (at["gid"], at["ipv4"] or "no IPv4", at["type"])) if at else "no GID"
            lines.append("  %s index %s holds %s" % (row["host"], _text(expected), holds))
    return "\n".join(lines) + "\n"


def rdma_nccl_write(fleet, planned, gid_index, policy, hosts_suffix, options=None, first_result=None):
    """What this guest's nccl_env call writes after the fleet comparison, and whether it must
    run at all: ``gid_index`` (C(auto), the fleet's index under the uniform policy, else the
    given one), ``hosts_entries`` (``<ipv4> <host><suffix>`` for every row with an IPv4 GID,
    in row order: host name order) and ``reasons`` / ``pending``: what differs from ``planned``, the guest's own
    decision without writing (mlx_rocev2's ``nccl_env`` result with ``nccl_env_write: false``).
    Nothing differs on a converged guest, whose stage then costs that one call.
    ``options``: the ``nccl_env`` options of the first call (``guest_rdma_calls``); with them,
    ``options`` of the result are the nccl_env call's: the fleet's index, the hosts block's
    entries where the first call read the block, and ``ib_hca`` of the device and port of
    ``first_result`` (the first call's ``mlx_rocev2`` result) where none was named."""
    if not isinstance(fleet, dict) or "rows" not in fleet:
        raise RdmaInputError("fleet: expected the fleet's comparison (rdma_fleet's result), got %s" % type(fleet).__name__)
    planned = planned if isinstance(planned, dict) else {}
    if str(gid_index) == "auto":
        index = "auto"
    elif policy == "uniform":
        index = _text(fleet["expected"])
    else:
        index = str(gid_index)
    entries = [{"ip": row["ipv4"], "names": [row["host"] + hosts_suffix]} for row in fleet["rows"] if row["ipv4"]]
    reasons = []
    if "error" in planned or "gid_index" not in planned:
        reasons.append("nccl_env would fail: %s" % planned.get("error", "no decision of the guest's own"))
    else:
        # discover resolves from the guest's own table, as it did in the guest's decision
        if index != "discover" and str(planned["gid_index"]) != index:
            reasons.append("the fleet's gid_index %s is not the guest's %s" % (index, planned["gid_index"]))
        if planned.get("conf_differs"):
            reasons.append("%s differs" % planned.get("path"))
        if planned.get("topo_differs"):
            reasons.append("the NCCL topology file %s differs" % (planned.get("topology") or {}).get("path"))
        if "hosts_found" in planned:
            found, wanted = planned["hosts_found"], _lines(entries)
            if found is None or wanted is None or found != wanted:
                reasons.append("the block in %s differs" % planned.get("hosts_path"))
    write = {"gid_index": index, "hosts_entries": entries, "reasons": reasons, "pending": bool(reasons)}
    if options is not None:
        call = dict(options, gid_index=index)
        if "hosts_entries" in options:
            call["hosts_entries"] = entries
        first = first_result if isinstance(first_result, dict) else {}
        if not call.get("ib_hca") and first.get("rdma_device"):
            call["ib_hca"] = ["%s:%s" % (first["rdma_device"], first.get("port") or 1)]
        write["options"] = call
    return write


# The userspace provider that lets libibverbs open a kernel RDMA device, per OS family
VERBS_PROVIDERS = {"Debian": "ibverbs-providers", "RedHat": "libibverbs"}


def guest_verbs_problem(found, installed=None, recheck=None):
    """What keeps the verbs library from the guest's RDMA device, or "" when it sees it: from the
    role's ``mlx_rocev2`` result (``found``: its ``verbs``, ``rdma_device`` and ``packages``), the
    role's package install (``installed``: its registered result, which may have failed: a tenant
    without a way to a package mirror) and, after an install, the ``mlx_rocev2`` result read again
    (``recheck``). The kernel can hold a device that verbs do not see (no userspace provider):
    NCCL and ibv_* programs then find no device while ``rdma link`` shows it."""
    for what, value in (("found (the mlx_rocev2 result)", found), ("installed (the install result)", installed),
                        ("recheck (the second read)", recheck)):
        if value is not None and not isinstance(value, dict):
            raise RdmaInputError("%s must be a dict, got %s" % (what, type(value).__name__))
    if found is None:
        raise RdmaInputError("found (the mlx_rocev2 result) must be a dict, got NoneType")
    latest = recheck if recheck and recheck.get("verbs") else found
    verbs = latest.get("verbs") or {}
    device = latest.get("rdma_device") or "the RDMA device"
    packages = found.get("packages") or {}
    family = packages.get("family") or "unknown"
    provider = VERBS_PROVIDERS.get(family, "the verbs provider of the device's driver")
    if verbs.get("seen"):
        return ""
    failed = ""
    if installed and installed.get("failed"):
        reason = (_text(installed.get("msg")).strip().splitlines() or ["no message"])[-1]
        failed = " Installing %s failed here: %s." % (", ".join(packages.get("missing") or []), reason)
    if verbs.get("tool") is None:
        return ("cannot tell whether verbs see %s: ibv_devices is not installed (Debian ibverbs-utils, RHEL libibverbs-utils).%s "
                "Install it, or give the guest a way to a package mirror and run again." % (device, failed))
    return ("verbs see no %s (ibv_devices lists %s) though the kernel holds it: the userspace provider is missing. Install %s "
            "(%s) in the guest's image or give the guest a way to a package mirror, and run again.%s"
            % (device, ", ".join(verbs.get("devices") or []) or "none", provider, family, failed))


def registered_verbs_problem(found, installed=None, reread=None):
    """:func:`guest_verbs_problem` from the role's registered results as they stand: the install's
    only where it changed or failed (a skipped or converged install says nothing), the second read
    only where it ran (not skipped)."""
    if installed is not None and not isinstance(installed, dict):
        raise RdmaInputError("installed (the install result) must be a dict, got %s" % type(installed).__name__)
    if reread is not None and not isinstance(reread, dict):
        raise RdmaInputError("recheck (the second read) must be a dict, got %s" % type(reread).__name__)
    installed = installed if installed and (installed.get("changed") or installed.get("failed")) else None
    reread = reread if reread is not None and not reread.get("skipped") else None
    return guest_verbs_problem(found, installed, reread)


def _lines(entries):
    """The block's lines nccl_env writes for ``entries``; None for entries it refuses (the call
    that writes them says why)."""
    try:
        return block_lines(entries)
    except InputError:
        return None


def netdev_by_mac(facts, mac):
    """The netdev whose MAC is ``mac`` in gathered facts (the ``network`` subset: ``interfaces``
    and each ``<name>.macaddress``); a VLAN on the VF shares its MAC, so a name with a dot comes
    last. An error naming the MACs there when none carries it."""
    if not isinstance(facts, dict):
        raise RdmaInputError("facts: expected ansible_facts (gathered with the network subset), got %s" % type(facts).__name__)
    want = str(mac or "").lower()
    seen = {}
    for name in facts.get("interfaces") or []:
        entry = facts.get(name) or {}
        seen[name] = str(entry.get("macaddress") or "").lower()
    found = sorted((n for n, m in seen.items() if m == want), key=lambda n: ("." in n, n))
    if not found:
        raise RdmaInputError("no netdev carries %s (%s); is the VF passed through and its "
                             "driver loaded?" % (want, ", ".join("%s %s" % i for i in sorted(seen.items())) or "no netdevs"))
    return found[0]
