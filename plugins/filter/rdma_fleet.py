# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters ``gpuvirt.tenancy.rdma_fleet`` and ``gpuvirt.tenancy.rdma_nccl_write``: the GID index
compared across the tenant guests of a play, and where the NCCL file or the hosts block must
still be written (role guest_rdma, docs/rdma_nccl.md)."""

from __future__ import absolute_import, division, print_function

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.

HINT = ("Set it right on those hosts (address order decides GID order), or use gid_policy per_host, "
        "or gid_index auto (NCCL >= 2.21).")


def rdma_fleet(hosts, hostvars, result_var, gid_index):
    """The fleet's GID index comparison from each host's mlx_rocev2 result (``result_var`` in
    ``hostvars``; hosts without one are left out): ``rows`` (host, device, port, index, gid,
    type, ipv4), ``expected`` (the given integer ``gid_index``, else the index most hosts have,
    ties to the first in ``hosts`` order), ``outliers`` (the hosts whose index differs) and
    ``report`` (the uniform policy's failure message)."""
    readings = [_reading(host, (hostvars.get(host) or {}).get(result_var)) for host in hosts]
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


def rdma_nccl_write(fleet, planned, gid_index, policy, hosts_suffix):
    """What this guest's nccl_env call writes after the fleet comparison, and whether it must
    run at all: ``gid_index`` (C(auto), the fleet's index under the uniform policy, else the
    given one), ``hosts_entries`` (``<ipv4> <host><suffix>`` for every row with an IPv4 GID,
    in row order) and ``reasons`` / ``pending``: what differs from ``planned``, the guest's own
    decision without writing (mlx_rocev2's ``nccl_env`` result with ``nccl_env_write: false``).
    Nothing differs on a converged guest, whose stage then costs that one call."""
    if not isinstance(fleet, dict) or "rows" not in fleet:
        raise AnsibleFilterError("gpuvirt.tenancy.rdma_nccl_write: the input is the result of gpuvirt.tenancy.rdma_fleet")
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
        if "hosts_found" in planned:
            found, wanted = planned["hosts_found"], _lines(entries)
            if found is None or wanted is None or found != wanted:
                reasons.append("the block in %s differs" % planned.get("hosts_path"))
    return {"gid_index": index, "hosts_entries": entries, "reasons": reasons, "pending": bool(reasons)}


def _lines(entries):
    """The block's lines nccl_env writes for ``entries``; None for entries it refuses (the call
    that writes them says why)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.hosts_block import block_lines  # pylint: disable=import-outside-toplevel
    try:
        return block_lines(entries)
    except InputError:
        return None


class FilterModule:
    """RDMA fleet filters."""

    def filters(self):
        return {"rdma_fleet": rdma_fleet, "rdma_nccl_write": rdma_nccl_write}
