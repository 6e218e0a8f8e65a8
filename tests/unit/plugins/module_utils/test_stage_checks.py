# -*- coding: utf-8 -*-
"""The gate's checks of recorded stage calls, end to end: a stage module run with `record` over
the lab layout (fakes.kernel.lab_host: sysfs writes to the FakeKernel stand-in) keeps its options,
the gate (preflight_info stage_checks) runs them again in check mode and finds the host
converged (the same result a second run of the module gives) or, once the host drifted or the
options differ, not; a check mode run or a failed run records nothing."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import stage_record
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.stage_checks import check_stages
from ansible_collections.gpuvirt.tenancy.plugins.modules import preflight_info, vfio_bind
from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import lab_host_with_vfs  # pylint: disable=import-error

PF = "0000:81:00.0"
GPU = "0000:82:00.0"
OPTIONS = {"devices": [GPU], "vfs_of": [PF]}


@pytest.fixture
def lab(tmp_path):
    return lab_host_with_vfs(tmp_path / "root")


def host_of(lab):
    tree, kernel = lab
    return Host(tree.root, commands=RecordedCommands(), kernel=kernel)


def bind(lab, options=None, **kwargs):
    options = dict(options or OPTIONS)
    args = dict(options, record={"stage": "sriov_vfio", "digest": stage_record.options_digest(options)})
    return run_module(vfio_bind.main, args, host=host_of(lab), **kwargs)


def gate(lab, stages=None):
    run = Run(check_mode=False)
    return check_stages(host_of(lab), stages or {"sriov_vfio": {}}, run), run


def test_converged_host_checked_by_the_gate_as_a_second_run_finds_it(lab):
    first = bind(lab)
    assert first["changed"] and not first.get("failed")
    record = stage_record.read_records(host_of(lab))["sriov_vfio"]
    assert record["module"] == "vfio_bind" and record["params"] == OPTIONS
    _tree, kernel = lab
    kernel.writes.clear()
    checks, _run = gate(lab)
    check = checks["sriov_vfio"]
    assert check["recorded"] and check["error"] is None and check["changed"] is False
    assert not kernel.writes
    second = bind(lab)
    assert second["changed"] is False
    assert dict(check["result"], changed=False) == dict((k, v) for k, v in second.items() if k not in ("invocation",))
    assert stage_record.check_result(check, OPTIONS) == check["result"]
    assert stage_record.check_result(check, {"devices": [GPU]}) == {}


def test_drift_is_found_and_the_stage_runs(lab):
    bind(lab)
    _tree, kernel = lab
    kernel.write("/sys/bus/pci/devices/%s/driver/unbind" % GPU, GPU)
    assert kernel.driver(GPU) is None
    kernel.writes.clear()
    check = gate(lab)[0]["sriov_vfio"]
    assert check["changed"] is True and stage_record.check_result(check, OPTIONS) == {}
    assert not kernel.writes and kernel.driver(GPU) is None


def test_check_mode_and_failed_runs_record_nothing(lab):
    tree, _kernel = lab
    assert bind(lab, check_mode=True)["changed"]
    assert not os.path.exists(tree.p(stage_record.RECORDS_PATH))
    failed = bind(lab, {"devices": ["0000:00:05.0"]})
    assert failed["failed"]
    assert not os.path.exists(tree.p(stage_record.RECORDS_PATH))
    assert gate(lab)[0]["sriov_vfio"] == {"recorded": False, "module": None, "digest": None, "changed": None,
                                          "result": None, "error": None}


def test_a_record_that_cannot_be_checked_is_an_error_not_a_failure(lab):
    tree, _kernel = lab
    path = tree.p(stage_record.RECORDS_PATH)
    os.makedirs(os.path.dirname(path))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"format": 1, "stages": {
            "boot": {"module": "mig_profile", "digest": "d", "params": {}},
            "sriov_vfio": {"module": "vfio_bind", "digest": "d", "params": {"group_policy": "loose", "devices": [GPU]}}}},
            handle)
    checks, _run = gate(lab, {"boot": {}, "sriov_vfio": {}})
    assert "not a stage module" in checks["boot"]["error"]
    assert "group_policy" in checks["sriov_vfio"]["error"] and checks["sriov_vfio"]["changed"] is None


def test_preflight_info_checks_the_stages_in_its_call(lab):
    tree, _kernel = lab
    bind(lab)
    result = run_module(preflight_info.main, {"firmware_tool": "none", "stage_checks": {"sriov_vfio": {}, "tenants": {}}},
                        host=host_of(lab))
    assert not result.get("failed"), result.get("msg")
    assert result["stage_checks"]["sriov_vfio"]["changed"] is False
    assert result["stage_checks"]["tenants"]["recorded"] is False
    assert result["changed"] is False
    assert os.path.exists(tree.p(stage_record.RECORDS_PATH))


@pytest.mark.parametrize("stage_checks, message", [
    ({"grub": {}}, "stage_checks: grub is not a host stage; give some of boot, sriov_vfio, tenants"),
    ({"tenants": "qemu:///system"}, "stage_checks.tenants: give a dict of options"),
])
def test_preflight_info_refuses_bad_stage_checks(lab, stage_checks, message):
    result = run_module(preflight_info.main, {"firmware_tool": "none", "stage_checks": stage_checks}, host=host_of(lab))
    assert result["failed"] and message in result["msg"]
