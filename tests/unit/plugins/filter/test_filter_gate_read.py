# -*- coding: utf-8 -*-
"""A later stage takes what the gate read only while no earlier stage changed the host; a stage publishes
what it decided from the result it takes (stage_outcome)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.gate_read import gate_read, stage_outcome

CHECKS = {"boot": {"changed": False}, "sriov_vfio": {"changed": False, "options": {"gpus": []}}, "tenants": {"changed": True}}


@pytest.mark.parametrize("read, key, changed, expected", [
    (CHECKS, "sriov_vfio", [False], CHECKS["sriov_vfio"]),
    (CHECKS, "sriov_vfio", [], CHECKS["sriov_vfio"]),
    # the boot stage changed the host (a reboot, hugepages): the check is out of date
    (CHECKS, "sriov_vfio", [True], {}),
    # flags as Jinja hands them over, text included; an unset flag is not a change
    (CHECKS, "tenants", ["False", "false", None, ""], CHECKS["tenants"]),
    (CHECKS, "tenants", [False, "True"], {}),
    (CHECKS, "nothing", [False], {}),
    ({"domains": {"a": {}}}, None, [False], {"domains": {"a": {}}}),
    (None, "tenants", [False], {}),
])
def test_the_gates_read_stands_while_nothing_changed(read, key, changed, expected):
    assert gate_read(read, key, changed) == expected


@pytest.mark.parametrize("args, words", [
    (([1], "tenants", []), "expected what the preflight gate read"),
    ((CHECKS, "tenants", True), "changed is a list"),
    ((CHECKS, "tenants", ["maybe"]), "changed: "),
])
def test_bad_inputs_are_named(args, words):
    with pytest.raises(AnsibleFilterError, match=words):
        gate_read(*args)


# ---- stage_outcome: the result a stage takes, and what it publishes from it

BOOT_DUE = {"changed": True, "reboot_required": True, "pending": ["the kernel command line (+intel_iommu=on +iommu=pt)"],
            "firmware_pending": [], "cold_boot_required": [], "firmware": None, "gpu_stack": {"active": True}}
FIRMWARE_WAITS = {"changed": True, "reboot_required": False, "pending": [], "firmware_pending": ["0000:19:00.0"],
                  "cold_boot_required": ["0000:19:00.0"], "gpu_stack": None,
                  "firmware": {"pending": ["0000:19:00.0"], "cold_boot": ["0000:19:00.0"], "reset": [], "messages": []}}
CONVERGED = {"changed": False, "reboot_required": False, "pending": [], "firmware_pending": [], "cold_boot_required": []}
SKIPPED = {"changed": False, "skipped": True, "false_condition": "not __host_boot_checked.answered"}
NOT_ANSWERED = {"answered": False, "options": {}, "result": {}}


def answered(result):
    return {"answered": True, "options": {}, "result": result}


@pytest.mark.parametrize("checked, run, reboot_ok, check_mode, now, required, host_changed", [
    # the gate's check stands for the call: a converged host's re-run
    (answered(CONVERGED), None, True, False, False, False, False),
    # the stage's own call: a reboot due and allowed runs now and is no longer required
    (NOT_ANSWERED, BOOT_DUE, True, False, True, False, True),
    # not allowed, or in check mode: it stays required, and check mode changed nothing on the host
    (NOT_ANSWERED, BOOT_DUE, False, False, False, True, True),
    (NOT_ANSWERED, BOOT_DUE, "true", True, False, True, False),
    (answered(BOOT_DUE), SKIPPED, "yes", True, False, True, False),
    # a firmware change waits for a reboot whatever the kernel needs
    (NOT_ANSWERED, FIRMWARE_WAITS, True, False, False, True, True),
])
def test_the_boot_stage_publishes_what_is_due(checked, run, reboot_ok, check_mode, now, required, host_changed):
    outcome = stage_outcome(checked, run, "boot", reboot_ok, check_mode)
    assert (outcome["reboot_now"], outcome["reboot_required"], outcome["host_changed"]) == (now, required, host_changed)
    taken = checked["result"] if checked["answered"] else run
    assert outcome["result"] is taken and outcome["pending"] == (taken.get("pending") or [])
    assert outcome["cold_boot_required"] is bool(taken.get("cold_boot_required"))


def test_the_boot_stage_fills_the_parts_a_call_left_null():
    outcome = stage_outcome(NOT_ANSWERED, BOOT_DUE, "boot")
    assert outcome["firmware_state"] == {"pending": [], "cold_boot": [], "reset": [], "messages": []}
    assert outcome["gpu_stack_plan"] == {"active": True}
    assert stage_outcome(NOT_ANSWERED, FIRMWARE_WAITS, "boot")["gpu_stack_plan"] == {}


def test_a_stage_that_asked_nothing_publishes_empty_parts():
    # host_vfio with no PF, GPU or device in the inventory: its call was skipped and the gate checked none
    outcome = stage_outcome(NOT_ANSWERED, dict(SKIPPED), "sriov_vfio", False, False)
    assert outcome == {"result": {}, "changed": False, "host_changed": False, "bound": [], "companions": [], "isolation": {},
                       "sriov": {}}


def test_the_sriov_vfio_and_tenants_parts():
    vfio = {"changed": True, "devices": [{"address": "0000:19:00.2"}], "companions": [], "isolation": {"ok": True},
            "sriov": {"changed": True}}
    outcome = stage_outcome(answered(vfio), None, "sriov_vfio", False, True)
    assert outcome["bound"] == vfio["devices"] and outcome["sriov"] == {"changed": True} and not outcome["host_changed"]
    tenants = {"changed": False, "plan": {"placements": {}}, "foreign": {"legacy": {}}, "removed": ["tenant-z"],
               "restart_required": []}
    outcome = stage_outcome(NOT_ANSWERED, tenants, "tenants")
    assert (outcome["plan"], outcome["foreign"], outcome["removed"]) == ({"placements": {}}, {"legacy": {}}, ["tenant-z"])


@pytest.mark.parametrize("args, words", [
    (("not checked",), "expected gate_check's result, got str"),
    ((NOT_ANSWERED, None, "firmware"), "stage is one of boot, sriov_vfio, tenants, got 'firmware'"),
    ((answered(["not", "a", "dict"]), None, "boot"), "the boot stage's result is not a dict"),
    ((NOT_ANSWERED, BOOT_DUE, "boot", "maybe"), "reboot_ok"),
])
def test_stage_outcome_names_a_bad_input(args, words):
    with pytest.raises(AnsibleFilterError, match="gpuvirt.tenancy.stage_outcome: .*" + words):
        stage_outcome(*args)
