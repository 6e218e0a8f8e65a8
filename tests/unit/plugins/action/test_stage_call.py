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
    ({"stage": "boats", "options": {}}, "stage: 'boats' is not a host stage whose call is built here; give one of boot, libvirt_mounts, sriov_vfio, tenants"),
    ({"stage": "tenants", "options": ["tenants"]},
     "options: give the options of the tenants stage's gpuvirt.tenancy.tenant_domain call as a dict (the options gate_check "
     "hands back), got list"),
])
def test_bad_inputs_are_named_and_nothing_runs(args, message):
    with mock.patch.object(stage_call.ActionModule, "_execute_module") as execute:
        result = run_action(stage_call, "stage_call", args)
    assert result["failed"] and result["msg"] == message and result["changed"] is False
    execute.assert_not_called()
