# -*- coding: utf-8 -*-
"""The tenants stage's one report: each part only when it has something to say, VF settings only
in a preview, restarts with their reasons; a result that is not one is named."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.tenant_stage_report import RESTART, tenant_stage_report

QUIET = {"plan": {"notes": [], "unplaced": {}}, "foreign": {}, "preview_notes": [], "vf_settings": [],
         "restart_required": [], "restart_reasons": []}
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
]


@pytest.mark.parametrize("result, preview, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_report_has_only_what_there_is_to_say(result, preview, expected):
    assert tenant_stage_report(result, preview) == expected


def test_parts_come_in_reading_order():
    result = dict(QUIET, preview_notes=["p"], plan={"notes": ["n"], "unplaced": {"u": "r"}}, restart_required=["a"])
    assert [label for part in tenant_stage_report(result, True) for label in part] == [
        "what the preview assumes", "defined tenants kept, resized or re-planned",
        "tenants that do not fit (refused at the end, after the others are done)", RESTART]


def test_a_result_that_is_not_a_dict_is_named():
    with pytest.raises(AnsibleFilterError, match="expected the tenants stage's result \\(a dict\\), got list"):
        tenant_stage_report([])
