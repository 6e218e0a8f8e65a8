# -*- coding: utf-8 -*-
"""The preflight report (plugin_utils preflight_report, the action preflight_report's logic) and its
plan: the gate's tenants plan stands for the preflight's own only where it is the plan of the host
as the stages leave it (a preview's check, or a host whose boot and SR-IOV/VFIO checks change
nothing); else the planner runs on the controller over the host model as the stages will leave
it, and its refusal is the report's reason."""

from __future__ import annotations

import re

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.preflight_report import (
    PreflightReportError, gate_plan, preflight_plan, preflight_report)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

PLAN = {"placements": {"a": {"node": 0}}, "unplaced": {}, "notes": [], "foreign": {}}


def check(changed=False, error=None, result=None, options=None):
    return {"module": "m", "options": options or {}, "changed": changed, "error": error, "result": result}


TENANTS = check(result={"changed": False, "plan": PLAN})
PREVIEW = check(changed=True, result={"changed": True, "plan": PLAN}, options={"preview": {"sriov_pfs": []}})

CASES = [
    ("converged: every check changes nothing", {"boot": check(), "sriov_vfio": check(), "tenants": TENANTS}, PLAN),
    ("no SR-IOV/VFIO check (the inventory asks nothing of it)", {"boot": check(), "tenants": TENANTS}, PLAN),
    ("the boot stage would change the host", {"boot": check(changed=True), "tenants": TENANTS}, {}),
    ("the SR-IOV/VFIO check failed", {"boot": check(), "sriov_vfio": check(changed=None, error="InputError: x"),
                                      "tenants": TENANTS}, {}),
    ("a preview plans as the stages leave the host", {"boot": check(changed=True), "sriov_vfio": check(changed=True),
                                                      "tenants": PREVIEW}, PLAN),
    ("the tenants check failed", {"boot": check(), "tenants": check(changed=None, error="InputError: tenants[0]")}, {}),
    ("no tenants check", {"boot": check()}, {}),
    ("no stage checks", {}, {}),
    ("none", None, {}),
]


@pytest.mark.parametrize("checks, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_gates_plan_stands_only_for_the_host_as_the_stages_leave_it(checks, expected):
    assert gate_plan(checks) == expected


def test_stage_checks_that_are_not_a_dict_are_named():
    with pytest.raises(PreflightReportError, match="expected preflight_info's stage_checks \\(a dict\\), got list"):
        gate_plan([])


LAB = read_topology(lab_capture("bare"), ["1234:11e8"], ["1b36:0010"])
LAB_PF = "0000:81:00.0"
SMALL = {"name": "a", "vfs": 1, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none"}


def test_no_present_tenant_no_plan():
    assert preflight_plan({"topology": LAB}, [dict(SMALL, state="absent")]) == {"plan": None, "error": ""}
    assert preflight_plan({"topology": LAB}, []) == {"plan": None, "error": ""}


def test_the_gates_plan_is_taken_where_it_stands_and_not_made_again():
    info = {"topology": {}, "stage_checks": {"boot": check(), "tenants": TENANTS}}  # no host model to plan on
    assert preflight_plan(info, [SMALL]) == {"plan": PLAN, "error": ""}


def test_else_the_planner_places_on_the_host_as_the_stages_leave_it():
    # the lab PF has no VFs yet: the projection adds the wanted ones, named <pf>/vfN until they exist
    info = {"topology": LAB, "stage_checks": {"boot": check(changed=True), "tenants": TENANTS}}
    found = preflight_plan(info, [SMALL], {}, [], [{"pf": LAB_PF, "num_vfs": 2}])
    assert found["error"] == "" and found["plan"]["placements"]["a"]["vfs"] == [LAB_PF + "/vf0"]


@pytest.mark.parametrize("pfs, words", [
    # a PF with a VF count of 0 gets no VFs: the tenant's VF cannot be placed, and the reason is the report's
    ([{"pf": LAB_PF, "num_vfs": 0}], "a"),
    ([{"pf": LAB_PF, "num_vfs": 2}], None),
])
def test_a_pf_asked_for_no_vfs_gives_none(pfs, words):
    found = preflight_plan({"topology": LAB}, [SMALL], {}, [], pfs)
    assert (words in found["plan"]["unplaced"]) if words else found["plan"]["unplaced"] == {}


@pytest.mark.parametrize("args, words", [
    (([dict(SMALL, vcpus="many")],), "gpuvirt.tenancy.plan_tenants: "),
    (([SMALL], {}, [], [], [{"size": "3M", "count": 1, "node": 0}]), "gpuvirt.tenancy.preflight_projection: "),
])
def test_a_refusal_is_the_reports_reason_not_a_failure(args, words):
    found = preflight_plan({"topology": LAB}, *args)
    assert found["plan"] is None and found["error"].startswith(words), found


@pytest.mark.parametrize("args, words", [
    (({"topology": None}, [SMALL]), "expected the result of gpuvirt.tenancy.preflight_info"),
    (({"topology": LAB}, {"a": 1}), "expected the tenant list"),
    (({"topology": LAB}, [SMALL], ["numa"]), "gpuvirt_tenant_policy) must be a dict"),
    (({"topology": LAB}, [SMALL], {}, [], [{"num_vfs": 2}]), "needs pf"),
])
def test_bad_inputs_are_named(args, words):
    with pytest.raises(PreflightReportError, match=re.escape(words)):
        preflight_plan(*args)


# ---- the report

BARE = lab_capture("bare")


def test_the_report_over_the_bare_lab():
    info = {"topology": LAB, "firmware": {}, "stage_checks": {}}
    made = preflight_report(info, {"host": "lab"})
    assert made["report"]["status"] == "warn" and made["report"]["table"].startswith("Preflight lab: WARN") and made["passed"]
    failed = preflight_report(info, {"host": "lab", "require_iommu_enabled": True})
    assert failed["report"]["status"] == "fail" and failed["passed"] is False


def test_the_report_takes_the_plans_refusal_as_its_reason():
    tenants = [dict(SMALL, vcpus="many")]
    made = preflight_report({"topology": LAB}, {"host": "lab", "tenants": tenants})
    planned = preflight_plan({"topology": LAB}, tenants)
    assert planned["plan"] is None and planned["error"].startswith("gpuvirt.tenancy.plan_tenants: ")
    [check] = [c for c in made["report"]["checks"] if c["name"] == "plan"]
    assert check["status"] == "fail" and planned["error"].split(": ", 1)[1] in check["detail"], check


def test_unset_plan_inputs_as_ansible_core_2_16_templates_them():
    # none templated as "": every GPU (not none), no VFs, no pages, no policy
    assert preflight_plan({"topology": LAB}, [SMALL], "", "", "", "") == preflight_plan({"topology": LAB}, [SMALL], None, None, [], [])


@pytest.mark.parametrize("info, desired, words", [
    ({"topology": LAB}, ["host"], "desired: give the report's desired state (a dict), got list"),
    ({"topology": LAB, "stage_checks": ["tenants"]}, {}, "expected preflight_info's stage_checks (a dict), got list"),
    ({"topology": {"numa_nodes": [{"id": 0}]}}, {"sriov_pfs": ["0000:81:00.0"]}, "gpuvirt_sriov_pfs[0]: expected {pf, num_vfs}"),
    (None, {}, "expected the result of gpuvirt.tenancy.preflight_info"),
])
def test_the_reports_bad_inputs_are_named(info, desired, words):
    with pytest.raises(PreflightReportError, match=re.escape(words)):
        preflight_report(info, desired)
