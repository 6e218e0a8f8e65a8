# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tenants stage's call decided that an operator should read, as one message of labelled
parts (each left out when empty, in reading order: a list of one-key dicts, as Ansible's output
sorts a dict's keys), so that the stage reports in one task whatever it has to say (the action
stage_result, through plugin_utils stage_results). Pure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# label -> the result field it shows, in the order an operator reads them
PARTS = (
    ("what the preview assumes", "preview_notes"),
    ("defined tenants kept, resized or re-planned", "plan.notes"),
    ("domains that are not tenants (kept, never reused nor removed; what they hold is out of the plan)", "foreign"),
    ("tenants that do not fit (refused at the end, after the others are done)", "plan.unplaced"),
    ("VF settings the tenants get (preview: the PFs' settings are not read under a capture)", "vf_settings"),
)
# with fabric_manager: the tenants' Fabric Manager partition steps (tenant_domain's fabric_partitions), after the parts above
FABRIC = ("Fabric Manager partitions (a tenant's activated between its definition and its start, a removed tenant's "
          "deactivated after its removal; done: false in check mode and a preview)")
# where each tenant's VFs sit from its GPU (the plan's vf_locality): after the tenants that do not fit
LOCALITY = "where each tenant's VFs sit from its GPU (PIX, PXB, PHB, NODE, SOCKET or SYS) and why none nearer"
# a preview: what each tenant's guest stage (guest_rdma) will write for NCCL, after where its VFs sit
NCCL = ("NCCL in each tenant's guest, as the guest stage will write it from this plan (/etc/nccl.conf; the topology file with "
        "bus IDs shown as {HOST ADDRESS}, the guest's own read there)")
# guest_rdma_topo_file's default
TOPO_FILE = "/etc/nccl-topo.xml"
RESTART = "running tenants that keep part of their change until they are restarted (never restarted here)"


def _field(result, path):
    value = result
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def vf_localities(result):
    """{tenant: "LEVEL: why"} of the placements (the plan's, or the result's own copy) that carry a
    ``vf_locality`` (the tenants with VFs; placement/locality.py), in name order."""
    placements = _field(result, "plan.placements") or result.get("placements") or {}
    if not isinstance(placements, dict):
        return {}
    out = {}
    for name in sorted(placements):
        where = placements[name].get("vf_locality") if isinstance(placements[name], dict) else None
        if isinstance(where, dict) and where.get("level"):
            out[name] = "%s: %s" % (where["level"], where.get("why") or "")
    return out


def guest_nccl(result):
    """{tenant: [line]} of a preview's placements with VFs: the NCCL settings the guest stage writes from the facts
    the tenants stage gives its guest (action guest_inventory: relaxed ordering on, the GDR level of its GPUs and VFs
    on the host) and its NCCL topology file (guest.nccl_topo on the guest layout its domain defines), or why none."""
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.guest_inventory import GDR_LEVEL_OF  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo import preview_file  # pylint: disable=import-outside-toplevel
    placements = _field(result, "plan.placements") or {}
    links = result.get("pci_links") or {}
    out = {}
    for name, layout in sorted((result.get("guest_layouts") or {}).items()):
        placement = placements.get(name) or {}
        lines = ["NCCL_IB_PCI_RELAXED_ORDERING=1"]
        level = GDR_LEVEL_OF.get(placement.get("pcie_affinity")) if placement.get("gpus") else None
        if level:
            lines.append("NCCL_NET_GDR_LEVEL=%s" % level)
        text, reason, left = preview_file(layout, links.get(name))
        if text is None:
            lines.append("no NCCL_TOPO_FILE, no topology file: %s" % reason)
        else:
            lines.append("NCCL_TOPO_FILE=%s" % TOPO_FILE)
            lines.extend("%s link: NCCL reads it in the guest (%s)" % (kind, why) for kind, why in sorted(left.items()))
            lines.extend(text)
        out[name] = lines
    return out


def tenant_stage_report(result, preview=False):
    """[{label: what}] of the tenants stage's result (tenant_domain's, or the gate's check of the
    same call), in reading order, the parts with nothing to say left out; VF settings only in a
    preview. Each placed tenant with VFs has a line of where they sit from its GPU, after the
    tenants that do not fit."""
    if not isinstance(result, dict):
        raise ValueError("expected the tenants stage's result (a dict), got %s" % type(result).__name__)
    report = []
    for label, path in PARTS:
        if path == "vf_settings" and not preview:
            continue
        value = _field(result, path)
        if value:
            report.append({label: value})
        if path == "plan.unplaced":
            locality = vf_localities(result)
            if locality:
                report.append({LOCALITY: locality})
            nccl = guest_nccl(result) if preview else {}
            if nccl:
                report.append({NCCL: nccl})
    steps = _field(result, "fabric_partitions.steps")
    if steps:
        report.append({FABRIC: steps})
    restart = result.get("restart_required") or []
    if restart:
        report.append({RESTART: {"tenants": list(restart), "why": list(result.get("restart_reasons") or [])}})
    return report
