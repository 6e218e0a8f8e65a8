# -*- coding: utf-8 -*-
"""sriov_vfs end to end over fake roots: the lab layout and the ConnectX-4 Lx host of
iommu/iommu-groups_cx4lx-pf-and-vfs-all-in-group1_no-acs.txt. sysfs writes go to the
FakeKernel stand-in, ``ip`` is the stand-in in tests/unit/fakes/standins."""

from __future__ import annotations

import json
import os

import pytest

from fakes import STANDINS  # pylint: disable=import-error
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import boot_script as boot
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import sriov
from ansible_collections.gpuvirt.tenancy.plugins.modules import sriov_vfs
from conftest import run_module  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host, lab_host  # pylint: disable=import-error

STAND_INS = STANDINS
PF = "0000:81:00.0"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    host, kernel = lab_host(tmp_path / "root")
    monkeypatch.setattr(sriov, "ROOT", host.root)
    monkeypatch.setattr(sriov, "WRITER", kernel)
    return host, kernel


@pytest.fixture
def cx4(tmp_path, monkeypatch):
    host, kernel = cx4lx_no_acs_host(tmp_path / "root")
    monkeypatch.setattr(sriov, "ROOT", host.root)
    monkeypatch.setattr(sriov, "WRITER", kernel)
    monkeypatch.setenv("PATH", os.path.abspath(STAND_INS) + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", host.root)
    return host, kernel


def test_converge_then_nothing_to_do(lab):
    host, kernel = lab
    args = {"pf": PF, "num_vfs": 4, "autoprobe": False}
    first = run_module(sriov_vfs.main, args)
    assert first["changed"] and not first.get("failed")
    assert [(v["address"], v["driver"], v["numa_node"]) for v in first["vfs"]] == [
        ("0000:81:00.%d" % i, None, 1) for i in range(1, 5)]
    assert first["isolation"]["viable"] is True
    assert len({v["iommu_group"] for v in first["vfs"]}) == 4
    assert sorted(first["persisted_files"]) == sorted([boot.SRIOV_CONFIG, boot.SCRIPT_PATH, boot.UNIT_DIR + "/" + boot.SRIOV_UNIT])
    config = json.load(open(host.p(boot.SRIOV_CONFIG), encoding="utf-8"))
    assert config == {"pfs": {PF: {"num_vfs": 4, "autoprobe": False}}}
    assert os.path.islink(host.p(boot.WANTS_DIR + "/" + boot.SRIOV_UNIT))
    kernel.writes.clear()
    second = run_module(sriov_vfs.main, args)
    assert second["changed"] is False and not kernel.writes


def test_check_mode_and_diff_change_nothing(lab):
    host, kernel = lab
    run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 4, "autoprobe": False})
    kernel.writes.clear()
    result = run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 2}, check_mode=True, diff=True)
    assert result["changed"] and result["recreated"] and result["num_vfs"] == 2
    assert [v["address"] for v in result["vfs"]] == ["0000:81:00.1", "0000:81:00.2"]   # from sriov_offset/stride
    state = result["diff"][0]
    assert '"num_vfs": 4' in state["before"] and '"num_vfs": 2' in state["after"]
    assert any(d["before_header"] == boot.SRIOV_CONFIG for d in result["diff"])
    assert not kernel.writes
    assert '"num_vfs": 4' in open(host.p(boot.SRIOV_CONFIG), encoding="utf-8").read()


def test_refusal_is_a_failure_naming_the_vf(lab):
    host, kernel = lab
    run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 4, "autoprobe": False})
    host.write("/etc/libvirt/qemu/tenant-a.xml",
               "<domain type='kvm'><name>tenant-a</name><devices><hostdev mode='subsystem' type='pci'><source>"
               "<address domain='0x0000' bus='0x81' slot='0x00' function='0x1'/></source></hostdev></devices></domain>")
    kernel.writes.clear()
    result = run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 2})
    assert result["failed"] and "0000:81:00.1: attached to libvirt domain tenant-a" in result["msg"]
    assert not kernel.writes
    forced = run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 2, "force": True})
    assert forced["changed"] and forced["num_vfs"] == 2


def test_input_error_is_a_failure(lab):
    result = run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 9})
    assert result["failed"] and "num_vfs: 9 is outside 0-4" in result["msg"]


def test_connectx_vf_settings_and_shared_group(cx4):
    host, _kernel = cx4
    args = {"pf": "enp1s0f0np0", "num_vfs": 4, "persist": False,
            "vfs": [{"index": 0, "mac": "52:54:00:A0:00:01", "vlan": 101},
                    {"index": 1, "mac": "52:54:00:b0:00:01", "vlan": 102, "qos": 3, "link_state": "enable"}]}
    first = run_module(sriov_vfs.main, args, diff=True)
    assert first["changed"] and not first["recreated"] and first["pf"] == "0000:01:00.0"
    settings = {v["index"]: v["settings"] for v in first["vfs"]}
    assert settings[0] == {"mac": "52:54:00:a0:00:01", "vlan": 101, "qos": 0, "spoofchk": True, "trust": False,
                           "link_state": "auto"}
    assert (settings[1]["vlan"], settings[1]["qos"], settings[1]["link_state"]) == (102, 3, "enable")
    assert first["isolation"]["viable"] is False
    assert any("shares IOMMU group 1" in r for r in first["isolation"]["reasons"])
    assert first["persisted_files"] == [] and not os.path.exists(host.p(boot.SRIOV_CONFIG))
    second = run_module(sriov_vfs.main, args)
    assert second["changed"] is False


def test_vf_named_by_address_and_count_only_run_keeps_settings(cx4):
    host, _kernel = cx4
    settings = {"pf": "0000:01:00.0", "num_vfs": 4, "vfs": [{"address": "0000:01:00.4", "mac": "52:54:00:c0:00:01", "vlan": 7}]}
    first = run_module(sriov_vfs.main, settings)
    assert first["changed"]
    assert [v["settings"]["vlan"] for v in first["vfs"] if v["address"] == "0000:01:00.4"] == [7]
    config = json.load(open(host.p(boot.SRIOV_CONFIG), encoding="utf-8"))
    assert config["pfs"]["0000:01:00.0"]["vfs"][0]["index"] == 2
    count_only = run_module(sriov_vfs.main, {"pf": "0000:01:00.0", "num_vfs": 4})
    assert count_only["changed"] is False
    bad = run_module(sriov_vfs.main, {"pf": "0000:01:00.0", "vfs": [{"address": "0000:01:00.1", "vlan": 3}]})
    assert bad["failed"] and "0000:01:00.1 is not one of the 4 VFs" in bad["msg"]
