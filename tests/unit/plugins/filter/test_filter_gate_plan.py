# -*- coding: utf-8 -*-
"""The gate's tenants plan stands for the preflight's own only where it is the plan of the host as
the stages leave it: a preview's check, or a host whose boot and SR-IOV/VFIO checks change nothing."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.gate_plan import gate_plan

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
    with pytest.raises(AnsibleFilterError, match="expected preflight_info's stage_checks \\(a dict\\), got list"):
        gate_plan([])
