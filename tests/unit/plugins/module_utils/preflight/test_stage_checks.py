# -*- coding: utf-8 -*-
"""The gate's checks of the host stages, end to end over the lab layout (fakes.kernel.lab_host:
sysfs writes to the FakeKernel stand-in): the gate (preflight_info stage_checks) runs a stage's
call with this run's inputs in check mode and finds the host converged (the same result a
second run of the module gives) or, once the host drifted, not; its result answers a stage only
for exactly the options it checked (the "exactly these inputs" rule); nothing is kept on the host."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import check_result, check_stages
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov
from ansible_collections.gpuvirt.tenancy.plugins.modules import preflight_info, vfio_bind
from conftest import run_module  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.commands import RecordedCommands, standin_reply  # pylint: disable=import-error
from fakes.kernel import GPU_AUDIO, NIC_PF, lab_host_with_nic, lab_host_with_vfs  # pylint: disable=import-error

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
    return run_module(vfio_bind.main, dict(options or OPTIONS), host=host_of(lab), **kwargs)


def gate(lab, stages=None, diff=False):
    run = Run(check_mode=False, diff=diff)
    return check_stages(host_of(lab), stages or {"sriov_vfio": dict(OPTIONS)}, run), run


def test_converged_host_checked_by_the_gate_as_a_second_run_finds_it(lab):
    first = bind(lab)
    assert first["changed"] and not first.get("failed")
    _tree, kernel = lab
    kernel.writes.clear()
    checks, _run = gate(lab)
    check = checks["sriov_vfio"]
    assert check["module"] == "vfio_bind" and check["options"] == OPTIONS
    assert check["error"] is None and check["changed"] is False
    assert not kernel.writes
    second = bind(lab)
    assert second["changed"] is False
    assert dict(check["result"], changed=False) == dict((k, v) for k, v in second.items() if k not in ("invocation",))


@pytest.mark.parametrize("options", [
    {"devices": [GPU]},                                  # an option left out
    {"devices": [GPU], "vfs_of": [PF], "persist": False},  # an option added
    {"devices": [GPU, GPU], "vfs_of": [PF]},             # a value changed
])
def test_the_gate_answers_exactly_the_inputs_it_checked(lab, options):
    bind(lab)
    check = gate(lab)[0]["sriov_vfio"]
    assert check_result(check, OPTIONS) == check["result"] != {}
    assert check_result(check, options) == {}


def test_drift_is_found_and_the_stage_runs(lab):
    bind(lab)
    _tree, kernel = lab
    kernel.write("/sys/bus/pci/devices/%s/driver/unbind" % GPU, GPU)
    assert kernel.driver(GPU) is None
    kernel.writes.clear()
    check = gate(lab)[0]["sriov_vfio"]
    assert check["changed"] is True and check_result(check, OPTIONS) == {}
    assert not kernel.writes and kernel.driver(GPU) is None


def test_in_check_mode_a_check_that_changes_answers_the_stage_with_its_diff(lab):
    # the play's own call would be this very check: a preview shows the gate's check as the stage's
    bind(lab)
    _tree, kernel = lab
    kernel.write("/sys/bus/pci/devices/%s/driver/unbind" % GPU, GPU)
    kernel.writes.clear()
    check = gate(lab, diff=True)[0]["sriov_vfio"]
    answer = check_result(check, OPTIONS, check_mode=True)
    assert answer == check["result"] and answer["changed"] is True
    assert any(GPU in entry["before_header"] + entry["before"] + entry["after"] for entry in answer["diff"])
    assert check_result(check, dict(OPTIONS, persist=False), check_mode=True) == {}
    assert not kernel.writes and kernel.driver(GPU) is None


def test_without_diff_the_check_keeps_no_differences(lab):
    bind(lab)
    _tree, kernel = lab
    kernel.write("/sys/bus/pci/devices/%s/driver/unbind" % GPU, GPU)
    check = gate(lab)[0]["sriov_vfio"]
    assert check["changed"] is True and "diff" not in check["result"]


def test_a_call_that_cannot_be_checked_is_an_error_not_a_failure(lab):
    bind(lab)
    checks, _run = gate(lab, {"sriov_vfio": {"group_policy": "loose", "devices": [GPU]}})
    assert "group_policy" in checks["sriov_vfio"]["error"] and checks["sriov_vfio"]["changed"] is None
    assert check_result(checks["sriov_vfio"], {"group_policy": "loose", "devices": [GPU]}) == {}
    assert check_result(checks["sriov_vfio"], {"group_policy": "loose", "devices": [GPU]}, check_mode=True) == {}


def test_preflight_info_checks_the_stages_in_its_call(lab):
    tree, _kernel = lab
    bind(lab)
    before = sorted(p for p in pathlib.Path(tree.root).rglob("*"))
    result = run_module(preflight_info.main, {"firmware_tool": "none", "stage_checks": {"sriov_vfio": OPTIONS}},
                        host=host_of(lab))
    assert not result.get("failed"), result.get("msg")
    assert result["stage_checks"]["sriov_vfio"]["changed"] is False
    assert result["changed"] is False
    # nothing is kept on the host
    assert sorted(p for p in pathlib.Path(tree.root).rglob("*")) == before


@pytest.mark.parametrize("stage_checks, message", [
    ({"grub": {}}, "stage_checks: grub is not a host stage; give some of boot, libvirt_mounts, sriov_vfio, tenants"),
    ({"tenants": "qemu:///system"}, "stage_checks.tenants: give the options of the tenant_domain call as a dict"),
])
def test_preflight_info_refuses_bad_stage_checks(lab, stage_checks, message):
    result = run_module(preflight_info.main, {"firmware_tool": "none", "stage_checks": stage_checks}, host=host_of(lab))
    assert result["failed"] and message in result["msg"]


# ---- the SR-IOV/VFIO stage's call as site.yml hands it to the gate: the inventory's desired state
# (host_vfio tasks_from options), decided on the host by the check as by the call

STAGE = {"sriov_pfs": [{"pf": PF, "num_vfs": 4}, {"pf": "ens12", "num_vfs": 2}],
         "gpus": [GPU], "gpu_ids": ["1234:11e8"], "devices": [], "group_policy": "strict", "autoprobe": False,
         "persist": True, "force": False}
# the same VFs with a user's explicit per-VF setting by address (vfio_bind's sriov: sriov_vfs's options)
WITH_SETTINGS = {"sriov": {"pfs": [{"pf": PF, "num_vfs": 4}, {"pf": "ens12", "num_vfs": 2}],
                           "vf_settings": [{"address": "0000:84:10.0", "mac": "52:54:00:a0:00:01", "vlan": 101}]},
                 "vfs_of": [PF, "ens12"], "gpus": [GPU], "gpu_ids": ["1234:11e8"], "devices": []}


@pytest.fixture
def nic(tmp_path, monkeypatch):
    """The bare lab layout with the igb PF and the GPU's audio function, ``ip`` the stand-in."""
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    tree, kernel = lab_host_with_nic(tmp_path / "root")
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", tree.root)
    return tree, kernel


