# -*- coding: utf-8 -*-
"""What a host stage makes of the result it takes (plugin_utils stage_results, the action
stage_result's logic): the gate's check where it answered, else the stage's call, else {}; the
parts each stage publishes (the boot stage's reboot due among them) and the lines it reports."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_results import StageResultError, boot_unsettled, stage_result

# ---- the result a stage takes, and what it publishes from it

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
    outcome = stage_result("boot", checked, run, reboot_ok, check_mode=check_mode)
    assert (outcome["reboot_now"], outcome["reboot_required"], outcome["host_changed"]) == (now, required, host_changed)
    taken = checked["result"] if checked["answered"] else run
    assert outcome["result"] is taken and outcome["pending"] == (taken.get("pending") or [])
    assert outcome["cold_boot_required"] is bool(taken.get("cold_boot_required"))


def test_the_boot_stage_fills_the_parts_a_call_left_null():
    outcome = stage_result("boot", NOT_ANSWERED, BOOT_DUE)
    assert outcome["firmware_state"] == {"pending": [], "cold_boot": [], "reset": [], "messages": []}
    assert outcome["gpu_stack_plan"] == {"active": True}
    assert stage_result("boot", NOT_ANSWERED, FIRMWARE_WAITS)["gpu_stack_plan"] == {}


def test_a_stage_that_asked_nothing_publishes_empty_parts():
    # host_vfio with no PF, GPU or device in the inventory: its call was skipped and the gate checked none
    outcome = stage_result("sriov_vfio", NOT_ANSWERED, dict(SKIPPED))
    assert outcome == {"result": {}, "stage_changed": False, "host_changed": False, "bound": [], "companions": [], "isolation": {},
                       "sriov": {}, "report": []}
    # the libvirt host role's mounts, not asked for: the gate_check task itself was skipped
    assert stage_result("libvirt_mounts", dict(SKIPPED), dict(SKIPPED)) == {"result": {}, "stage_changed": False,
                                                                            "host_changed": False, "report": []}


def test_the_sriov_vfio_and_tenants_parts():
    vfio = {"changed": True, "devices": [{"address": "0000:19:00.2"}], "companions": [], "isolation": {"ok": True},
            "sriov": {"changed": True}}
    outcome = stage_result("sriov_vfio", answered(vfio), None, check_mode=True)
    assert outcome["bound"] == vfio["devices"] and outcome["sriov"] == {"changed": True} and not outcome["host_changed"]
    tenants = {"changed": False, "plan": {"placements": {}}, "foreign": {"legacy": {}}, "removed": ["tenant-z"],
               "restart_required": []}
    outcome = stage_result("tenants", NOT_ANSWERED, tenants)
    assert (outcome["plan"], outcome["foreign"], outcome["removed"]) == ({"placements": {}}, {"legacy": {}}, ["tenant-z"])


@pytest.mark.parametrize("args, words", [
    (("boot", "not checked"), "checked: give gate_check's registered result \\(a dict\\), got str"),
    (("boot", NOT_ANSWERED, ["x"]), "run: give stage_call's registered result \\(a dict\\), or none where it did not run; got list"),
    (("firmware", NOT_ANSWERED, None), "stage: give one of boot, sriov_vfio, tenants, libvirt_mounts, got 'firmware'"),
    (("boot", answered(["not", "a", "dict"]), None), "the boot stage's result is not a dict"),
    (("boot", NOT_ANSWERED, BOOT_DUE, "maybe"), "reboot_ok: give true or false, got 'maybe'"),
    (("tenants", NOT_ANSWERED, {"changed": False}, False, "perhaps"), "preview: give true or false, got 'perhaps'"),
])
def test_a_bad_input_is_named(args, words):
    with pytest.raises(StageResultError, match=words):
        stage_result(*args)


# ---- the SR-IOV/VFIO stage's notes


@pytest.mark.parametrize("result, lines", [
    ({"changed": False, "isolation": {"viable": True, "reasons": []}}, []),
    ({"vfs_to_come": ["0000:81:00.0"]},
     ["check mode: the VFs of 0000:81:00.0 do not exist yet (this call creates them); a run binds them to vfio-pci"]),
    ({"isolation": {"viable": False, "reasons": ["0000:07:00.0 shares IOMMU group 12 with 0000:07:00.1"]}},
     ["Not isolated for multi-tenant use: 0000:07:00.0 shares IOMMU group 12 with 0000:07:00.1"]),
])
def test_the_sriov_vfio_notes_are_one_line_each(result, lines):
    assert stage_result("sriov_vfio", NOT_ANSWERED, result)["report"] == lines


# ---- the boot stage's notes


@pytest.mark.parametrize("result, lines", [
    ({"changed": False}, []),
    ({"firmware": {"messages": ["0000:41:00.0: SRIOV_EN set, applied at the next firmware reset"], "cold_boot": []},
      "gpu_stack": {"notes": ["nvidia-persistenced: stopped and disabled"]}},
     ["0000:41:00.0: SRIOV_EN set, applied at the next firmware reset", "nvidia-persistenced: stopped and disabled"]),
    # the daemons the boot stage stops are said in the report, with the capture's record they were read from
    ({"gpu_stack": {"notes": [], "daemons_stopped": ["nvidia-persistenced.service", "nvidia-fabricmanager.service"],
                    "daemons_source": "/.capture/systemctl-show-nvidia.txt"}},
     ["host daemons the boot stage stops and disables (systemctl disable --now): nvidia-persistenced.service, "
      "nvidia-fabricmanager.service (as /.capture/systemctl-show-nvidia.txt records them)"]),
    ({"gpu_stack": {"notes": [], "daemons_stopped": ["dcgm.service"], "daemons_source": None}},
     ["host daemons the boot stage stops and disables (systemctl disable --now): dcgm.service"]),
    ({"firmware": {"messages": [], "cold_boot": ["0000:41:00.0", "0000:41:00.1"]}, "cold_boot_required": ["0000:41:00.0", "0000:41:00.1"]},
     ["COLD BOOT NEEDED: 2 ConnectX PF(s) (0000:41:00.0, 0000:41:00.1) hold firmware settings that only a power cycle loads; "
      "power the host off and on, then run the boot stage again."]),
])
def test_the_boot_notes_are_one_line_each(result, lines):
    assert stage_result("boot", answered(result), None)["report"] == lines


def test_the_notes_say_what_acs_could_not_write():
    note = "ACS: the running kernel 5.15.0-91-generic has no pci=config_acs= (it came with Linux 6.11, ...)"
    assert stage_result("boot", NOT_ANSWERED, {"acs": {"notes": [note]}})["report"] == [note]
    assert stage_result("boot", NOT_ANSWERED, {"acs": None})["report"] == []


def test_the_tenants_report_shows_vf_settings_only_in_a_preview():
    """The tenants stage's report is plugin_utils tenant_report's (tests/unit/plugins/plugin_utils/test_tenant_report.py),
    its VF settings part only with preview true, given as a task gives it (text included)."""
    vf = [{"pf": "0000:19:00.0", "vfs": [{"index": 0, "mac": "52:54:00:00:00:01", "vlan": 100}]}]
    result = {"changed": False, "plan": {"notes": [], "unplaced": {}}, "vf_settings": vf}
    label = "VF settings the tenants get (preview: the PFs' settings are not read under a capture)"
    assert stage_result("tenants", NOT_ANSWERED, result)["report"] == []
    assert stage_result("tenants", NOT_ANSWERED, result, preview="False")["report"] == []
    assert stage_result("tenants", answered(result), None, preview="true")["report"] == [{label: vf}]


# ---- the boot stage's check after its reboot (stage boot_settled)

POOL = {"node": 0, "size": "1G", "requested": 8, "allocated": 8, "free": 8, "at_boot": True}


@pytest.mark.parametrize("after, words", [
    ({"changed": False, "reboot_required": False, "hugepages": {"changed": False, "pages": [POOL]}}, []),
    ({"changed": False, "reboot_required": False}, []),
    ({"reboot_required": True, "pending": ["kernel command line"]}, ["a reboot is still required: kernel command line"]),
    ({"hugepages": {"changed": True, "pages": [dict(POOL, allocated=6)]}},
     ["the hugepage pools would still change", "1G pages on node 0: 6 allocated of 8 requested"]),
    ({"failed": True, "msg": "grub_file: missing"}, ["the check failed: grub_file: missing"]),
])
def test_the_new_kernel_is_settled_when_nothing_is_left_to_do(after, words):
    assert boot_unsettled(after) == words


def test_the_check_after_the_reboot_must_be_a_result():
    with pytest.raises(StageResultError, match="run: give the registered result of the boot stage's check"):
        boot_unsettled(None)
