# -*- coding: utf-8 -*-
"""The stage_options action as tenant_vms tasks_from options calls it: the stage's call for the
preflight gate, the options gate_check builds from the same inputs when the stage runs; a bad
input is named and no options come back."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.action import gate_check, stage_options
from fakes.actions import run_action  # pylint: disable=import-error
from fakes.stage_inputs import TENANT_VMS  # pylint: disable=import-error


def test_the_gate_gets_the_call_the_stage_will_send():
    built = run_action(stage_options, "stage_options", {"stage": "tenants", "inputs": TENANT_VMS})
    assert not built.get("failed") and built["changed"] is False and built["module"] == "gpuvirt.tenancy.tenant_domain"
    assert built["options"]["tenants"] == TENANT_VMS["tenants"] and built["options"]["policy"] == {"numa": "required"}
    taken = run_action(gate_check, "gate_check", {"check": {}, "stage": "tenants", "inputs": TENANT_VMS})
    assert taken["options"] == built["options"]


def test_a_bad_input_or_stage_is_named():
    bad = run_action(stage_options, "stage_options", {"stage": "tenants", "inputs": dict(TENANT_VMS, tenants="a")})
    assert bad["failed"] and bad["changed"] is False and "options" not in bad
    assert bad["msg"] == ("tenants: tenants (tenant_vms_tenants) must be a list, got str: give tenant_vms_tenants as a YAML "
                          "list"), bad["msg"]
    other = run_action(stage_options, "stage_options", {"stage": "boats", "inputs": TENANT_VMS})
    assert other["failed"] and "give one of boot, libvirt_mounts, sriov, sriov_vfio, tenants" in other["msg"]
