# -*- coding: utf-8 -*-
"""preflight_info as Ansible runs it, over the real capture of the bare lab VM and over the
ConnectX-4 Lx tree with tests/unit/fakes/standins/mlxconfig (a STAND-IN for mlxconfig: real output
format, firmware state in a JSON file) on PATH."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import preflight_info

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from conftest import LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host  # pylint: disable=import-error
from fakes.rdma import BOOLEAN, firmware_tool_on_path  # pylint: disable=import-error
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

HERE = os.path.dirname(__file__)
BARE = lab_capture("bare")


def test_reads_the_bare_lab_capture_in_check_mode():
    commands = RecordedCommands()
    result = run_module(preflight_info.main, {"gpu_ids": ["1234:11e8"], "nic_ids": ["1b36:0010"]}, check_mode=True,
                        host=Host(BARE, commands=commands))
    assert commands.calls == []
    assert result["changed"] is False and result["firmware"] == {}
    topo = result["topology"]
    assert topo["iommu"]["firmware_table"] == "DMAR" and topo["iommu"]["enabled"] is False
    assert [g["address"] for g in topo["gpus"]] == ["0000:82:00.0"]
    assert topo["pci_devices"]["0000:81:00.0"]["sriov_totalvfs"] == 4


def test_queries_connectx_firmware_with_the_tool_on_path(tmp_path, monkeypatch):
    host, _kernel = cx4lx_no_acs_host(tmp_path / "root")
    firmware_tool_on_path(tmp_path, monkeypatch, dict((pf, {"device_type": "ConnectX4LX", "params": [
        ["SRIOV_EN", {"default": "False(0)", "current": "True(1)", "next": "True(1)", "choices": BOOLEAN}],
        ["NUM_OF_VFS", {"default": "0", "current": "8", "next": "8"}]]}) for pf in ("0000:01:00.0", "0000:01:00.1")), name="mstconfig")
    result = run_module(preflight_info.main, {}, check_mode=True, host=Host(host.root))
    assert result["changed"] is False
    fw = result["firmware"]["0000:01:00.0"]
    assert fw["status"] == "ok" and fw["tool"].endswith("/mstconfig")
    assert fw["params"]["SRIOV_EN"]["current"] == "True(1)" and fw["params"]["NUM_OF_VFS"]["next"] == "8"
    skipped = run_module(preflight_info.main, {"firmware_tool": "none"}, host=Host(host.root))
    assert skipped["firmware"] == {}


def test_missing_tool_is_reported_not_failed(tmp_path):
    host, _kernel = cx4lx_no_acs_host(tmp_path / "root")
    result = run_module(preflight_info.main, {}, host=Host(host.root, commands=RecordedCommands()))
    assert "failed" not in result
    assert set(e["status"] for e in result["firmware"].values()) == {"tool not found"}


def test_bad_id_fails_naming_the_input():
    result = run_module(preflight_info.main, {"root": BARE, "gpu_ids": ["zzzz:1"]})
    assert result["failed"] and "gpu_ids/nic_ids" in result["msg"] and "zzzz:1" in result["msg"]


def test_reads_libvirt_in_the_same_call(libvirt_conn):
    """With ``libvirt`` (tenant_domain_info's options) the domains come with the host model, read in
    this one call over the libvirt test driver."""
    del libvirt_conn
    result = run_module(preflight_info.main, {"libvirt": {"names": ["tenant-a"], "uri": URI}}, check_mode=True,
                        host=Host(BARE, commands=RecordedCommands()))
    assert result["changed"] is False and result["topology"]["numa_nodes"]
    read = result["libvirt"]
    assert read["domains_read"] and read["domains"] == {} and "test" in read["foreign"] and read["service"] is None
    assert read["query"] == {"names": ["tenant-a"], "foreign": True, "uri": URI, "service": None}
    assert run_module(preflight_info.main, {}, host=Host(BARE, commands=RecordedCommands()))["libvirt"] == {}


@pytest.mark.parametrize("params", [{}, {"libvirt": {}}, {"stage_checks": {}}, {"libvirt": {}, "stage_checks": {}}])
def test_libvirt_and_stage_checks_omitted_or_empty_are_not_asked(params):
    """The role preflight passes its defaults as they are: {} reads no libvirt and checks no stage."""
    result = run_module(preflight_info.main, dict(params, firmware_tool="none"), host=Host(BARE, commands=RecordedCommands()))
    assert not result.get("failed"), result.get("msg")
    assert result["libvirt"] == {} and result["stage_checks"] == {} and result["topology"]["numa_nodes"]


def test_a_libvirt_that_does_not_answer_does_not_fail_the_preflight():
    result = run_module(preflight_info.main, {"libvirt": {"names": [], "uri": "test:///no/such/definitions.xml"}},
                        host=Host(BARE, commands=RecordedCommands()))
    assert "failed" not in result and result["topology"]["numa_nodes"]
    assert result["libvirt"]["domains_read"] is False and "cannot connect" in result["libvirt"]["message"]


def test_bad_libvirt_options_fail_naming_the_option():
    result = run_module(preflight_info.main, {"libvirt": {"foreign": True}}, host=Host(BARE, commands=RecordedCommands()))
    assert result["failed"] and result["msg"].startswith("libvirt: ") and "names" in result["msg"]
    assert "gpuvirt.tenancy.tenant_domain_info" in result["msg"]
