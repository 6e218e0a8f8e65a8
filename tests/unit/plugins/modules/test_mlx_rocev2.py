# -*- coding: utf-8 -*-
"""mlx_rocev2 end to end on an injected Host: a fake sysfs tree in a temporary directory, the fake
configfs as its kernel side, and tests/unit/fakes/standins/mlxconfig on PATH. The stand-in is NOT
the real mlxconfig: it replays the real output formats and keeps Default/Current/Next state in a
JSON file the way the firmware does."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import mlx_rocev2

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import Host

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.rdma import BOOLEAN, FakeConfigfs, add_port, firmware_tool_on_path  # pylint: disable=import-error

PF = "0000:81:00.0"
# rows of the real H100 capture (tests/fixtures/rdma/show_gids_h100-host_...): IPv4 RoCE v2 at 3
H100_ROWS = [
    (0, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v1", "ens3np0"),
    (1, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v2", "ens3np0"),
    (2, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v1", "ens3np0"),
    (3, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v2", "ens3np0"),
]


@pytest.fixture
def host(tmp_path, monkeypatch):
    root = tmp_path / "root"
    add_port(root, "mlx5_0", 1, H100_ROWS, pci=PF)
    fake = FakeConfigfs(root, [("mlx5_0", 1)], mode="IB/RoCE v1")
    lock = root / "sys" / "kernel" / "security" / "lockdown"
    lock.parent.mkdir(parents=True)
    lock.write_text("[none] integrity confidentiality\n")
    state = firmware_tool_on_path(tmp_path, monkeypatch, {PF: {"device_type": "ConnectX5", "params": [
        ["SRIOV_EN", {"default": "False(0)", "current": "False(0)", "next": "False(0)", "choices": BOOLEAN}],
        ["NUM_OF_VFS", {"default": "0", "current": "0", "next": "0"}],
        ["LINK_TYPE_P1", {"default": "ETH(2)", "current": "ETH(2)", "next": "ETH(2)", "choices": {"IB": 1, "ETH": 2, "VPI": 3}}],
    ]}})
    return {"root": str(root), "fake": fake, "state": state, "tmp": tmp_path,
            "args": {"persist_rules_dir": "/etc/udev/rules.d", "persist_script": "/usr/local/sbin/gpuvirt-roce-mode"}}


def mlx(host, args, commands=None, **kwargs):
    """Run the module on a Host over the fake tree, the fake configfs as its kernel; commands
    are the module's own (the stand-in on PATH) unless given."""
    return run_module(mlx_rocev2.main, args, host=Host(host["root"], commands=commands, kernel=host["fake"]), **kwargs)


def under_root(host, path):
    return os.path.join(host["root"], path.lstrip("/"))


def runs(host):
    path = host["state"] + ".log"
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as log:
        return [json.loads(line) for line in log]


def power_cycle(host):
    data = json.loads(open(host["state"], encoding="utf-8").read())
    for dev in data["devices"].values():
        for _name, param in dev["params"]:
            param["current"] = param["next"]
    with open(host["state"], "w", encoding="utf-8") as handle:
        json.dump(data, handle)


FIRMWARE = {"SRIOV_EN": True, "NUM_OF_VFS": 8, "LINK_TYPE_P1": "ETH"}


def test_firmware_and_roce_mode_then_idempotent(host):
    args = dict(host["args"], device=PF, firmware=FIRMWARE)
    first = mlx(host, args, diff=True)
    assert not first.get("failed"), first
    assert first["changed"] is True
    assert first["firmware_changes"] == {"SRIOV_EN": "True", "NUM_OF_VFS": "8"}
    assert first["firmware"]["SRIOV_EN"] == {"default": "False(0)", "current": "False(0)", "next": "True(1)"}
    assert first["reboot_required"] is True and first["pending_parameters"] == ["NUM_OF_VFS", "SRIOV_EN"]
    assert ["-y", "-d", PF, "set", "NUM_OF_VFS=8", "SRIOV_EN=True"] in runs(host)
    assert first["rdma_device"] == "mlx5_0"  # derived from the PF
    assert first["default_roce_mode"] == "v2" and host["fake"].modes[("mlx5_0", 1)] == "RoCE v2"
    assert first["roce_v2_ipv4_index"] == {"mlx5_0": {"1": 3}}
    assert [r["index"] for r in first["gid_table"]] == [0, 1, 2, 3]
    assert first["diff"][0]["before"]["default_roce_mode"] == "v1"
    assert first["diff"][0]["before"]["firmware"]["NUM_OF_VFS"] == "0"
    rule = open(under_root(host, "/etc/udev/rules.d/70-gpuvirt-roce-mlx5_0.rules"), encoding="utf-8").read()
    assert 'KERNEL=="mlx5_0"' in rule
    assert os.access(under_root(host, host["args"]["persist_script"]), os.X_OK)

    second = mlx(host, args)
    assert second["changed"] is False
    assert second["firmware_changes"] == {}
    assert second["reboot_required"] is True  # Next Boot still differs from Current
    assert len([r for r in runs(host) if "set" in r]) == 1

    power_cycle(host)
    third = mlx(host, args)
    assert third["changed"] is False and third["reboot_required"] is False


