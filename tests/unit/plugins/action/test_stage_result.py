# -*- coding: utf-8 -*-
"""The stage_result action as the host stage roles call it: the result taken (the gate's check
where gate_check answered, else the stage's call), the parts published and the report; the task
itself changes nothing (the stage's changed is stage_changed), check mode is the task's; bad
arguments are named and nothing is taken."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import stage_result
from fakes.actions import run_action  # pylint: disable=import-error

DUE = {"changed": True, "reboot_required": True, "pending": ["the kernel command line (+iommu=pt)"], "firmware": None,
       "gpu_stack": {"notes": ["nvidia-persistenced: stopped and disabled"]}}
NOT_ANSWERED = {"answered": False, "options": {}, "result": {}}


def run(args, check_mode=False):
    return run_action(stage_result, "stage_result", args, check_mode)


def test_the_boot_stage_takes_its_calls_result_and_the_tasks_check_mode():
    ran = run({"stage": "boot", "checked": NOT_ANSWERED, "run": DUE, "reboot_ok": True})
    assert not ran.get("failed") and ran["changed"] is False and ran["stage_changed"] is True
    assert ran["reboot_now"] is True and ran["reboot_required"] is False and ran["host_changed"] is True
    assert ran["result"] == DUE and ran["report"] == ["nvidia-persistenced: stopped and disabled"]
    # in check mode the reboot stays due and nothing changed the host
    checked = run({"stage": "boot", "checked": NOT_ANSWERED, "run": DUE, "reboot_ok": True}, check_mode=True)
    assert checked["reboot_now"] is False and checked["reboot_required"] is True and checked["host_changed"] is False


def test_the_gates_answer_is_the_result_taken():
    answer = {"changed": False, "plan": {"notes": ["t1 kept"], "unplaced": {}}, "foreign": {}, "removed": []}
    taken = run({"stage": "tenants", "checked": {"answered": True, "options": {}, "result": answer}, "run": None,
                 "preview": False})
    assert taken["result"] == answer and taken["plan"] == answer["plan"] and taken["restart_required"] == []
    assert taken["report"] == [{"defined tenants kept, resized or re-planned": ["t1 kept"]}]


@pytest.mark.parametrize("args, message", [
    ({"stage": "fabric", "checked": NOT_ANSWERED}, "stage_result: stage: give one of boot, sriov_vfio, tenants, libvirt_mounts, "
                                                   "got 'fabric'"),
    ({"stage": "boot", "checked": None}, "stage_result: checked: give gate_check's registered result (a dict), got NoneType"),
    ({"stage": "sriov_vfio", "checked": NOT_ANSWERED, "reboot_ok": True},
     "stage_result: reboot_ok: only the boot stage takes it; leave it out of the sriov_vfio stage's task"),
    ({"stage": "boot", "checked": NOT_ANSWERED, "preview": True},
     "stage_result: preview: only the tenants stage takes it; leave it out of the boot stage's task"),
    ({"stage": "boot", "checked": NOT_ANSWERED, "run": DUE, "reboot_ok": "later"}, "stage_result: reboot_ok: give true or false, got 'later'"),
])
def test_bad_arguments_are_named(args, message):
    result = run(args)
    assert result["failed"] and result["msg"] == message and result["changed"] is False
    assert "result" not in result and "report" not in result


def test_boot_settled_fails_naming_what_the_check_after_the_reboot_still_finds():
    settled = run({"stage": "boot_settled", "run": {"changed": False, "reboot_required": False}})
    assert not settled.get("failed") and settled["unsettled"] == [] and settled["changed"] is False
    left = run({"stage": "boot_settled", "run": {"changed": True, "reboot_required": True, "pending": ["iommu=pt"]}})
    assert left["failed"] and left["unsettled"] == ["a reboot is still required: iommu=pt"]
    assert left["msg"] == "the new kernel is not as the boot stage wants it: a reboot is still required: iommu=pt"


@pytest.mark.parametrize("args, words", [
    ({"stage": "boot_settled", "run": "text"}, "run: give the registered result of the boot stage's check"),
    ({"stage": "boot_settled", "run": {}, "checked": NOT_ANSWERED}, "checked: the boot_settled stage takes only run"),
])
def test_boot_settled_names_a_bad_argument(args, words):
    refused = run(args)
    assert refused["failed"] and words in refused["msg"] and "unsettled" not in refused


RUNNING = {"family": "Debian", "packages": ["libvirt-daemon-system"], "missing": [], "enabled": "enabled", "active": "active",
           "answers": True}
NEW_MOUNT = {"changed": True, "mounts": [{"size": "1G", "path": "/dev/hugepages1G", "mounted": False}]}


@pytest.mark.parametrize("service, run_result, restart", [
    # running before this run mounted a hugetlbfs it did not have: libvirtd restarts to find it
    (RUNNING, NEW_MOUNT, True),
    # the mount was there already, or libvirtd was not running (its start finds the mount)
    (RUNNING, dict(NEW_MOUNT, changed=False, mounts=[{"size": "1G", "path": "/dev/hugepages1G", "mounted": True}]), False),
    (dict(RUNNING, active="inactive"), NEW_MOUNT, False),
    # no mount asked: the call was skipped
    (RUNNING, {"changed": False, "skipped": True}, False),
])
def test_the_libvirt_mounts_result_says_whether_libvirtd_restarts(service, run_result, restart):
    taken = run({"stage": "libvirt_mounts", "checked": NOT_ANSWERED, "run": run_result, "service": service})
    assert not taken.get("failed") and taken["restart_service"] is restart
    assert "restart_service" not in run({"stage": "libvirt_mounts", "checked": NOT_ANSWERED, "run": run_result})


@pytest.mark.parametrize("args, words", [
    ({"stage": "libvirt_mounts", "checked": NOT_ANSWERED, "run": NEW_MOUNT, "service": "active"},
     "stage_result: service: expected the service read (tenant_domain_info's service), got str"),
    ({"stage": "tenants", "checked": NOT_ANSWERED, "service": RUNNING},
     "stage_result: service: only the libvirt_mounts stage takes it; leave it out of the tenants stage's task"),
])
def test_the_service_is_the_libvirt_mounts_stages_only(args, words):
    refused = run(args)
    assert refused["failed"] and refused["msg"] == words