def nic_host(nic):
    tree, kernel = nic
    # the running host's: under a capture ip is not asked
    return LiveHost(tree.root, commands=RecordedCommands(replies=[standin_reply("ip")]), kernel=kernel)


def without_vf_settings(result):
    """A vfio_bind result less its invocation and the settings sriov_vfs reports per VF."""
    out = dict((k, v) for k, v in result.items() if k != "invocation")
    pfs = [dict(p, vfs=[dict(vf, settings=None) for vf in p["vfs"]]) for p in out["sriov"]["pfs"]]
    out["sriov"] = dict(out["sriov"], pfs=pfs, vfs_by_pf=dict((p["pf"], p["vfs"]) for p in pfs))
    return out


def test_the_stage_converged_is_answered_by_the_gate_for_exactly_its_call(nic):
    _tree, kernel = nic
    first = run_module(vfio_bind.main, dict(STAGE), host=nic_host(nic))
    assert first["changed"] and not first.get("failed"), first
    assert first["companions"] == [GPU_AUDIO]
    kernel.writes.clear()
    check = check_stages(nic_host(nic), {"sriov_vfio": dict(STAGE)}, Run())["sriov_vfio"]
    assert check["error"] is None and check["changed"] is False, check
    assert not kernel.writes
    second = run_module(vfio_bind.main, dict(STAGE), host=nic_host(nic))
    assert second["changed"] is False
    # the same answer, but that check mode reports the VF settings it wants where a run reads them from ip
    assert without_vf_settings(dict(check["result"], changed=False)) == without_vf_settings(second)
    # what host_vfio publishes from it: the VFs of both PFs, the GPU with its audio function on vfio-pci
    assert [(p["pf"], len(p["vfs"])) for p in check["result"]["sriov"]["pfs"]] == [(PF, 4), (NIC_PF, 2)]
    assert {d["address"] for d in check["result"]["devices"]} >= {GPU, GPU_AUDIO, "0000:84:10.0", "0000:84:10.2"}
    assert check_result(check, dict(STAGE)) == check["result"] != {}


