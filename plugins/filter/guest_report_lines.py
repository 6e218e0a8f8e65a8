# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants' guests in a report: ``guest_report_lines`` (one line per tenant for the main
command's report), called by a user's own playbook. Pure. The guest inventory the tenant_guests
role builds is the action ``gpuvirt.tenancy.guest_inventory``'s."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError


__metaclass__ = type


def _exchange_words(exchanges, same):
    peers = [e for e in exchanges if bool(e.get("same_vlan")) == same]
    if not peers:
        return "not checked"
    words = []
    for exchange in peers:
        ok = exchange.get("ok")
        if ok is None:
            state = "not checked"
        elif same:
            state = "ok" if ok else "FAILED"
        else:
            state = "NOT BLOCKED" if ok else "blocked"
        words.append("%s %s" % (exchange.get("peer"), state))
    return ", ".join(words)


def _host_vf_words(host_vfs):
    """The tenant's VFs as the GPU host reads them (``ip link`` of the PF): MAC, VLAN, spoof check, trust."""
    words = []
    for vf in host_vfs:
        if not isinstance(vf, dict):
            continue
        spoof, trust = vf.get("spoofchk"), vf.get("trust")
        words.append("VF %s MAC %s VLAN %s spoof check %s trust %s" % (
            vf.get("address") or "?", vf.get("mac") or "unset", vf.get("vlan") or "none",
            "unknown" if spoof is None else ("on" if spoof else "OFF"), "unknown" if trust is None else ("ON" if trust else "off")))
    return "host sets " + ", ".join(words) if words else ""


def guest_report_lines(rows):
    """One report line per tenant: whether its guest answers over SSH (with its kernel), its VF
    (netdev, MAC), its RDMA device and GID index, and the RDMA exchange with the tenants of its
    VLAN (ok / FAILED) and across VLANs (blocked / NOT BLOCKED); with ``host_vfs``, its VFs as the
    GPU host set them. ``rows``: [{name, guest, ssh, kernel, console_log, vf: {netdev, mac},
    rdma_device, gid_index, vlan, exchanges: [{peer, same_vlan, ok}], host_vfs: [{address, mac,
    vlan, spoofchk, trust}]}]; ``guest`` false: a domain without a guest OS the collection made
    (no image); ``ssh`` false: the guest did not answer, unset: not asked; what a row lacks reads
    "not checked"."""
    if not isinstance(rows, list):
        raise AnsibleFilterError("gpuvirt.tenancy.guest_report_lines: expected a list of tenant rows, got %s" % type(rows).__name__)
    lines = []
    for row in rows:
        if not isinstance(row, dict) or not row.get("name"):
            raise AnsibleFilterError("gpuvirt.tenancy.guest_report_lines: each row needs a name, got %r" % (row,))
        host = _host_vf_words(row.get("host_vfs") or [])
        if row.get("guest") is False:
            parts = ["no guest OS (a domain without an image): SSH, kernel, RDMA device, GID index and exchanges not checked"]
        elif row.get("ssh") is None:
            parts = ["guest not checked over SSH"]
        elif not row.get("ssh"):
            where = " (console log %s)" % row["console_log"] if row.get("console_log") else ""
            parts = ["guest does NOT answer over SSH%s" % where]
        else:
            vf = row.get("vf") or {}
            exchanges = [e for e in row.get("exchanges") or [] if isinstance(e, dict)]
            vlan = " %s" % row["vlan"] if row.get("vlan") is not None else ""
            parts = ["guest answers over SSH (kernel %s)" % (row.get("kernel") or "unknown"),
                     "VF %s %s" % (vf.get("netdev") or "not found", vf.get("mac") or "") if vf else "VF not found",
                     "RDMA %s GID index %s" % (row.get("rdma_device") or "none", row["gid_index"] if row.get("gid_index") is not None
                                               else "unknown"),
                     "RDMA within VLAN%s: %s" % (vlan, _exchange_words(exchanges, True)),
                     "across VLANs: %s" % _exchange_words(exchanges, False)]
        if host:
            parts.append(host)
        lines.append("%s: %s" % (row["name"], "; ".join(p.strip() for p in parts)))
    return lines


class FilterModule:
    """Guest filters."""

    def filters(self):
        return {"guest_report_lines": guest_report_lines}
