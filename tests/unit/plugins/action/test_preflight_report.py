# -*- coding: utf-8 -*-
"""The preflight_report action as the preflight role calls it: the report and whether the host passed,
made on the controller from the gate's registered read; a bad argument named, nothing made.
(tests/unit/test_preview.py and tests/unit/test_rollout_gate.py run the role with it.)"""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.action import preflight_report
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.actions import run_action  # pylint: disable=import-error
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

LAB = read_topology(lab_capture("bare"), ["1234:11e8"], ["1b36:0010"])
SMALL = {"name": "a", "vfs": 1, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none"}


def run(args):
    return run_action(preflight_report, "preflight_report", args)


def test_the_report_and_whether_the_host_passed():
    info = {"changed": False, "topology": LAB, "firmware": {}, "stage_checks": {}}
    made = run({"info": info, "desired": {"host": "lab", "tenants": [SMALL], "sriov_pfs": [{"pf": "0000:81:00.0", "num_vfs": 2}]},
                "policy": {}})
    assert not made.get("failed") and made["changed"] is False and made["passed"] is True
    assert made["report"]["host"] == "lab" and made["report"]["plan"]["fits"] is True
    refused = run({"info": info, "desired": {"host": "lab", "require_iommu_enabled": True}})
    assert refused["passed"] is False and refused["report"]["status"] == "fail" and not refused.get("failed")


def test_a_bad_argument_is_named_and_nothing_is_made():
    made = run({"info": {"failed": True, "msg": "no root"}, "desired": {}})
    assert made["failed"] and made["msg"] == ("preflight_report: expected the result of gpuvirt.tenancy.preflight_info "
                                              "(with its topology), got dict")
    assert "report" not in made
    made = run({"info": {"topology": LAB}, "desired": {}, "policy": ["numa"]})
    assert made["failed"] and made["msg"] == "preflight_report: the policy (gpuvirt_tenant_policy) must be a dict, got list"