@pytest.mark.parametrize("change", [
    {"sriov_pfs": [{"pf": PF, "num_vfs": 2}, {"pf": "ens12", "num_vfs": 2}]},
    {"gpus": []},
    {"force": True},
])
def test_the_gate_answers_the_stage_only_for_the_inputs_it_checked(nic, change):
    run_module(vfio_bind.main, dict(STAGE), host=nic_host(nic))
    check = check_stages(nic_host(nic), {"sriov_vfio": dict(STAGE)}, Run())["sriov_vfio"]
    assert check_result(check, dict(STAGE)) != {}
    assert check_result(check, dict(STAGE, **change)) == {}


def test_the_gates_sriov_vfio_check_takes_no_tenants(nic):
    """stage_checks.sriov_vfio takes vfio_bind's options: tenants is none of them (the tenants stage gives the tenants'
    VFs their settings), so a call that still gives them is reported as the check's error, naming the option, and
    answers no stage."""
    _tree, kernel = nic
    options = dict(STAGE, tenants=[{"name": "tenant-a", "vfs": ["0000:84:10.0"], "vlan": 101}])
    check = check_stages(nic_host(nic), {"sriov_vfio": options}, Run())["sriov_vfio"]
    assert check["error"].startswith("InputError: stage_checks.sriov_vfio: "), check
    assert "tenants. Supported parameters include" in check["error"] and check["result"] is None
    assert check_result(check, options) == {} and not kernel.writes


def test_a_bare_host_checked_by_the_gate_has_the_stage_to_run(nic):
    _tree, kernel = nic
    check = check_stages(nic_host(nic), {"sriov_vfio": dict(STAGE)}, Run())["sriov_vfio"]
    assert check["error"] is None and check["changed"] is True
    assert check["result"]["vfs_to_come"] == [PF, NIC_PF]
    assert check_result(check, dict(STAGE)) == {} and not kernel.writes


def test_ip_is_asked_once_per_pf_in_a_call_and_again_after_a_change(nic):
    """``ip link show dev PF`` (the VFs' settings) is read once per call, as the host model is: the gate's
    SR-IOV/VFIO and tenants checks read the same PFs. A change of VFs or of their settings in the call
    forgets it, so what the call reports after the change is read again (the ip stand-in keeps state)."""
    host = nic_host(nic)
    first = run_module(vfio_bind.main, dict(WITH_SETTINGS), host=host)
    assert first["changed"] and not first.get("failed"), first
    shows = host.commands.ran("ip", "link", "show", "dev", "ens12")
    sets = host.commands.ran("ip", "link", "set", "dev", "ens12", "vf")
    assert sets and len(shows) == 2, host.commands.calls  # once after the VFs were made, once after their settings
    assert host.commands.calls.index(shows[-1], host.commands.calls.index(sets[-1])) > host.commands.calls.index(sets[-1])
    vlans = dict((vf["address"], (vf["settings"] or {}).get("vlan")) for pf in first["sriov"]["pfs"] for vf in pf["vfs"])
    assert vlans["0000:84:10.0"] == 101
    # a converged host: one read per PF however many of the call's checks plan it
    host = nic_host(nic)
    check = check_stages(host, {"sriov_vfio": dict(WITH_SETTINGS)}, Run())["sriov_vfio"]
    assert check["error"] is None and check["changed"] is False, check
    manager = sriov.SriovManager(host, host.topology())
    assert manager.current_settings("ens12")[0]["vlan"] == 101
    assert len(host.commands.ran("ip", "link", "show", "dev", "ens12")) == 1
