# -*- coding: utf-8 -*-
"""The tenants stage's one report: each part only when it has something to say, VF settings only
in a preview, each placed tenant's VF locality (level and why) as its plan says, restarts with their
reasons; a result that is not one is named."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.tenant_report import FABRIC, LOCALITY, NCCL, RESTART, tenant_stage_report
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants

from placement_topologies import dgx_a100  # pylint: disable=import-error

QUIET = {"plan": {"notes": [], "unplaced": {}}, "foreign": {}, "preview_notes": [], "vf_settings": [],
         "restart_required": [], "restart_reasons": []}
UNPLACED = "tenants that do not fit (refused at the end, after the others are done)"
FAR = {"level": "SOCKET", "why": "VF 0000:1b:02.2 on node 0, another NUMA node of the socket of its GPU 0000:4c:00.0 (node 1): "
                                 "no VF of the pool is nearer; node 1 has no VF-capable PF"}
STEP = {"tenant": "h-a", "id": 14, "physical_ids": [8], "step": "activate", "done": True}
VF = [{"pf": "0000:19:00.0", "vfs": [{"index": 0, "mac": "52:54:00:00:00:01", "vlan": 100}]}]

CASES = [
    ("a converged stage says nothing", QUIET, False, []),
    ("plan notes", dict(QUIET, plan={"notes": ["tenant-a kept"], "unplaced": {}}), False,
     [{"defined tenants kept, resized or re-planned": ["tenant-a kept"]}]),
    ("unplaced tenants", dict(QUIET, plan={"notes": [], "unplaced": {"big": "no node holds it"}}), False,
     [{"tenants that do not fit (refused at the end, after the others are done)": {"big": "no node holds it"}}]),
    ("foreign domains", dict(QUIET, foreign={"build01": {"gpus": ["0000:07:00.0"]}}), False,
     [{"domains that are not tenants (kept, never reused nor removed; what they hold is out of the plan)":
       {"build01": {"gpus": ["0000:07:00.0"]}}}]),
    ("VF settings outside a preview are not shown", dict(QUIET, vf_settings=VF), False, []),
    ("VF settings and notes in a preview", dict(QUIET, vf_settings=VF, preview_notes=["PREVIEW: x"]), True,
     [{"what the preview assumes": ["PREVIEW: x"]},
      {"VF settings the tenants get (preview: the PFs' settings are not read under a capture)": VF}]),
    ("restarts with their reasons", dict(QUIET, restart_required=["a"], restart_reasons=["a: memory 4096 -> 8192 MiB"]), False,
     [{RESTART: {"tenants": ["a"], "why": ["a: memory 4096 -> 8192 MiB"]}}]),
    ("a result without the optional fields", {"changed": False}, True, []),
    ("the Fabric Manager partition steps, before the restarts",
     dict(QUIET, fabric_partitions={"read": True, "steps": [STEP]}, restart_required=["a"], restart_reasons=["a: r"]), False,
     [{FABRIC: [STEP]}, {RESTART: {"tenants": ["a"], "why": ["a: r"]}}]),
    ("no Fabric Manager step: nothing said", dict(QUIET, fabric_partitions={"read": True, "steps": []}), False, []),
    ("each tenant with VFs: where they sit and why, after the tenants that do not fit",
     dict(QUIET, plan={"notes": [], "unplaced": {"big": "no node holds it"},
                       "placements": {"b": {"vf_locality": FAR}, "a": {"vf_locality": {"level": "PIX", "why": "under its GPU's switch"}},
                                      "cpu-only": {"vf_locality": None}}},
          restart_required=["a"], restart_reasons=["a: x"]), False,
     [{UNPLACED: {"big": "no node holds it"}},
      {LOCALITY: {"a": "PIX: under its GPU's switch", "b": "SOCKET: " + FAR["why"]}},
      {RESTART: {"tenants": ["a"], "why": ["a: x"]}}]),
    ("the result's own copy of the placements (tenant_domain puts them at the top too)",
     dict(QUIET, placements={"b": {"vf_locality": FAR}}), False, [{LOCALITY: {"b": "SOCKET: " + FAR["why"]}}]),
]


@pytest.mark.parametrize("result, preview, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_report_has_only_what_there_is_to_say(result, preview, expected):
    assert tenant_stage_report(result, preview) == expected


def test_parts_come_in_reading_order():
    result = dict(QUIET, preview_notes=["p"], plan={"notes": ["n"], "unplaced": {"u": "r"}}, restart_required=["a"])
    assert [label for part in tenant_stage_report(result, True) for label in part] == [
        "what the preview assumes", "defined tenants kept, resized or re-planned",
        "tenants that do not fit (refused at the end, after the others are done)", RESTART]


def test_each_placed_tenants_vf_locality_is_the_plans():
    """A plan of the DGX A100-class host (real captures): a line per tenant with VFs, its level and
    why as the plan carries them; none for a tenant without VFs."""
    tenants = [{"name": "g%d" % i, "gpus": 1, "vfs": 2, "vcpus": 8, "memory_mb": 8192} for i in range(8)]
    tenants.append({"name": "nic-only", "vfs": 1, "vcpus": 4, "memory_mb": 4096})
    tenants.append({"name": "cpu-only", "vcpus": 4, "memory_mb": 4096})
    plan = plan_tenants(dgx_a100(), tenants, {"reserved_cpus": "0-1,128-129"})
    assert len(plan["placements"]) == len(tenants)
    result = dict(QUIET, plan=plan, placements=plan["placements"])
    lines = dict(part for entry in tenant_stage_report(result) for part in entry.items())[LOCALITY]
    assert sorted(lines) == sorted(t["name"] for t in tenants if t.get("vfs"))
    for name, line in lines.items():
        where = plan["placements"][name]["vf_locality"]
        assert line == "%s: %s" % (where["level"], where["why"])
        assert where["level"] in ("PIX", "PXB", "PHB", "NODE", "SOCKET", "SYS") and where["why"]


def test_a_result_that_is_not_a_dict_is_named():
    with pytest.raises(ValueError, match="expected the tenants stage's result \\(a dict\\), got list"):
        tenant_stage_report([])


GEN4 = {"link_speed": "16.0 GT/s PCIe", "link_width": 16}
LAYOUT = {"gpus": ["0000:10:00.0"], "nics": ["0000:18:00.1"], "classes": {"0000:10:00.0": "0x030200", "0000:18:00.1": "0x020700"},
          "cells": [["0000:10:00.0", "0000:18:00.1"]], "switches": [["0000:10:00.0", "0000:18:00.1"]]}


def test_a_preview_shows_the_nccl_each_guest_stage_writes():
    """PIX with the host's links: the file under the guest's emulated switch; a tenant whose VFs have no GPU: no GDR level,
    no file and why; outside a preview nothing."""
    result = dict(QUIET, plan={"notes": [], "unplaced": {}, "placements": {
        "a": {"gpus": ["0000:10:00.0"], "vfs": ["0000:18:00.1"], "pcie_affinity": "PIX"},
        "cpu": {"gpus": [], "vfs": ["0000:28:00.1"], "pcie_affinity": None}}},
        pci_links={"a": {"level": "PIX", "gpu": GEN4, "nic": GEN4, "switch": GEN4, "missing": None, "unknown": {}}},
        guest_layouts={"a": LAYOUT, "cpu": dict(LAYOUT, gpus=[], nics=["0000:28:00.1"], cells=[["0000:28:00.1"]], switches=[])})
    assert tenant_stage_report(result, False) == []
    (part,) = tenant_stage_report(result, True)
    lines = part[NCCL]
    assert lines["a"][:3] == ["NCCL_IB_PCI_RELAXED_ORDERING=1", "NCCL_NET_GDR_LEVEL=PIX", "NCCL_TOPO_FILE=/etc/nccl-topo.xml"]
    assert lines["a"][4:] == [
        '<system version="1">', '  <cpu numaid="0">',
        '    <pci busid="{switch 1}" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">',
        '      <pci busid="{0000:10:00.0}" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"/>',
        '      <pci busid="{0000:18:00.1}" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16"/>',
        '    </pci>', '  </cpu>', '</system>']
    assert lines["cpu"] == ["NCCL_IB_PCI_RELAXED_ORDERING=1", "no NCCL_TOPO_FILE, no topology file: the GPU host's link facts are "
                            "unknown: the plan gives the tenant no GPU on its host"]
