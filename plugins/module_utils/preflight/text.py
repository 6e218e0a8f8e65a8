# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight report (module preflight) as text for a person: the table of one host, the line of
a fleet summary, and the lines that stop a rollout."""

from __future__ import absolute_import, division, print_function

import re
import textwrap

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist

__metaclass__ = type

# A line a person reads in a terminal: longer text is wrapped at a clause (the table) or cut at one
# (a one-line summary; the report has it whole).
LINE_CHARS = 160
# The narrowest room a wrapped column gets, whatever the columns before it take.
MIN_WRAP = 60


def wrap(text, width=LINE_CHARS, indent="    "):
    """``text`` as lines of at most ``width`` characters, broken after a clause (``; ``, then
    ``, ``), else at a space; the lines after the first start with ``indent``."""
    room = max(width - len(indent), MIN_WRAP // 2)
    pieces = re.split(r"(; |, )", text)
    tokens = []
    for clause in (piece + sep for piece, sep in zip(pieces[::2], pieces[1::2] + [""])):
        if len(clause.rstrip()) <= room:
            tokens.append(clause)
            continue
        # a clause longer than a line: at its spaces (a word longer than a line is cut)
        parts = textwrap.wrap(clause, width=room, break_on_hyphens=False)
        tokens += [part + " " for part in parts[:-1]] + [parts[-1] + (" " if clause.endswith(" ") else "")]
    lines, line = [], ""
    for token in tokens:
        if line.strip() and len(line) + len(token.rstrip()) > width:
            lines.append(line.rstrip())
            line = indent
        line += token
    lines.append(line.rstrip())
    return lines


def _table(headers, rows, wrap_last=False):
    """Columns padded to their widest cell; with ``wrap_last``, the last column's cells wrapped
    (:func:`wrap`) so that no line passes :data:`LINE_CHARS`, each continuation under the column."""
    rows = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lead = sum(widths[:-1]) + 2 * (len(headers) - 1)
    for row in rows:
        head = "  ".join(v.ljust(w) for v, w in zip(row[:-1], widths[:-1])) + "  " if len(row) > 1 else ""
        cells = wrap(row[-1], width=max(LINE_CHARS - lead, MIN_WRAP), indent="") if wrap_last else [row[-1]]
        lines.append((head + cells[0]).rstrip())
        lines += [(" " * lead + cell).rstrip() for cell in cells[1:]]
    return lines


def _items(items, bullet="  - "):
    """Each item on its own bullet, wrapped, its continuation lines indented under its text."""
    lines = []
    for item in items:
        lines += wrap(bullet + item, indent=" " * len(bullet))
    return lines


def _yes_no(value):
    return "unknown" if value is None else ("yes" if value else "NO")


def port_change(change):
    """``0000:19:00.0 port 1 (mlx5_0, ibp0): IB -> ETH`` (port_modes.plan's change)."""
    return "%s %s: %s -> %s" % (change["pf"], change["port"], change["from"], change["to"])


MORE = " ... (whole in the report)"


def shorten(text, limit=LINE_CHARS, more=MORE):
    """``text`` cut at its last clause (``; `` or ``, ``; else at a space) so that, with ``more``
    (what says so), it holds ``limit`` characters."""
    if len(text) <= limit:
        return text
    room = limit - len(more)
    cut = max(text.rfind("; ", 0, room), text.rfind(", ", 0, room))
    if cut <= 0:  # no clause ends in the room: the last word that does
        cut = text.rfind(" ", 0, room)
    return text[:cut if cut > 0 else room] + more


def batches_around(batch, play_hosts):
    """(hosts of the batches before ``batch``, hosts of those after it) in ``play_hosts``, the play's
    hosts in rollout order; ([], []) when the batch is not among them."""
    if not batch or batch[0] not in play_hosts or batch[-1] not in play_hosts:
        return [], []
    return play_hosts[:play_hosts.index(batch[0])], play_hosts[play_hosts.index(batch[-1]) + 1:]


def stop_lines(report, batch, earlier, later, report_path=None):
    """What stops a rollout at a batch, a few lines for a person: each failed check on its line,
    each tenant that does not fit on its own (reasons cut to a line: the report has them whole),
    what to fix (whole), the batches done and not started, and where the report is."""
    host = report.get("host") or "host"
    lines = ["ROLLOUT STOPPED at the batch %s: preflight failed on %s" % (", ".join(batch), host)]
    plan = report.get("plan") or {}
    for check in report.get("checks") or []:
        if check["status"] != "fail":
            continue
        if check["name"] == "plan" and plan.get("unplaced"):
            lines += [shorten("  - tenant %s (%s) does not fit: %s" % (name, plan.get("tenants_from"), reason))
                      for name, reason in sorted(plan["unplaced"].items())]
        else:
            lines.append(shorten("  - %s: %s" % (check["name"], check["detail"])))
    lines += ["  fix: " + fix for fix in report.get("fixes") or []]
    lines.append("  earlier batches, done: %s; later batches, not started: %s"
                 % (", ".join(earlier) or "none", ", ".join(later) or "none"))
    if report_path:
        lines.append("  report: %s" % report_path)
    return lines


def summary_line(report, report_path=None):
    """One line per host for a fleet summary: the verdict, what failed or warns, how many items
    wait for the boot stage, and where the JSON report is; None (no report) says so."""
    if not report:
        return "NO REPORT (unreachable, or failed before its report)"
    parts = list(report.get("failures") or []) + list(report.get("warnings") or [])
    booted = len(report.get("boot_stage") or [])
    if booted:
        parts.append("%d item(s) the boot stage fixes (role host_boot)" % booted)
    if report.get("port_modes"):
        parts.append("link type changes: %s" % ", ".join(port_change(c) for c in report["port_modes"]))
    # each part cut to half a line, then the line to one (the report, and its table, have them whole)
    parts = [shorten(part, LINE_CHARS // 2, " ...") for part in parts]
    line = shorten("%s - %s" % (report["status"].upper(), "; ".join(parts) or "every check passed"))
    return line + (" (report: %s)" % report_path if report_path else "")


def partition_line(name, partition):
    """One tenant's Fabric Manager partition on an NVSwitch board, as the report says it."""
    gpus = ", ".join("%s (module %s)" % pair for pair in zip(partition["gpus"], partition.get("physical_ids") or ["?"] * len(partition["gpus"])))
    if partition.get("id") is None:
        return "%s NVSwitch partition unknown on the %s board, GPUs %s: %s" % (name, partition.get("board"), gpus, partition.get("why"))
    return ("%s NVSwitch partition %d of the %s board, GPUs %s: the Fabric Manager (in the service VM, gpuvirt_fabric_vm) must "
            "activate it before the tenant starts" % (name, partition["id"], partition.get("board"), gpus))


def render_table(report):
    """The report as text for a person: a header, the checks, then one table per area."""
    failed = len(report.get("failures") or [])
    warned = len(report.get("warnings") or [])
    booted = len(report.get("boot_stage") or [])
    lines = ["Preflight %s: %s (%d failed, %d warnings%s)" % (
        report.get("host") or "host", report["status"].upper(), failed, warned,
        ", %d for the boot stage" % booted if booted else ""), ""]
    lines += _table(["CHECK", "STATUS", "DETAIL"], [[c["name"], c["status"].upper(), c["detail"]] for c in report["checks"]],
                    wrap_last=True)
    iommu = report["iommu"]
    lines += [""] + wrap("IOMMU: present %s, enabled %s, ACPI table %s, units %d, groups %d, cmdline %s%s" % (
        _yes_no(iommu["present"]), _yes_no(iommu["enabled"]), iommu["firmware_table"] or "none", len(iommu["units"]),
        iommu["groups"], " ".join(iommu["cmdline_args"]) or "-",
        "; a virtual machine (%s)" % iommu["virtual_machine"] if iommu.get("virtual_machine") else ""))
    lines += [""] + _table(["GPU", "MODEL", "NODE", "GROUP", "DRIVER", "ISOLATED"],
                           [[g["address"], g["model"], g["numa_node"], g["iommu_group"], g["driver"], _yes_no(g["isolated"])]
                            for g in report["gpus"]] or [["none"] + [""] * 5])
    lines += [""] + _table(["NIC PF", "MODEL", "NODE", "NETDEVS", "TOTALVFS", "NUMVFS"],
                           [[n["address"], n["model"], n["numa_node"], ",".join(n["netdevs"]) or None, n["sriov_totalvfs"],
                             n["sriov_numvfs"]] for n in report["nics"]] or [["none"] + [""] * 5])
    lines += [""] + _table(["SR-IOV PF", "NODE", "TOTALVFS", "NUMVFS", "WANTED", "FIRMWARE", "STATUS"],
                           [[s["address"], s["numa_node"], s["sriov_totalvfs"], s["sriov_numvfs"], s["wanted_vfs"],
                             (s.get("firmware") or {}).get("detail") if s["connectx"] else "n/a (not ConnectX)", s["status"].upper()]
                            for s in report["sriov_pfs"]] or [["none"] + [""] * 6])
    if report["vfs"]:
        lines += [""] + _table(["VF", "PF", "NODE", "GROUP", "DRIVER", "ISOLATED"],
                               [[v["address"], v["pf"], v["numa_node"], v["iommu_group"], v["driver"], _yes_no(v["isolated"])]
                                for v in report["vfs"]])
    lines += [""] + _table(["NODE", "MEMORY_MB", "2M TOTAL/FREE", "1G TOTAL/FREE", "WANTED", "HUGEPAGES_MB", "HEADROOM_MB"],
                           [[n["node"], n["memory_mb"], "%s/%s" % (n["hugepages"]["2M"]["total"], n["hugepages"]["2M"]["free"]),
                             "%s/%s" % (n["hugepages"]["1G"]["total"], n["hugepages"]["1G"]["free"]),
                             " ".join("%sx%s" % (c, s) for s, c in sorted(n["wanted"].items()) if c) or None,
                             n["hugepages_mb_after"], n["headroom_mb"]] for n in report["numa_nodes"]])
    plan = report["plan"]
    rows = [[name, ",".join(map(str, p.get("numa_nodes") or [p["numa_node"]])), ",".join(p["gpus"]) or None, ",".join(p["vfs"]) or None,
             format_cpulist(p["cpus"]) or None,
             "%sx%s" % (p["hugepages"]["count"], p["hugepages"]["size"]) if p.get("hugepages") else None, "placed"]
            for name, p in sorted(plan.get("placements", {}).items())]
    unplaced = sorted((plan.get("unplaced") or {}).items())
    rows += [[name, None, None, None, None, None, "DOES NOT FIT (why: below)"] for name, _reason in unplaced]
    verdict = "fits" if plan.get("fits") else ("unknown" if plan.get("fits") is None else "DOES NOT FIT")
    lines += ["", "Tenant plan: %s" % verdict]
    if rows:
        lines += _table(["TENANT", "NODE", "GPUS", "VFS", "CPUS", "HUGEPAGES", "RESULT"], rows)
    # each tenant that does not fit, its reason said once, whole, over lines a terminal holds
    lines += _items("%s does not fit (%s): %s" % (name, plan.get("tenants_from") or "gpuvirt_tenants", reason)
                    for name, reason in unplaced)
    for name, p in sorted(plan.get("placements", {}).items()):
        # a tenant spanning nodes: its guest cells, each on its host node
        for cell in p.get("cells") or []:
            lines.append("%s cell %d on node %d: vCPUs %s, %d MiB, CPUs %s%s" % (
                name, cell["id"], cell["node"], format_cpulist(cell["vcpus"]), cell["memory_kib"] // 1024, format_cpulist(cell["cpus"]),
                "".join(", %s %s" % (kind, ",".join(cell[kind])) for kind in ("gpus", "vfs") if cell[kind])))
    for name, p in sorted(plan.get("placements", {}).items()):
        # where a tenant's VF sits from its GPU (PIX .. SOCKET, SYS) and why none nearer
        if p.get("vf_locality"):
            lines.append("%s VF locality %s: %s" % (name, p["vf_locality"]["level"], p["vf_locality"]["why"]))
    for name, p in sorted(plan.get("placements", {}).items()):
        # on an HGX board with NVSwitches: the Fabric Manager partition each tenant needs (placement/partitions.py)
        if p.get("nvswitch_partition"):
            lines.append(partition_line(name, p["nvswitch_partition"]))
    if any("/vf" in vf for p in plan.get("placements", {}).values() for vf in p["vfs"]):
        lines.append("(<pf>/vfN: a VF the SR-IOV stage will create)")
    if report.get("port_modes"):
        lines += ["", "Ports whose link type the boot stage changes (gpuvirt_sriov_pfs link_type):"]
        lines += _items(port_change(c) for c in report["port_modes"])
    if report["boot_stage"]:
        lines += ["", "Will be fixed by the boot stage (role host_boot):"] + _items(report["boot_stage"])
    if report["fixes"]:
        lines += ["", "What to fix (by hand):"] + _items(report["fixes"])
    return "\n".join(lines)
