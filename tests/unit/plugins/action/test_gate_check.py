# -*- coding: utf-8 -*-
"""The gate_check action as the host stage roles call it: the gate's check is the stage's result
only for exactly the options it checked, without error, and (outside check mode) changing nothing;
an answer shows the check's changed and diff as the call's own; bad inputs are named."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import gate_check
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import stage_options
from fakes.actions import run_action  # pylint: disable=import-error
from fakes.stage_inputs import TENANT_VMS as TENANT_INPUTS  # pylint: disable=import-error

OPTIONS = {"devices": ["0000:82:00.0"], "vfs_of": ["0000:81:00.0"], "persist": True}
DIFF = [{"before_header": "0000:82:00.0 driver", "after_header": "0000:82:00.0 driver", "before": "nvidia\n",
         "after": "vfio-pci\n"}]


def check(changed=False, error=None, options=None, diff=None):
    result = {"changed": changed, "devices": ["0000:82:00.0"]}
    if diff:
        result["diff"] = diff
    return {"module": "vfio_bind", "options": dict(OPTIONS if options is None else options), "changed": None if error else changed,
            "result": None if error else result, "error": error}


EITHER = "give the call either as options (a dict) or as stage and inputs (the stage role's inputs), not both"


def run(args, check_mode=False):
    return run_action(gate_check, "gate_check", args, check_mode)


# (the gate's check, the options sent now, check mode) -> answered, changed
CASES = [
    ("converged, same options", check(), OPTIONS, False, True, False),
    ("converged, check mode", check(), OPTIONS, True, True, False),
    ("something to change", check(changed=True), OPTIONS, False, False, False),
    ("something to change, check mode", check(changed=True), OPTIONS, True, True, True),
    ("an option added", check(), dict(OPTIONS, force=True), False, False, False),
    ("an option left out", check(), {"devices": OPTIONS["devices"]}, True, False, False),
    ("a value changed", check(), dict(OPTIONS, persist=False), True, False, False),
    ("the check failed", check(error="InputError: x"), OPTIONS, True, False, False),
    ("no check", {}, OPTIONS, False, False, False),
    ("no check (null)", None, OPTIONS, True, False, False),
]


@pytest.mark.parametrize("gate, options, check_mode, answered, changed", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_gate_answers_only_exactly_its_call(gate, options, check_mode, answered, changed):
    result = run({"check": gate, "options": options}, check_mode)
    assert not result.get("failed")
    assert result["answered"] is answered and result["changed"] is changed
    assert result["result"] == (gate["result"] if answered else {})
    # the options come back as given, for the call a stage makes when the gate did not answer
    assert result["options"] == options


def test_an_answer_shows_the_checks_diff_as_the_calls_own():
    result = run({"check": check(changed=True, diff=DIFF), "options": OPTIONS}, check_mode=True)
    assert result["answered"] and result["changed"] and result["diff"] == DIFF
    # not answered: no diff of a call that did not happen
    assert "diff" not in run({"check": check(changed=True, diff=DIFF), "options": OPTIONS}, check_mode=False)


@pytest.mark.parametrize("args, message", [
    ({"check": "boot", "options": OPTIONS}, "check: give one stage of preflight_info's stage_checks (a dict), or {} or null for none; got str"),
    ({"check": {}, "options": None}, "options: give the dict of the options the stage's call would send now; got NoneType"),
    ({"check": {}}, "options: give the dict of the options the stage's call would send now; got NoneType"),
    ({"check": {}, "stage": "tenants"}, EITHER),
    ({"check": {}, "stage": "tenants", "inputs": TENANT_INPUTS, "options": OPTIONS}, EITHER),
    ({"check": {}, "stage": "tenants", "inputs": dict(TENANT_INPUTS, live="maybe")},
     "tenants: live (tenant_vms_live) must be a boolean, got 'maybe': give tenant_vms_live true or false"),
])
def test_bad_inputs_are_named(args, message):
    # the bad input changes nothing: no answer, no options
    result = run(args)
    assert result["failed"] and result["msg"] == message and result["changed"] is False
    assert "answered" not in result and "options" not in result


def test_a_stage_and_its_roles_inputs_are_the_options_the_stage_call_sends():
    """Given as the stage and its role's inputs, the call is the options plugin_utils stage_calls
    builds (the same the stage_options action hands the gate): the gate's check of exactly those
    answers it; of other options (another input), it does not."""
    options = stage_options("tenants", TENANT_INPUTS)
    gate = check(options=options)
    result = run({"check": gate, "stage": "tenants", "inputs": TENANT_INPUTS})
    assert result["answered"] is True and result["options"] == options and result["result"] == gate["result"]
    other = run({"check": gate, "stage": "tenants", "inputs": dict(TENANT_INPUTS, live=False)})
    assert other["answered"] is False and other["options"] == dict(options, live=False)