def test_check_mode_changes_nothing(host):
    args = dict(host["args"], device=PF, firmware=FIRMWARE)
    result = mlx(host, args, check_mode=True, diff=True)
    assert result["changed"] is True
    assert result["firmware"]["NUM_OF_VFS"]["next"] == "8"
    assert result["reboot_required"] is True
    assert not [r for r in runs(host) if "set" in r]
    assert host["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"
    assert not os.path.exists(under_root(host, host["args"]["persist_rules_dir"]))


def test_unknown_parameter_refused_nothing_set(host):
    result = mlx(host, dict(host["args"], device=PF, firmware={"NUM_OF_PF": 2, "SRIOV_EN": True}))
    assert result["failed"] and "does not know NUM_OF_PF" in result["msg"]
    assert not [r for r in runs(host) if "set" in r]
    assert host["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"


def test_device_not_found(host):
    result = mlx(host, dict(host["args"], device="0000:99:00.0", firmware={"SRIOV_EN": True}))
    assert result["failed"] and "no PCI device 0000:99:00.0" in result["msg"]
    assert runs(host) == []


def test_device_known_to_sysfs_but_not_to_the_tool(host):
    os.makedirs(os.path.join(host["root"], "sys/bus/pci/devices/0000:82:00.0"))
    result = mlx(host, dict(host["args"], device="0000:82:00.0", firmware={"SRIOV_EN": True},
                            default_roce_mode="unchanged"))
    assert result["failed"] and result["error_kind"] == "device_not_found"
    assert "Failed to open the device" in result["msg"]


def test_lockdown(host):
    data = json.loads(open(host["state"], encoding="utf-8").read())
    data["lockdown"] = True
    open(host["state"], "w", encoding="utf-8").write(json.dumps(data))
    lock = os.path.join(host["root"], "sys/kernel/security/lockdown")
    open(lock, "w", encoding="utf-8").write("none [integrity] confidentiality\n")
    result = mlx(host, dict(host["args"], device=PF, firmware={"SRIOV_EN": True}))
    assert result["failed"] and result["error_kind"] == "lockdown"
    assert "Secure Boot" in result["msg"]


def test_tool_missing(host):
    result = mlx(host, dict(host["args"], device=PF, firmware={"SRIOV_EN": True}, tool="mstconfig"),
                 commands=RecordedCommands(programs=["mlxconfig"]))
    assert result["failed"] and "mstconfig not found" in result["msg"]


def test_rdma_only_on_soft_roce(host):
    add_port(host["root"], "rxeB", 1, [
        (0, "fe80:0000:0000:0000:5054:00ff:fe00:8300", "v2", "vB"),
        (1, "fd00:000b:0000:0000:0000:0000:0000:0010", "v2", "vB"),
        (2, "0000:0000:0000:0000:0000:ffff:c0a8:540a", "v2", "vB"),
    ])
    host["fake"].modes[("rxeB", 1)] = "RoCE v2"
    args = dict(host["args"], rdma_device="rxeB", persist=False)
    result = mlx(host, args)
    assert result["changed"] is False  # already RoCE v2, nothing persisted
    assert result["roce_v2_ipv4_index"] == {"rxeB": {"1": 2}}
    assert result["gid_table"][2]["ipv4"] == "192.168.84.10"
    assert "firmware" not in result and runs(host) == []


@pytest.mark.parametrize("args, match", [
    ({}, "device or rdma_device"),
    ({"rdma_device": "rxe9"}, "no RDMA device rxe9"),
    ({"rdma_device": "mlx5_0", "port": 2}, "has no port 2"),
    ({"firmware": {"SRIOV_EN": True}, "rdma_device": "mlx5_0"}, "device: firmware settings need"),
])
def test_bad_inputs(host, args, match):
    result = mlx(host, dict(host["args"], **args))
    assert result["failed"] and match in result["msg"]
    assert host["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"
