# -*- coding: utf-8 -*-
"""mlx_rocev2 end to end on an injected Host: a fake sysfs tree in a temporary directory, the fake
configfs as its kernel side, and tests/unit/fakes/standins/mlxconfig on PATH. The stand-in is NOT
the real mlxconfig: it replays the real output formats and keeps Default/Current/Next state in a
JSON file the way the firmware does."""

from __future__ import annotations

import json
import re
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import mlx_rocev2

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.packages import dpkg  # pylint: disable=import-error
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


def test_num_of_vfs_above_the_cards_maximum_is_refused_by_the_set_and_nothing_changes(host):
    """The card's maximum is not in the query output; mlxconfig checks it before writing
    (the stand-in's "max", as mstflint's TLVConf::checkRules) and the module names it."""
    data = json.loads(open(host["state"], encoding="utf-8").read())
    dict(data["devices"][PF]["params"])["NUM_OF_VFS"]["max"] = 127
    with open(host["state"], "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    before = open(host["state"], encoding="utf-8").read()
    result = mlx(host, dict(host["args"], device=PF, firmware=dict(FIRMWARE, NUM_OF_VFS=128)))
    assert result["failed"] and result["error_kind"] == "above_maximum"
    assert result["msg"].startswith("firmware.NUM_OF_VFS: the firmware of %s allows at most 127 (" % PF)
    assert result["msg"].endswith("): give at most 127")
    assert open(host["state"], encoding="utf-8").read() == before
    assert host["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"
    assert not os.path.exists(under_root(host, host["args"]["persist_rules_dir"]))


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


@pytest.mark.parametrize("value, message", [
    (-5, "firmware.NUM_OF_VFS: -5 is not a VF count"),
    (100000, "firmware.NUM_OF_VFS: 100000 is not a VF count"),
    (2 ** 40, "is not a VF count"),
    ("8 SRIOV_EN=0", "is not a value mlxconfig sets"),
    (True, "is not a VF count"),
    ("08x", "is not a VF count"),
])
def test_a_vf_count_no_card_has_is_refused_before_any_set(host, value, message):
    result = mlx(host, dict(host["args"], device=PF, firmware={"SRIOV_EN": True, "NUM_OF_VFS": value}))
    assert result["failed"] and message in result["msg"], result
    assert result["changed"] is False and not [r for r in runs(host) if "set" in r]
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


# ---- nccl_env in the same call (the options of nccl_env, checked against its own argument spec)

HOSTS = "127.0.0.1\tlocalhost\n"
ENTRIES = [{"ip": "192.168.83.10", "names": ["tenant-a-rdma"]}, {"ip": "192.168.84.10", "names": ["tenant-b-rdma"]}]
BLOCK = ("# BEGIN gpuvirt.tenancy guest_rdma\n192.168.83.10 tenant-a-rdma\n192.168.84.10 tenant-b-rdma\n"
         "# END gpuvirt.tenancy guest_rdma\n")
CONF = "/etc/nccl.conf.d/tenant-b.conf"
WRITTEN = "NCCL_IB_GID_INDEX=2\nNCCL_IB_HCA=rxeB:1\n"


@pytest.fixture
def guest(host):
    """Tenant b of the lab (soft-RoCE rxeB on a veth with a global IPv6 address before its IPv4
    one: the IPv4 RoCE v2 GID at index 2), already RoCE v2, with a hosts file."""
    add_port(host["root"], "rxeB", 1, [
        (0, "fe80:0000:0000:0000:5054:00ff:fe00:8300", "v2", "vB"),
        (1, "fd00:000b:0000:0000:0000:0000:0000:0010", "v2", "vB"),
        (2, "0000:0000:0000:0000:0000:ffff:c0a8:540a", "v2", "vB"),
    ])
    host["fake"].modes[("rxeB", 1)] = "RoCE v2"
    os.makedirs(under_root(host, "/etc"), exist_ok=True)
    with open(under_root(host, "/etc/hosts"), "w", encoding="utf-8") as handle:
        handle.write(HOSTS)
    nccl = {"path": CONF, "ib_hca": ["rxeB:1"], "gid_index": "discover", "hosts_entries": ENTRIES}
    return dict(host, call=dict(host["args"], rdma_device="rxeB", persist=False, nccl_env=nccl))


def text(host, path):
    real = under_root(host, path)
    if not os.path.exists(real):
        return None
    with open(real, encoding="utf-8", newline="") as handle:
        return handle.read()


def test_nccl_env_written_in_the_same_call_then_idempotent(guest):
    first = mlx(guest, guest["call"], diff=True)
    assert not first.get("failed"), first
    assert first["changed"] is True and first["roce_v2_ipv4_index"] == {"rxeB": {"1": 2}}
    assert first["nccl_env"]["gid_index"] == 2 and first["nccl_env"]["hosts_lines"] == [
        "192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]
    assert text(guest, CONF) == WRITTEN and text(guest, "/etc/hosts") == HOSTS + BLOCK
    assert {entry.get("before_header") for entry in first["diff"]} >= {CONF, "/etc/hosts"}
    again = mlx(guest, guest["call"])
    assert again["changed"] is False and again["nccl_env"]["gid_index"] == 2


def test_nccl_env_in_check_mode_writes_nothing(guest):
    result = mlx(guest, guest["call"], check_mode=True)
    assert result["changed"] is True and result["nccl_env"]["gid_index"] == 2
    assert text(guest, CONF) is None and text(guest, "/etc/hosts") == HOSTS


@pytest.mark.parametrize("nccl, words", [
    ({"gid_index": "1"}, ["gid_index 1 refused", "use gid_index: 2"]),
    ({"hosts_entries": [{"ip": "192.168.84.300", "names": ["b"]}]}, ["is not an IPv4 or IPv6 address"]),
    # nccl_env's own argument spec, without root
    ({"colour": "red"}, ["nccl_env:", "colour", "gpuvirt.tenancy.nccl_env"]),
    ({"root": "/x"}, ["nccl_env:", "root"]),
    ({"backup": "maybe"}, ["nccl_env:", "backup"]),
])
def test_a_refused_nccl_env_stops_the_call_before_any_step(guest, nccl, words):
    """With the RoCE mode still to set (v1 on mlx5_0), a refused nccl_env changes nothing at all."""
    call = dict(guest["call"], rdma_device="mlx5_0", nccl_env=dict(guest["call"]["nccl_env"], ib_hca=["rxeB:1"], **nccl))
    result = mlx(guest, call)
    assert result["failed"] and result["changed"] is False, result
    for word in words:
        assert word in result["msg"]
    assert guest["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"
    assert text(guest, CONF) is None and text(guest, "/etc/hosts") == HOSTS


def planned(guest, **nccl):
    call = dict(guest["call"], nccl_env_write=False, nccl_env=dict(guest["call"]["nccl_env"], **nccl))
    return mlx(guest, call, diff=True)


@pytest.mark.parametrize("conf, hosts, conf_differs, found", [
    # a first run: nothing there yet
    (None, HOSTS, True, []),
    # converged: the file holds this guest's index, the block the fleet's lines
    (WRITTEN, HOSTS + BLOCK, False, ["192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]),
    # another index in the file; a block with one line of an earlier fleet
    ("NCCL_IB_GID_INDEX=1\nNCCL_IB_HCA=rxeB:1\n", HOSTS + BLOCK.replace("192.168.83.10 tenant-a-rdma\n", ""),
     True, ["192.168.84.10 tenant-b-rdma"]),
    # a block with CRLF endings: the same lines would still rewrite it
    (WRITTEN, HOSTS + BLOCK.replace("\n", "\r\n"), False, None),
    # no hosts file at all
    (WRITTEN, None, False, []),
])
def test_nccl_env_decided_without_writing(guest, conf, hosts, conf_differs, found):
    for path, content in ((CONF, conf), ("/etc/hosts", hosts)):
        real = under_root(guest, path)
        if content is None:
            if os.path.exists(real):
                os.unlink(real)
            continue
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
    result = planned(guest, hosts_entries=[])
    assert not result.get("failed"), result
    assert result["changed"] is False
    assert not [entry for entry in result["diff"] if entry.get("before_header") in (CONF, "/etc/hosts")]
    assert result["nccl_env"] == dict(
        {"path": CONF, "gid_index": 2, "settings": {"NCCL_IB_GID_INDEX": "2", "NCCL_IB_HCA": "rxeB:1"},
         "removed": [], "conf_differs": conf_differs, "hosts_path": "/etc/hosts",
         "hosts_differs": bool(hosts and "BEGIN" in hosts), "hosts_found": found})
    assert text(guest, CONF) == conf and text(guest, "/etc/hosts") == hosts


def test_planned_lines_equal_to_the_found_ones_leave_the_hosts_file_as_it_is(guest):
    """What the role relies on: entries whose lines equal hosts_found write nothing."""
    with open(under_root(guest, "/etc/hosts"), "a", encoding="utf-8") as handle:
        handle.write(BLOCK)
    found = planned(guest, hosts_entries=[])["nccl_env"]["hosts_found"]
    again = planned(guest, hosts_entries=[{"ip": line.split()[0], "names": line.split()[1:]} for line in found])
    assert again["nccl_env"]["hosts_differs"] is False


def test_without_hosts_entries_the_hosts_file_is_not_read(guest):
    with open(under_root(guest, "/etc/hosts"), "wb") as handle:
        handle.write(b"127.0.0.1 caf\xe9\n")
    result = planned(guest, hosts_entries=None)
    assert not result.get("failed"), result
    assert "hosts_found" not in result["nccl_env"] and result["nccl_env"]["conf_differs"] is True


@pytest.mark.parametrize("nccl, message", [
    ({"gid_index": "1"}, "gid_index 1 refused"),
    ({"hosts_entries": [], "hosts_path": "/etc"}, "hosts_path: /etc is a directory"),
])
def test_a_planned_nccl_env_that_would_fail_is_reported_and_the_rest_done(guest, nccl, message):
    """The error is the answer; the RDMA part is still done (the caller runs nccl_env alone, which fails
    with the same message, after comparing the hosts)."""
    call = dict(guest["call"], rdma_device="mlx5_0", nccl_env_write=False,
                nccl_env=dict(guest["call"]["nccl_env"], **nccl))
    result = mlx(guest, call)
    assert not result.get("failed"), result
    assert list(result["nccl_env"]) == ["error"] and message in result["nccl_env"]["error"]
    assert result["changed"] is True and guest["fake"].modes[("mlx5_0", 1)] == "RoCE v2"
    assert text(guest, CONF) is None


# ---- inside a tenant: the VF found by the MAC the host set
VF_MAC = "52:54:00:00:00:0a"


def add_netdev(host, name, mac, pci=None):
    base = under_root(host, "/sys/class/net/%s" % name)
    os.makedirs(base)
    with open(os.path.join(base, "address"), "w", encoding="utf-8") as handle:
        handle.write(mac + "\n")
    if pci:
        os.symlink("../../../devices/pci0000:00/0000:00:02.0/%s" % pci, os.path.join(base, "device"))


def test_the_rdma_device_is_found_by_the_vf_mac(host):
    # the ConnectX VF's netdev ens3np0 carries the MAC; a VLAN on it shares it (no PCI function)
    add_netdev(host, "ens3np0", VF_MAC.upper(), pci=PF)
    add_netdev(host, "ens3np0.101", VF_MAC)
    add_netdev(host, "mgmt0", "56:2f:1c:aa:03:9e")
    nccl = {"path": "/etc/nccl.conf", "gid_index": "discover"}
    result = mlx(host, dict(host["args"], netdev_mac=VF_MAC, persist=False, nccl_env=nccl, nccl_env_write=False))
    assert not result.get("failed"), result
    assert result["netdev"] == "ens3np0" and result["rdma_device"] == "mlx5_0"
    assert result["roce_v2_ipv4_index"] == {"mlx5_0": {"1": 3}} and result["nccl_env"]["gid_index"] == 3
    assert result["nccl_env"]["settings"]["NCCL_IB_HCA"] == "mlx5_0:1", result["nccl_env"]


def test_soft_roce_on_the_vf_is_found_by_its_gid_table(host):
    add_netdev(host, "vB", VF_MAC)
    add_port(host["root"], "rxeB", 1, [(0, "0000:0000:0000:0000:0000:ffff:c0a8:540a", "v2", "vB")])
    host["fake"].modes[("rxeB", 1)] = "RoCE v2"
    result = mlx(host, dict(host["args"], netdev_mac=VF_MAC, persist=False))
    assert result["netdev"] == "vB" and result["rdma_device"] == "rxeB"


@pytest.mark.parametrize("mac, netdev, match", [
    ("52:54:00:00:00:0a", None, "no netdev carries 52:54:00:00:00:0a"),
    ("52:54:00:00:00:0a", "enp8s0", "netdev enp8s0 .* has no RDMA device"),
    ("52-54-00", None, "netdev_mac: '52-54-00' is not a MAC address"),
])
def test_a_vf_mac_that_finds_nothing_is_refused(host, mac, netdev, match):
    if netdev:
        add_netdev(host, netdev, mac)
    result = mlx(host, dict(host["args"], netdev_mac=mac))
    assert result["failed"] and re.search(match, result["msg"]), result["msg"]
    assert host["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"


# --------------------------------------------------------------------------- packages
RDMA_PACKAGES = {"Debian": ["rdma-core", "ibverbs-utils"], "RedHat": ["rdma-core", "libibverbs-utils"]}


def soft_roce_guest(host):
    add_port(host["root"], "rxeB", 1, [(0, "fe80:0000:0000:0000:5054:00ff:fe00:8300", "v2", "vB")])
    host["fake"].modes[("rxeB", 1)] = "RoCE v2"
    return dict(host["args"], rdma_device="rxeB", persist=False)


@pytest.mark.parametrize("missing", [[], ["ibverbs-utils"], ["rdma-core", "ibverbs-utils"]])
def test_the_call_says_which_rdma_packages_a_debian_guest_lacks(host, missing):
    # dpkg-query's answers as captured on a Debian 12 host (fakes.packages)
    commands = RecordedCommands(replies=[dpkg(RDMA_PACKAGES["Debian"], missing)])
    result = mlx(host, dict(soft_roce_guest(host), packages=RDMA_PACKAGES), commands=commands)
    assert not result.get("failed"), result
    assert result["packages"] == {"family": "Debian", "wanted": ["rdma-core", "ibverbs-utils"], "missing": missing}
    assert result["changed"] is False  # read only: installing is the play's
    assert [c[0] for c in commands.calls] == ["dpkg-query"]  # one query for the list


def test_a_family_not_listed_takes_the_default_names_and_rpm_answers_on_redhat(host):
    commands = RecordedCommands(programs=["rpm"], replies=[(["rpm", "-q", "rdma-core"], 0, "rdma-core-51.0-1.el9.x86_64\n", ""),
                                                           (["rpm", "-q", "perftest"], 1, "package perftest is not installed\n", "")])
    result = mlx(host, dict(soft_roce_guest(host), packages={"Debian": ["x"], "default": ["rdma-core", "perftest"]}),
                 commands=commands)
    assert result["packages"] == {"family": "RedHat", "wanted": ["rdma-core", "perftest"], "missing": ["perftest"]}


def test_without_packages_no_package_is_looked_at(host):
    commands = RecordedCommands()
    result = mlx(host, soft_roce_guest(host), commands=commands)
    assert "packages" not in result and commands.calls == []


@pytest.mark.parametrize("packages", [{"Debian": "rdma-core"}, {"Debian": [""]}, {"Debian": [1]}])
def test_bad_packages_are_refused_before_any_step(host, packages):
    args = dict(host["args"], rdma_device="mlx5_0", packages=packages)
    result = mlx(host, args, commands=RecordedCommands())
    assert result["failed"] and result["msg"].startswith("packages: give a dict of OS family (Debian, RedHat) -> a list of package names")
    assert host["fake"].modes[("mlx5_0", 1)] == "IB/RoCE v1"
