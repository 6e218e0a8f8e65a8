# -*- coding: utf-8 -*-
"""The mlx_rocev2 feature on an injected Host (the module test runs it through Ansible)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import rdma
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import roce
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.rdma import RdmaReader
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.roce import mlx_rocev2, rdma_device
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run

from conftest import FIXTURES  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.rdma import FakeConfigfs, add_port  # pylint: disable=import-error
from fakes.unit_checks import udevadm_verify  # pylint: disable=import-error

ROWS = [(0, "fe80:0000:0000:0000:5054:00ff:fe00:8300", "v2", "ens3"),
        (1, "0000:0000:0000:0000:0000:ffff:c0a8:530a", "v2", "ens3")]
PARAMS = {"device": None, "firmware": {}, "tool": "auto", "rdma_device": "rxe0", "port": 1, "default_roce_mode": "v2",
          "persist": True, "persist_rules_dir": "/etc/udev/rules.d", "persist_script": "/usr/local/sbin/gpuvirt-roce-mode",
          "nccl_env": None, "nccl_env_write": True}


@pytest.mark.parametrize("params, match", [
    ({"rdma_device": "rxe9"}, "no RDMA device rxe9"),
    ({"rdma_device": None, "device": "0000:81:00.0"}, "PF 0000:81:00.0 has no RDMA device"),
])
def test_rdma_device_names_what_is_missing(tmp_path, params, match):
    add_port(tmp_path, "rxe0", 1, ROWS)
    with pytest.raises(InputError, match=match):
        rdma_device(dict(PARAMS, **params), RdmaReader(str(tmp_path)))


def test_check_mode_plans_mode_and_persistence_and_changes_nothing(tmp_path):
    add_port(tmp_path, "rxe0", 1, ROWS)
    fake = FakeConfigfs(tmp_path, [("rxe0", 1)], mode="IB/RoCE v1")
    run = Run(check_mode=True, diff=True)
    result = mlx_rocev2(dict(PARAMS), Host(str(tmp_path), commands=RecordedCommands(), kernel=fake), run)
    assert run.changed is True and result["default_roce_mode"] == "v2"
    assert result["roce_v2_ipv4_index"] == {"rxe0": {"1": 1}}
    assert fake.writes == [] and fake.modes[("rxe0", 1)] == "IB/RoCE v1"
    assert run.diff.entries[0]["after"]["/etc/udev/rules.d/70-gpuvirt-roce-rxe0.rules"].startswith("# Managed")
    assert not (tmp_path / "etc").exists()


@settings(max_examples=60, deadline=None)
@given(st.from_regex(roce.UDEV_NAME, fullmatch=True), st.integers(1, 255), st.sampled_from(["v1", "v2"]))
def test_every_name_roce_accepts_gives_one_rule_for_that_device(name, port, mode):
    roce.udev_device_name(name)
    rule = rdma.persist_rule(name, port, mode, "/usr/local/sbin/gpuvirt-roce-mode")
    rc, output = udevadm_verify(rule)
    assert rc == 0, output
    assert rule.splitlines()[1] == ('ACTION=="add", SUBSYSTEM=="infiniband", KERNEL=="%s", '
                                    'RUN+="/usr/local/sbin/gpuvirt-roce-mode %s %d %s"' % (name, name, port, rdma.ROCE_MODES[mode]))
    assert not set(name) & set("*?[]%$\"\\ ")  # no glob in KERNEL==, no substitution in RUN+=


@pytest.mark.parametrize("name", ['mlx5_0"', "mlx5 0", "mlx5_*", "mlx5_%k", "mlx5_$kernel", "a\\b", "", "x" * 65])
def test_names_a_udev_rule_cannot_hold_are_refused(name):
    with pytest.raises(InputError, match="cannot go into a udev rule"):
        roce.udev_device_name(name)


# --------------------------------------------------------------------------- what the verbs library sees
def _fixture(name):
    with open(os.path.join(FIXTURES, "rdma", name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("fixture, devices", [
    # real ibv_devices outputs (tests/fixtures/rdma, each with its .source.txt)
    ("ibv_devices_empty_softroce-no-devices.txt", []),
    ("ibv_devices_sriov-vfs_zero-node-guid_server.txt", ["mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"]),
])
def test_ibv_devices_lists_the_devices_verbs_see(fixture, devices):
    assert rdma.parse_ibv_devices(_fixture(fixture)) == devices


@pytest.mark.parametrize("fixture, seen", [
    ("ibv_devices_empty_softroce-no-devices.txt", False),  # rdma link shows rxe0, verbs see none: no provider
    ("ibv_devices_sriov-vfs_zero-node-guid_server.txt", False),
])
def test_the_result_says_whether_verbs_see_the_device(tmp_path, fixture, seen):
    add_port(tmp_path, "rxe0", 1, ROWS)
    fake = FakeConfigfs(tmp_path, [("rxe0", 1)], mode="RoCE v2")
    commands = RecordedCommands(replies=[(["ibv_devices"], 0, _fixture(fixture), "")])
    result = mlx_rocev2(dict(PARAMS, persist=False), Host(str(tmp_path), commands=commands, kernel=fake), Run())
    assert result["verbs"]["seen"] is seen and result["verbs"]["tool"] == "/usr/bin/ibv_devices"
    listed = _fixture("ibv_devices_sriov-vfs_zero-node-guid_server.txt").replace("mlx5_3", "rxe0")
    commands = RecordedCommands(replies=[(["ibv_devices"], 0, listed, "")])
    result = mlx_rocev2(dict(PARAMS, persist=False), Host(str(tmp_path), commands=commands, kernel=fake), Run())
    assert result["verbs"] == {"tool": "/usr/bin/ibv_devices", "devices": ["mlx5_2", "mlx5_0", "rxe0", "mlx5_1"], "seen": True}


def test_without_ibv_devices_nothing_is_said_and_a_failing_one_is_an_error(tmp_path):
    add_port(tmp_path, "rxe0", 1, ROWS)
    fake = FakeConfigfs(tmp_path, [("rxe0", 1)], mode="RoCE v2")
    result = mlx_rocev2(dict(PARAMS, persist=False), Host(str(tmp_path), commands=RecordedCommands(), kernel=fake), Run())
    assert result["verbs"] == {"tool": None, "devices": None, "seen": None}
    broken = RecordedCommands(replies=[(["ibv_devices"], 1, "", "Failed to get IB devices list: Function not implemented")])
    with pytest.raises(StateError, match="ibv_devices failed .exit 1.: Failed to get IB devices list"):
        mlx_rocev2(dict(PARAMS, persist=False), Host(str(tmp_path), commands=broken, kernel=fake), Run())
