# -*- coding: utf-8 -*-
"""The stage_call action's refusals, before any module runs (tests/unit/roles/test_tenants_stage.py
runs it for real: tenant_domain on the host with the play's module_defaults, in check mode and
async with a poll)."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import stage_call
from fakes.actions import run_action  # pylint: disable=import-error


@pytest.mark.parametrize("args, message", [
    ({"stage": "boats", "options": {}},
     "stage: 'boats' is not a host stage whose call is built here; give one of boot, libvirt_mounts, sriov, sriov_vfio, tenants"),
    ({"stage": "tenants", "options": ["tenants"]},
     "options: give the options of the tenants stage's gpuvirt.tenancy.tenant_domain call as a dict (the options gate_check "
     "hands back), got list"),
])
def test_bad_inputs_are_named_and_nothing_runs(args, message):
    with mock.patch.object(stage_call.ActionModule, "_execute_module") as execute:
        result = run_action(stage_call, "stage_call", args)
    assert result["failed"] and result["msg"] == message and result["changed"] is False
    execute.assert_not_called()


SRIOV = {"pfs": [{"pf": "0000:81:00.0", "num_vfs": 2}], "tenants": None, "autoprobe": False, "persist": True, "force": False}


def test_a_call_given_as_inputs_is_built_then_made():
    """stage sriov (the standalone host_sriov role's): the options built from the role's inputs, as
    stage_options builds them, and sriov_vfs run with them."""
    with mock.patch.object(stage_call.ActionModule, "_with_defaults", lambda self, module, options: options), \
            mock.patch.object(stage_call.ActionModule, "_execute_module", return_value={"changed": True, "pfs": []}) as execute, \
            mock.patch.object(stage_call.ActionModule, "_remove_tmp_path"):
        result = run_action(stage_call, "stage_call", {"stage": "sriov", "inputs": SRIOV})
    assert not result.get("failed") and result["changed"] is True
    assert execute.call_args.kwargs["module_name"] == "gpuvirt.tenancy.sriov_vfs"
    assert execute.call_args.kwargs["module_args"] == {
        "pfs": [{"pf": "0000:81:00.0", "num_vfs": 2, "autoprobe": False, "persist": True, "force": False}]}


@pytest.mark.parametrize("args, message", [
    ({"stage": "sriov", "inputs": dict(SRIOV, pfs="0000:81:00.0")},
     "sriov: pfs (host_sriov_pfs): expected the PF list [{pf, num_vfs, autoprobe}] (gpuvirt_sriov_pfs), got '0000:81:00.0'"),
    # the removed input host_sriov_tenants, still set: refused naming it and the fix, before any call
    ({"stage": "sriov", "inputs": dict(SRIOV, tenants=[{"name": "a", "vfs": ["0000:81:00.1"]}])},
     "sriov: tenants (host_sriov_tenants) is no longer an input: the host_sriov role sets no tenant's VF settings any more. "
     "Remove host_sriov_tenants; give each tenant's vfs as a count in gpuvirt_tenants, with its mac and vlan: the tenants "
     "stage (gpuvirt.tenancy.tenant_vms) picks its VFs near its GPU and sets their MAC, VLAN, spoof check on and trust off, "
     "kept at boot (for settings of VFs named by address, gpuvirt.tenancy.sriov_vfs's vf_settings)"),
    ({"stage": "sriov", "inputs": SRIOV, "options": {}},
     "sriov: give the call either as options (a dict) or as inputs (the stage role's inputs), not both"),
    ({"stage": "sriov", "inputs": "pfs"}, "sriov: inputs: give the sriov stage's inputs as a dict (the host_sriov role's inputs "
                                          "without the prefix), got str"),
])
def test_bad_inputs_of_a_call_given_as_inputs_are_named_and_nothing_runs(args, message):
    with mock.patch.object(stage_call.ActionModule, "_execute_module") as execute:
        result = run_action(stage_call, "stage_call", args)
    assert result["failed"] and result["msg"] == message and result["changed"] is False
    execute.assert_not_called()
