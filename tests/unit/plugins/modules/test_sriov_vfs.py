# -*- coding: utf-8 -*-
"""sriov_vfs end to end over fake roots: the lab layout and the ConnectX-4 Lx host of
iommu/iommu-groups_cx4lx-pf-and-vfs-all-in-group1_no-acs.txt. Each run gets an injected
Host over the tree: sysfs writes go to the FakeKernel stand-in, programs to a
RecordedCommands. The lab PF has no netdev, so nothing is run there; on the ConnectX host
each ``ip`` call is recorded and answered by the ``ip`` stand-in of tests/unit/fakes/standins,
which keeps the VF settings between calls."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.modules import sriov_vfs
from conftest import run_module  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.commands import RecordedCommands, Reply, standin_reply  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host, domain_xml, fixture_text, lab_host  # pylint: disable=import-error

PF = "0000:81:00.0"


def runner(tree, kernel, replies=()):
    """``run(args, ...)``: sriov_vfs on a fresh Host over ``tree``; the calls it made are
    in ``run.calls``."""
    def run(args, **kwargs):
        commands = RecordedCommands(replies=replies)
        # the running host's (ip is asked there; under a capture it is not: test_capture_reads_no_vf_settings)
        result = run_module(sriov_vfs.main, args, host=LiveHost(tree.root, commands=commands, kernel=kernel), **kwargs)
        run.calls.extend(commands.calls)
        return result
    run.calls = []
    return run


@pytest.fixture
def lab(tmp_path):
    tree, kernel = lab_host(tmp_path / "root")
    return tree, kernel, runner(tree, kernel)


@pytest.fixture
def cx4(tmp_path, monkeypatch):
    tree, kernel = cx4lx_no_acs_host(tmp_path / "root")
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", tree.root)
    return tree, kernel, runner(tree, kernel, [standin_reply("ip")])


def test_converge_then_nothing_to_do(lab):
    host, kernel, run = lab
    args = {"pf": PF, "num_vfs": 4, "autoprobe": False}
    first = run(args)
    assert first["changed"] and not first.get("failed")
    assert [(v["address"], v["driver"], v["numa_node"]) for v in first["vfs"]] == [
        ("0000:81:00.%d" % i, None, 1) for i in range(1, 5)]
    assert first["isolation"]["viable"] is True
    assert len({v["iommu_group"] for v in first["vfs"]}) == 4
    assert sorted(first["persisted_files"]) == sorted([restore.SRIOV_CONFIG, restore.SCRIPT_PATH, restore.UNIT_DIR + "/" + restore.SRIOV_UNIT])
    config = json.load(open(host.p(restore.SRIOV_CONFIG), encoding="utf-8"))
    assert config == {"pfs": {PF: {"num_vfs": 4, "autoprobe": False}}}
    assert os.path.islink(host.p(restore.WANTS_DIR + "/" + restore.SRIOV_UNIT))
    kernel.writes.clear()
    second = run(args)
    assert second["changed"] is False and not kernel.writes
    assert run.calls == []   # no netdev, no ip; not the live machine, no systemctl


def test_check_mode_and_diff_change_nothing(lab):
    host, kernel, run = lab
    run({"pf": PF, "num_vfs": 4, "autoprobe": False})
    kernel.writes.clear()
    result = run({"pf": PF, "num_vfs": 2}, check_mode=True, diff=True)
    assert result["changed"] and result["recreated"] and result["num_vfs"] == 2
    assert [v["address"] for v in result["vfs"]] == ["0000:81:00.1", "0000:81:00.2"]   # from sriov_offset/stride
    state = result["diff"][0]
    assert '"num_vfs": 4' in state["before"] and '"num_vfs": 2' in state["after"]
    assert any(d["before_header"] == restore.SRIOV_CONFIG for d in result["diff"])
    assert not kernel.writes
    assert '"num_vfs": 4' in open(host.p(restore.SRIOV_CONFIG), encoding="utf-8").read()


def test_refusal_is_a_failure_naming_the_vf(lab):
    host, kernel, run = lab
    run({"pf": PF, "num_vfs": 4, "autoprobe": False})
    host.write("/etc/libvirt/qemu/tenant-a.xml",
               "<domain type='kvm'><name>tenant-a</name><devices><hostdev mode='subsystem' type='pci'><source>"
               "<address domain='0x0000' bus='0x81' slot='0x00' function='0x1'/></source></hostdev></devices></domain>")
    kernel.writes.clear()
    result = run({"pf": PF, "num_vfs": 2})
    assert result["failed"] and "0000:81:00.1: attached to libvirt domain tenant-a" in result["msg"]
    assert not kernel.writes
    forced = run({"pf": PF, "num_vfs": 2, "force": True})
    assert forced["changed"] and forced["num_vfs"] == 2


def test_input_error_is_a_failure(lab):
    _host, _kernel, run = lab
    result = run({"pf": PF, "num_vfs": 9})
    assert result["failed"] and "num_vfs: 9 is outside 0-4" in result["msg"]


def test_connectx_vf_settings_and_shared_group(cx4):
    host, _kernel, run = cx4
    args = {"pf": "enp1s0f0np0", "num_vfs": 4, "persist": False,
            "vfs": [{"index": 0, "mac": "52:54:00:A0:00:01", "vlan": 101},
                    {"index": 1, "mac": "52:54:00:b0:00:01", "vlan": 102, "qos": 3, "link_state": "enable"}]}
    first = run(args, diff=True)
    assert first["changed"] and not first["recreated"] and first["pf"] == "0000:01:00.0"
    settings = {v["index"]: v["settings"] for v in first["vfs"]}
    assert settings[0] == {"mac": "52:54:00:a0:00:01", "vlan": 101, "qos": 0, "spoofchk": True, "trust": False,
                           "link_state": "auto"}
    assert (settings[1]["vlan"], settings[1]["qos"], settings[1]["link_state"]) == (102, 3, "enable")
    assert first["isolation"]["viable"] is False
    assert any("shares IOMMU group 1" in r for r in first["isolation"]["reasons"])
    assert first["persisted_files"] == [] and not os.path.exists(host.p(restore.SRIOV_CONFIG))
    assert ["ip", "link", "set", "dev", "enp1s0f0np0", "vf", "0", "mac", "52:54:00:a0:00:01", "vlan", "101",
            "spoofchk", "on", "trust", "off"] in run.calls
    del run.calls[:]
    second = run(args)
    assert second["changed"] is False
    assert all(call[:3] == ["ip", "link", "show"] for call in run.calls)


@pytest.mark.parametrize("flags, vfs, pf_link_up, brought_up", [
    ("0x1002", [{"index": 0, "vlan": 101}], True, True),    # down, tenant VF settings: up, and at boot
    ("0x1003", [{"index": 0, "vlan": 101}], True, False),   # already up: nothing to do
    ("0x1002", [], True, False),                            # no VF settings: the link is not ours
    ("0x1002", [{"index": 0, "vlan": 101}], False, False),  # pf_link_up false: left down
])
def test_pf_link_brought_up_for_tenant_vf_settings(cx4, flags, vfs, pf_link_up, brought_up):
    host, _kernel, run = cx4
    host.write("/sys/class/net/enp1s0f0np0/flags", flags)
    args = {"pf": "enp1s0f0np0", "num_vfs": 4, "vfs": vfs, "pf_link_up": pf_link_up}
    check = run(args, check_mode=True, diff=True)
    assert ["ip", "link", "set", "dev", "enp1s0f0np0", "up"] not in run.calls
    first = run(args)
    assert (["ip", "link", "set", "dev", "enp1s0f0np0", "up"] in run.calls) is brought_up
    assert first["pf_link_up"] is (brought_up or flags == "0x1003")
    if brought_up:
        assert check["changed"] and '"link_up": false' in check["diff"][0]["before"]
        assert int(open(host.p("/sys/class/net/enp1s0f0np0/flags"), encoding="utf-8").read(), 16) & 1
    config = json.load(open(host.p(restore.SRIOV_CONFIG), encoding="utf-8"))["pfs"]["0000:01:00.0"]
    assert config.get("link_up", False) is (pf_link_up and bool(vfs))
    del run.calls[:]
    assert run(args)["changed"] is False
    # a run that only sets the count (as host_sriov's first call) keeps what the settings run decided
    assert run({"pf": "enp1s0f0np0", "num_vfs": 4})["changed"] is False
    assert run(args)["changed"] is False


def test_vf_named_by_address_and_count_only_run_keeps_settings(cx4):
    host, _kernel, run = cx4
    settings = {"pf": "0000:01:00.0", "num_vfs": 4, "vfs": [{"address": "0000:01:00.4", "mac": "52:54:00:c0:00:01", "vlan": 7}]}
    first = run(settings)
    assert first["changed"]
    assert [v["settings"]["vlan"] for v in first["vfs"] if v["address"] == "0000:01:00.4"] == [7]
    config = json.load(open(host.p(restore.SRIOV_CONFIG), encoding="utf-8"))
    assert config["pfs"]["0000:01:00.0"]["vfs"][0]["index"] == 2
    count_only = run({"pf": "0000:01:00.0", "num_vfs": 4})
    assert count_only["changed"] is False
    bad = run({"pf": "0000:01:00.0", "vfs": [{"address": "0000:01:00.1", "vlan": 3}]})
    assert bad["failed"] and "0000:01:00.1 is not one of the 4 VFs" in bad["msg"]


def test_vf_held_as_a_hostdev_interface_by_a_stopped_domain_is_in_use(lab):
    host, kernel, run = lab
    run({"pf": PF, "num_vfs": 4, "autoprobe": False})
    host.write("/etc/libvirt/qemu/tenant-net.xml", domain_xml("tenant-net", "0000:81:00.2"))
    kernel.writes.clear()
    result = run({"pf": PF, "num_vfs": 2})
    assert result["failed"] and "0000:81:00.2: attached to libvirt domain tenant-net" in result["msg"]
    assert result["changed"] is False and not kernel.writes


def test_root_option_previews_a_captured_tree(tmp_path):
    tree, _kernel = lab_host(tmp_path / "root")
    result = run_module(sriov_vfs.main, {"root": tree.root, "pf": PF, "num_vfs": 4}, check_mode=True)
    assert result["changed"] and result["num_vfs"] == 4 and result["num_vfs_before"] == 0
    assert [v["address"] for v in result["vfs"]] == ["0000:81:00.%d" % i for i in range(1, 5)]
    assert not os.path.exists(tree.p(restore.SRIOV_CONFIG))


# ---- several PFs in one call (pfs)

def test_pfs_converge_in_one_call_then_nothing_to_do(lab):
    _host, kernel, run = lab
    args = {"pfs": [{"pf": PF, "num_vfs": 4, "autoprobe": False}]}
    first = run(args)
    assert first["changed"] and [r["pf"] for r in first["pfs"]] == [PF]
    assert first["pfs"][0]["num_vfs"] == 4 and "num_vfs" not in first
    # each PF's VFs by its address, as the role host_sriov publishes them (host_sriov_vfs)
    assert first["vfs_by_pf"] == {PF: first["pfs"][0]["vfs"]} and len(first["vfs_by_pf"][PF]) == 4
    kernel.writes.clear()
    second = run(args)
    assert second["changed"] is False and second["pfs"][0]["changed"] is False and not kernel.writes


@pytest.mark.parametrize("args, words", [
    ({"pfs": [{"pf": PF, "num_vfs": 4}, {"pf": PF, "num_vfs": 2}]}, ["pfs[1]", "also pfs[0]"]),
    ({"pfs": [{"num_vfs": 4}]}, ["pfs[0]", "pf"]),
    ({"pfs": [{"pf": PF, "num_vfs": "four"}]}, ["pfs[0]", "num_vfs"]),
    ({"pfs": [{"pf": PF}], "num_vfs": 4}, ["mutually exclusive", "pfs", "num_vfs"]),
    ({"pfs": [{"pf": PF}], "persist": False}, ["mutually exclusive", "persist"]),
    ({}, ["one of the following is required", "pf", "pfs"]),
    # vf_settings: only with pfs, each VF by a PCI address
    ({"pf": PF, "vf_settings": [{"address": "0000:81:00.1"}]}, ["vf_settings", "pfs"]),
    ({"pfs": [{"pf": PF, "num_vfs": 4}], "vf_settings": [{"address": "81:00.x"}]}, ["vf_settings[0]", "81:00.x"]),
    ({"pfs": [{"pf": PF, "num_vfs": 4}], "vf_settings": [{"vlan": 3}]}, ["address"]),
])
def test_pfs_and_vf_settings_bad_input_changes_nothing(lab, args, words):
    _host, kernel, run = lab
    result = run(args)
    assert result["failed"] and not result.get("changed") and not kernel.writes
    for word in words:
        assert word in result["msg"]


def test_pfs_a_bad_pf_in_a_later_entry_changes_nothing(lab):
    _host, kernel, run = lab
    result = run({"pfs": [{"pf": PF, "num_vfs": 4, "autoprobe": False}, {"pf": "0000:99:00.0", "num_vfs": 1}]})
    assert result["failed"] and result["changed"] is False and not kernel.writes
    assert result["msg"].startswith("pfs[1] (0000:99:00.0): pf: no PCI device")


def test_pfs_refusal_in_a_later_entry_reports_what_the_earlier_ones_did(lab, tmp_path):
    host, _kernel, run = lab
    run({"pf": PF, "num_vfs": 4, "autoprobe": False})
    host.write("/etc/libvirt/qemu/tenant-net.xml", domain_xml("tenant-net", "0000:81:00.2"))
    result = run({"pfs": [{"pf": PF, "autoprobe": True}, {"pf": PF + "x"}]})
    assert result["failed"] and result["changed"] is False   # decided before the first write
    result = run({"pfs": [{"pf": PF, "num_vfs": 2}]})
    assert result["failed"] and "0000:81:00.2: attached to libvirt domain tenant-net" in result["msg"]
    assert result["pfs"] == []


def test_vf_settings_by_address_go_to_the_pf_that_creates_the_vf_in_the_same_call(cx4):
    """On a bare PF the VFs do not exist yet: the settings of 0000:01:00.4 (VF 2 by the PF's
    offset/stride) are applied in the call that creates it; a VF of no listed PF is skipped."""
    _host, _kernel, run = cx4
    args = {"pfs": [{"pf": "0000:01:00.0", "num_vfs": 4, "persist": False}],
            "vf_settings": [{"address": "0000:01:00.4", "mac": "52:54:00:c0:00:01", "vlan": 7},
                            {"address": "0000:99:00.1", "vlan": 3}]}
    first = run(args)
    assert first["changed"] and not first.get("failed")
    vfs = first["pfs"][0]["vfs"]
    assert [v["settings"]["vlan"] for v in vfs if v["address"] == "0000:01:00.4"] == [7]
    assert first["vf_settings_skipped"] == [{"address": "0000:99:00.1", "reason": "not a VF of the PFs in pfs (with their VF counts)"}]
    again = run(args)
    assert again["changed"] is False


def test_vf_settings_for_a_pf_without_netdev_are_skipped_with_the_reason(lab):
    _host, _kernel, run = lab
    result = run({"pfs": [{"pf": PF, "num_vfs": 4, "autoprobe": False}], "vf_settings": [{"address": "0000:81:00.2", "vlan": 3}]})
    assert result["changed"] and result["pfs"][0]["num_vfs"] == 4
    assert result["vf_settings_skipped"] == [{"address": "0000:81:00.2", "reason": "PF %s has no netdev: VF MAC/VLAN go through it" % PF}]


# --------------------------------------------------------------------------- one MAC per VF, VLAN 1-4094, weak settings warned
@pytest.mark.parametrize("vfs, words", [
    ([{"index": 0, "mac": "52:54:00:e0:00:01"}, {"index": 1, "mac": "52:54:00:E0:00:01"}],
     "vfs: MAC 52:54:00:e0:00:01 is given to vfs index 0 and vfs index 1 of PF 0000:01:00.0"),
    ([{"index": 0, "mac": "00:00:00:00:00:00"}], "vfs[0].mac: 00:00:00:00:00:00 is the all-zero address"),
    ([{"index": 0, "vlan": 4095}], "vfs[0].vlan: 4095 is not a VLAN id"),
])
def test_bad_vf_settings_are_refused_before_any_change(cx4, vfs, words):
    _host, kernel, run = cx4
    result = run({"pf": "0000:01:00.0", "num_vfs": 4, "persist": False, "vfs": vfs})
    assert result["failed"] and words in result["msg"] and not result["changed"], result
    assert not [call for call in run.calls if call[:3] == ["ip", "link", "set"]]
    assert not kernel.writes


@pytest.mark.parametrize("netdev_type, num_vfs", [
    ("32\n", 4),    # the PF's netdev is IPoIB (ARPHRD_INFINIBAND): known before the VFs are read
    (None, None),   # type unread: its VFs' lines say link/infiniband
    ("32\n", 2),    # a count change (through 0): the VFs' lines are not read, the netdev's type says it
])
def test_vf_settings_on_an_infiniband_pf_are_refused_before_any_change(tmp_path, netdev_type, num_vfs):
    tree, kernel = cx4lx_no_acs_host(tmp_path / "root")
    if netdev_type:
        tree.write("/sys/class/net/enp1s0f0np0/type", netdev_type)
    # ip's answer for an InfiniBand PF: iproute2's own example (rdma/ip-link-show_ib4_...txt, see its .source.txt)
    shown = fixture_text("rdma/ip-link-show_ib4_ipoib-pf_vf0-node-port-guid.txt")
    run = runner(tree, kernel, [Reply(["ip", "link", "show", "dev", "enp1s0f0np0"], 0, shown, "")])
    result = run({"pf": "0000:01:00.0", "num_vfs": num_vfs, "vfs": [{"index": 0, "mac": "52:54:00:e3:00:01", "vlan": 101}]})
    assert result["failed"] and not result["changed"], result
    assert "vfs: PF 0000:01:00.0 (enp1s0f0np0) is an InfiniBand port" in result["msg"]
    assert "Nothing was changed" in result["msg"] and "LINK_TYPE_P1=ETH(2)" in result["msg"]
    assert not kernel.writes and not [call for call in run.calls if call[:3] == ["ip", "link", "set"]]
    assert not os.path.exists(tree.p(restore.SRIOV_CONFIG))


def test_a_connectx3_vf_without_vlan_or_trust_shown_is_converged_and_the_unshown_field_warned(tmp_path):
    tree, kernel = cx4lx_no_acs_host(tmp_path / "root")
    # mlx4's answer (rdma/ip-link-show_connectx3-mlx4_...txt, see its .source.txt): vlan 4095 for none, no trust field
    shown = fixture_text("rdma/ip-link-show_connectx3-mlx4_vfs-vlan4095-no-trust.txt")
    run = runner(tree, kernel, [Reply(["ip", "link", "show", "dev", "enp1s0f0np0"], 0, shown, "")])
    result = run({"pf": "0000:01:00.0", "persist": False,
                  "vfs": [{"index": 0, "clear": True, "spoofchk": False}, {"index": 1, "clear": True, "spoofchk": False}]})
    assert not result.get("failed") and result["changed"] is False, result
    assert not [call for call in run.calls if call[:3] == ["ip", "link", "set"]]
    assert "PF 0000:01:00.0: ip link show does not show trust of VF 0, 1" in " ".join(result["warnings"])


def test_a_mac_another_vf_keeps_is_refused_in_a_later_call(cx4):
    _host, _kernel, run = cx4
    first = {"pf": "0000:01:00.0", "num_vfs": 4, "persist": False, "vfs": [{"index": 0, "mac": "52:54:00:e1:00:01"}]}
    assert run(first)["changed"]
    again = run({"pf": "0000:01:00.0", "persist": False, "vfs": [{"index": 1, "mac": "52:54:00:e1:00:01"}]})
    assert again["failed"] and "already the MAC of VF 0 of PF 0000:01:00.0" in again["msg"] and not again["changed"]
    # moved in one call: VF 0 cleared, VF 1 takes the MAC
    moved = run({"pf": "0000:01:00.0", "persist": False,
                 "vfs": [{"index": 0, "clear": True}, {"index": 1, "mac": "52:54:00:e1:00:01"}]})
    assert moved["changed"] and not moved.get("failed"), moved
    settings = dict((v["index"], v["settings"]) for v in moved["vfs"] if v["settings"])
    assert (settings[0]["mac"], settings[0]["vlan"], settings[1]["mac"]) == ("00:00:00:00:00:00", 0, "52:54:00:e1:00:01")


def test_the_same_mac_on_two_pfs_of_one_call_is_refused(cx4):
    _host, kernel, run = cx4
    pfs = [{"pf": "0000:01:00.0", "num_vfs": 4, "persist": False, "vfs": [{"index": 0, "mac": "52:54:00:e2:00:01"}]},
           {"pf": "0000:01:00.1", "num_vfs": 2, "persist": False, "vfs": [{"index": 0, "mac": "52:54:00:E2:00:01"}]}]
    result = run({"pfs": pfs})
    assert result["failed"] and not result["changed"], result
    assert "pfs: MAC 52:54:00:e2:00:01 is given to pfs[0] (0000:01:00.0) VF 0 and pfs[1] (0000:01:00.1) VF 0" in result["msg"]
    assert not kernel.writes and not [call for call in run.calls if call[:3] == ["ip", "link", "set"]]


def test_spoof_check_off_or_trust_on_is_warned(cx4):
    _host, _kernel, run = cx4
    result = run({"pf": "0000:01:00.0", "num_vfs": 4, "persist": False,
                  "vfs": [{"index": 0, "spoofchk": False}, {"index": 1, "trust": True}, {"index": 2}]})
    assert result["changed"] and not result.get("failed"), result
    warned = [w for w in result["warnings"] if "its guest can send with another MAC" in w]
    assert len(warned) == 2 and "VF 0 of PF 0000:01:00.0 has spoof checking off" in warned[0]
    assert "VF 1 of PF 0000:01:00.0 has trust on" in warned[1]
