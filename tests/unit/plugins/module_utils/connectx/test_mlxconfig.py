# -*- coding: utf-8 -*-
"""mlxconfig output parsing, over the real captures in tests/fixtures/mellanox, and the
firmware workflow against tests/unit/fakes/standins/mlxconfig, which is a STAND-IN for the real tool
(it replays the real formats and keeps Default/Current/Next state in a JSON file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fakes.paths import STANDINS  # pylint: disable=import-error
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from fakes.rdma import StandinCommands, read_fixture  # pylint: disable=import-error

STANDIN = os.path.join(STANDINS, "mlxconfig")


def test_parse_e_query_testdata():
    parsed = mlx.parse_query(read_fixture("mellanox", "mlxconfig-e-query_connectx4_TESTDATA_star-marker.txt"))
    assert parsed["device_type"] == "ConnectX4"
    assert parsed["columns"] == ["default", "current", "next"]
    assert list(parsed["params"]) == ["KEEP_IB_LINK_UP_P2", "KEEP_LINK_UP_ON_BOOT_P2",
                                      "ESWITCH_HAIRPIN_DESCRIPTORS", "MEMIC_SIZE_LIMIT"]
    keep = parsed["params"]["KEEP_IB_LINK_UP_P2"]
    assert (keep["default"], keep["current"], keep["next"], keep["modified"]) == ("False(0)", "True(1)", "True(1)", True)
    memic = parsed["params"]["MEMIC_SIZE_LIMIT"]
    assert (memic["current"], memic["next"]) == ("_256KB(1)", "DISABLED(0)")
    assert mlx.pending(parsed) == ["MEMIC_SIZE_LIMIT"]
    assert parsed["params"]["KEEP_LINK_UP_ON_BOOT_P2"]["modified"] is False


def test_parse_fragment_rows_with_overflowing_values():
    lines = read_fixture("mellanox", "mlxconfig-e-query_cx5_FRAGMENT_default-current-nextboot.txt").splitlines()
    params = mlx.parse_rows(lines, ["default", "current", "next"])
    assert len(params) == len(lines)
    assert params["PHY_FEC_OVERRIDE_P1"]["next"] == "DEVICE_DEFAULT(0)"
    assert params["PF_NUM_PF_MSIX"] == {"default": "63", "current": "63", "next": "63", "modified": False, "read_only": False}


# Rows as the tool prints them, built from its source, not captured (no captured query with read-only rows was found):
# mstflint mlxconfig/mlxcfg_ui.cpp, MlxCfg::printSingleParam at commit 0c43dc60ad5f6a99e5c248e450776f616338cb82:
# printf("%s%s     %-48s", diff, readOnly, name) with diff "*" (Next differs from Default/Current) or " ", readOnly
# "RO" or "  ", then each value printf("%-*s", CONFIG_TABLE_VALUE_WIDTH, ...), 33 (MLXCFG_BYTES_MAX_HEX_DISPLAY_BYTES
# 16 * 2 + 1), one space before the next (PRINT_SPACE_IF_NEEDED); "N/A" for a value the firmware could not read
# (printParam, MLXCFG_UNKNOWN). MFT 4.26+ lists read-only parameters in a query by default (mstflint PR 852).
# Names and values are those of the captures above.
def printed_row(diff, read_only, name, *values):
    return "%s%s     %-48s" % (diff, read_only, name) + " ".join("%-33s" % value for value in values)


def test_read_only_rows_are_kept_and_do_not_end_the_table():
    lines = [printed_row("*", "RO", "KEEP_IB_LINK_UP_P2", "False(0)", "True(1)", "True(1)"),
             printed_row(" ", "  ", "SRIOV_EN", "True(1)", "True(1)", "True(1)"),
             printed_row(" ", "RO", "PF_NUM_PF_MSIX", "63", "63", "63"),
             printed_row("*", "  ", "MEMIC_SIZE_LIMIT", "_256KB(1)", "_256KB(1)", "DISABLED(0)"),
             "The '*' shows parameters with next value different from default/current value."]
    params = mlx.parse_rows(lines, ["default", "current", "next"])
    assert [(name, p["modified"], p["read_only"], p["next"]) for name, p in params.items()] == [
        ("KEEP_IB_LINK_UP_P2", True, True, "True(1)"), ("SRIOV_EN", False, False, "True(1)"),
        ("PF_NUM_PF_MSIX", False, True, "63"), ("MEMIC_SIZE_LIMIT", True, False, "DISABLED(0)")]
    assert mlx.pending({"params": params}) == ["MEMIC_SIZE_LIMIT"]


def test_a_value_the_firmware_could_not_read_is_not_pending():
    lines = [printed_row("*", "  ", "NUM_OF_VFS", "N/A", "N/A", "8"),
             printed_row("*", "  ", "SRIOV_EN", "False(0)", "N/A", "True(1)"),
             printed_row(" ", "  ", "LINK_TYPE_P1", "ETH(2)", "ETH(2)", "N/A")]
    params = mlx.parse_rows(lines, ["default", "current", "next"])
    assert params["NUM_OF_VFS"]["current"] == "N/A" and list(params) == ["NUM_OF_VFS", "SRIOV_EN", "LINK_TYPE_P1"]
    assert mlx.pending({"params": params}) == []


def test_parse_abridged_query_without_next_boot_header():
    parsed = mlx.parse_query(read_fixture("mellanox", "mlxconfig-query_connectx4_sriov8_eth_partial.txt"))
    assert parsed["name"] == "00KH925_Ax"
    assert parsed["device"] == "/dev/mst/mt4115_pciconf0"
    assert parsed["columns"] == ["next"]
    assert {k: v["next"] for k, v in parsed["params"].items()} == {
        "LINK_TYPE_P1": "ETH(2)", "SRIOV_EN": "True(1)", "NUM_OF_VFS": "8"}


def test_parse_set_confirmation():
    parsed = mlx.parse_query(read_fixture("mellanox", "mstconfig-set_cx5_sriov-en_num-of-vfs.txt"))
    assert parsed["columns"] == ["next", "new"]
    assert parsed["params"]["SRIOV_EN"]["new"] == "True(1)"
    assert parsed["params"]["NUM_OF_VFS"]["next"] == "8"


@pytest.mark.parametrize("wanted, shown, match", [
    (True, "True(1)", True), (False, "True(1)", False), (True, "False(0)", False),
    (8, "8", True), (4, "8", False), ("8", "8", True),
    ("ETH", "ETH(2)", True), ("eth", "ETH(2)", True), ("IB", "ETH(2)", False), (2, "ETH(2)", True),
    ("true", "True(1)", True), ("1", "True(1)", True), ("DISABLED", "_256KB(1)", False),
    ("Array[0..7]", "Array[0..7]", True),
])
def test_value_matches(wanted, shown, match):
    assert mlx.value_matches(wanted, shown) is match


@pytest.mark.parametrize("lockdown, kind", [
    ("none [integrity] confidentiality", "lockdown"),
    ("none integrity [confidentiality]", "lockdown"),
    ("[none] integrity confidentiality", "device_not_found"),
    (None, "device_not_found"),
])
def test_failed_open_is_lockdown_only_when_the_kernel_is_locked_down(lockdown, kind):
    output = read_fixture("mellanox", "mstconfig-q_err_kernel-lockdown_failed-to-open.txt")
    assert mlx.classify_failure(output, mlx.lockdown_mode(lockdown))[0] == kind


def test_unknown_parameter_message_is_classified():
    out = "-E- Failed to find Param / TLV with name 'NO_SUCH_P1' port 0 module -1\n"
    assert mlx.classify_failure(out, None) == ("unknown_parameter", out[4:].strip())


def test_above_maximum_is_classified():
    """The set's refusal as mstflint prints it (mlxcfg_ui.cpp setDevCfg, mlxcfg_tlv.cpp checkRules)."""
    out = "Applying... Failed!\n-E- Parameter NUM_OF_VFS' value is larger than maximum allowed 127\n"
    assert mlx.classify_failure(out, None) == ("above_maximum", "Parameter NUM_OF_VFS' value is larger than maximum allowed 127")


# -- the stand-in ---------------------------------------------------------------------


def state_from_testdata():
    """Stand-in state holding exactly the parameters of the real -e q capture."""
    parsed = mlx.parse_query(read_fixture("mellanox", "mlxconfig-e-query_connectx4_TESTDATA_star-marker.txt"))
    params = []
    for name, entry in parsed["params"].items():
        params.append([name, {"default": entry["default"], "current": entry["current"], "next": entry["next"]}])
    return {"devices": {"0000:03:00.0": {"device_type": "ConnectX4", "params": params}}}


def sriov_state():
    """A ConnectX-5 like the one of the real set capture (Name/Description from it)."""
    boolean = {"False": 0, "True": 1}
    return {"devices": {"0000:5e:00.0": {
        "device_type": "ConnectX5", "name": "MCX512A-ACA_Ax_Bx",
        "description": "ConnectX-5 EN network interface card; 10/25GbE dual-port SFP28; PCIe3.0 x8; tall bracket; ROHS R6",
        "params": [
            ["SRIOV_EN", {"default": "False(0)", "current": "True(1)", "next": "True(1)", "choices": boolean}],
            ["NUM_OF_VFS", {"default": "0", "current": "8", "next": "8"}],
            ["LINK_TYPE_P1", {"default": "ETH(2)", "current": "ETH(2)", "next": "ETH(2)",
                              "choices": {"IB": 1, "ETH": 2, "VPI": 3}}],
        ]}}}


def write_state(tmp_path, state):
    path = str(tmp_path / "mlxconfig-state.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    return path


def run_standin(state_path, *args):
    env = dict(os.environ, MLXCONFIG_STANDIN_STATE=state_path)
    proc = subprocess.run([sys.executable, STANDIN] + list(args), env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_standin_replays_the_real_e_query_table(tmp_path):
    state = write_state(tmp_path, state_from_testdata())
    rc, out, _err = run_standin(state, "-d", "0000:03:00.0", "-e", "q")
    assert rc == 0
    real = read_fixture("mellanox", "mlxconfig-e-query_connectx4_TESTDATA_star-marker.txt")
    # from the Configurations: header to the end, line by line; the Go test data lost the
    # trailing spaces of the %-16s columns (the real set capture below keeps them)
    got = [line.rstrip() for line in out[out.index("Configurations:"):].splitlines()]
    assert got == real[real.index("Configurations:"):].splitlines()


def test_standin_replays_the_real_set_confirmation(tmp_path):
    state = write_state(tmp_path, sriov_state())
    rc, out, _err = run_standin(state, "-y", "-d", "5e:00.0", "set", "SRIOV_EN=1", "NUM_OF_VFS=8")
    assert rc == 0
    real = read_fixture("mellanox", "mstconfig-set_cx5_sriov-en_num-of-vfs.txt")
    # the capture starts with the command line the reporter typed
    assert out == real[real.index("\n") + 1:]


def test_standin_errors(tmp_path):
    state = write_state(tmp_path, sriov_state())
    assert run_standin(state, "-d", "0000:99:00.0", "-e", "q")[:2] == (1, "-E- Failed to open the device\n")
    rc, out, _err = run_standin(state, "-y", "-d", "0000:5e:00.0", "set", "NO_SUCH=1")
    assert rc == 1 and "-E- Failed to find Param / TLV with name 'NO_SUCH'" in out
    data = sriov_state()
    data["lockdown"] = True
    locked = write_state(tmp_path, data)
    rc, out, err = run_standin(locked, "-d", "0000:5e:00.0", "-e", "q")
    # the capture is a console: the semaphore line (stderr) came first
    assert rc == 1 and err + out == read_fixture("mellanox", "mstconfig-q_err_kernel-lockdown_failed-to-open.txt")


def make_config(state_path, device="0000:5e:00.0", root=None):
    """The tool on an injected Host: the stand-in as mlxconfig, the lockdown state read under ``root``."""
    commands = StandinCommands({"mlxconfig": STANDIN}, env={"MLXCONFIG_STANDIN_STATE": state_path})
    host = Host(root or os.path.dirname(state_path), commands=commands)
    return mlx.FirmwareConfig(mlx.find_tool(host, "auto"), device, host)


def test_firmware_workflow_sets_only_what_differs_then_power_cycle(tmp_path):
    state = write_state(tmp_path, sriov_state())
    fw = make_config(state)
    parsed = fw.query()
    wanted = {"SRIOV_EN": True, "NUM_OF_VFS": 16, "LINK_TYPE_P1": "ETH"}
    assert fw.plan(parsed, wanted) == {"NUM_OF_VFS": 16}
    fw.set({"NUM_OF_VFS": 16})
    with open(state + ".log", encoding="utf-8") as log:
        argvs = [json.loads(line) for line in log]
    assert argvs[-1] == ["-y", "-d", "0000:5e:00.0", "set", "NUM_OF_VFS=16"]
    parsed = fw.query()
    assert fw.plan(parsed, wanted) == {}
    assert parsed["params"]["NUM_OF_VFS"]["current"] == "8"
    assert mlx.pending(parsed) == ["NUM_OF_VFS"]
    run_standin(state, "standin-power-cycle")
    # within one call the query is not asked again (Host.read_once): the next call reads the card anew
    assert fw.query() == parsed
    parsed = make_config(state).query()
    assert parsed["params"]["NUM_OF_VFS"]["current"] == "16"
    assert mlx.pending(parsed) == []


def test_unknown_parameter_refused_before_any_set(tmp_path):
    state = write_state(tmp_path, sriov_state())
    fw = make_config(state)
    with pytest.raises(InputError, match="does not know NUM_OF_PFS"):
        fw.plan(fw.query(), {"NUM_OF_PFS": 2})


@pytest.mark.parametrize("device, lockdown, kind", [
    ("0000:99:00.0", False, "device_not_found"),
    ("0000:5e:00.0", True, "lockdown"),
])
def test_open_failures(tmp_path, device, lockdown, kind):
    data = sriov_state()
    data["lockdown"] = lockdown
    state = write_state(tmp_path, data)
    sysfs_root = tmp_path / "root"
    lock = sysfs_root / "sys" / "kernel" / "security" / "lockdown"
    lock.parent.mkdir(parents=True)
    lock.write_text("none [integrity] confidentiality\n" if lockdown else "[none] integrity confidentiality\n")
    fw = make_config(state, device, root=str(sysfs_root))
    with pytest.raises(mlx.MlxconfigError) as err:
        fw.query()
    assert err.value.kind == kind


# -- the boot stage: SR-IOV settings, the reset tool, the verdict --------------------------
def pf_topology():
    """Host-model entries: two functions of one ConnectX-6 Dx card, an Intel NIC, a VF."""
    def dev(vendor, klass, physfn=None):
        return {"vendor_id": vendor, "class": klass, "physfn": physfn, "is_bridge": False}
    return {"pci_devices": {"0000:5e:00.0": dev("0x15b3", "0x020000"), "0000:5e:00.1": dev("0x15b3", "0x020000"),
                            "0000:81:00.0": dev("0x8086", "0x020000"), "0000:5e:00.2": dev("0x15b3", "0x020000", "0000:5e:00.0")},
            "netdevs": {"ens1f0np0": {"pci_address": "0000:5e:00.0"}}}


def test_firmware_targets_are_the_connectx_pfs_that_want_vfs():
    pfs = [{"pf": "ens1f0np0", "num_vfs": 8}, {"pf": "5e:00.1", "num_vfs": 0}, {"pf": "0000:81:00.0", "num_vfs": 4},
           {"pf": "0000:99:00.0", "num_vfs": 2}]
    assert mlx.firmware_targets(pf_topology(), pfs) == [{"pf": "0000:5e:00.0", "num_vfs": 8}]
    assert mlx.firmware_targets(pf_topology(), []) == []


@pytest.mark.parametrize("paths, config, reset", [
    (["/usr/bin/mstconfig", "/usr/bin/mstfwreset"], "/usr/bin/mstconfig", "/usr/bin/mstfwreset"),
    (["/usr/bin/mlxconfig", "/usr/bin/mstconfig", "/usr/bin/mlxfwreset", "/usr/bin/mstfwreset"],
     "/usr/bin/mlxconfig", "/usr/bin/mlxfwreset"),
    (["/usr/bin/mlxconfig", "/usr/bin/mstfwreset"], "/usr/bin/mlxconfig", "/usr/bin/mstfwreset"),
    (["/usr/bin/mstconfig"], "/usr/bin/mstconfig", None),
    (["/usr/bin/mstfwreset"], None, None),
    ([], None, None),
])
def test_pick_tools(paths, config, reset):
    assert mlx.pick_tools(paths) == {"config": config, "reset": reset}


def test_sriov_settings_from_the_standin_query(tmp_path):
    """What the boot stage asks of a VPI card, read back from the stand-in's -e q table."""
    state = sriov_state()
    params = state["devices"]["0000:5e:00.0"]["params"]
    params[0][1].update(current="False(0)", next="False(0)")
    params[1][1].update(current="0", next="0")
    params[2][1].update(current="IB(1)", next="IB(1)")
    path = write_state(tmp_path, state)
    fw = make_config(path)
    report = mlx.report(fw.query())
    wanted = mlx.sriov_firmware(report, 8)
    assert wanted == {"SRIOV_EN": True, "NUM_OF_VFS": 8, "LINK_TYPE_P1": "ETH"}
    fw.set(fw.plan(fw.query(), wanted))
    parsed = fw.query()
    assert fw.plan(parsed, wanted) == {}
    assert mlx.pending(parsed) == ["LINK_TYPE_P1", "NUM_OF_VFS", "SRIOV_EN"]  # Next set, Current not yet
    # the verdict before any reset: pending, one reset per card, no cold boot claimed yet
    before = mlx.firmware_outcome({"0000:5e:00.0": mlx.pending(parsed)}, reset_tool="/usr/bin/mstfwreset")
    assert before["pending"] == ["0000:5e:00.0"] and before["cold_boot"] == [] and before["reset_devices"] == ["0000:5e:00.0"]
    # a successful firmware reset loads Next into Current (the stand-in's power cycle stands for it:
    # no real mlxfwreset output was found to replay, so the reset is judged by its exit status and this query)
    run_standin(path, "standin-power-cycle")
    assert mlx.pending(fw.query()) == mlx.pending(parsed)  # read once per call (Host.read_once) ...
    fw.host.forget_reads()  # ... until a reset, which the boot stage forgets the reads for
    after = mlx.pending(fw.query())
    assert after == []
    done = mlx.firmware_outcome({"0000:5e:00.0": mlx.pending(parsed)}, {"0000:5e:00.0": 0}, {"0000:5e:00.0": after},
                                "/usr/bin/mstfwreset")
    assert done == {"pending": [], "cold_boot": [], "reset": ["0000:5e:00.0"], "messages": [], "reset_devices": []}
    # idempotence: a second run wants nothing
    assert mlx.sriov_firmware(mlx.report(fw.query()), 8) == wanted and fw.plan(fw.query(), wanted) == {}


@pytest.mark.parametrize("next_vfs, num_vfs, wanted_vfs", [("0", 8, 8), ("4", 8, 8), ("16", 8, 16), ("8", 8, 8)])
def test_num_of_vfs_at_least_the_vfs_wanted(next_vfs, num_vfs, wanted_vfs):
    params = {"SRIOV_EN": {"next": "True(1)"}, "NUM_OF_VFS": {"next": next_vfs}}
    assert mlx.sriov_firmware(params, num_vfs) == {"SRIOV_EN": True, "NUM_OF_VFS": wanted_vfs}


def test_sriov_settings_refused_without_the_parameters():
    with pytest.raises(InputError, match="SRIOV_EN"):
        mlx.sriov_firmware({"NUM_OF_VFS": {"next": "8"}}, 4)


def test_one_reset_per_card():
    assert mlx.reset_devices(["0000:5e:00.1", "0000:5e:00.0", "0000:af:00.0"]) == ["0000:5e:00.0", "0000:af:00.0"]


PENDING = {"0000:5e:00.0": ["SRIOV_EN"], "0000:5e:00.1": ["SRIOV_EN"], "0000:af:00.0": []}


@pytest.mark.parametrize("resets, after, tool, enabled, pending, cold, words", [
    # reset ran (exit 0) but Next is still pending: only a cold boot loads it
    ({"0000:5e:00.0": 0}, {"0000:5e:00.0": ["SRIOV_EN"], "0000:5e:00.1": ["SRIOV_EN"]}, "/usr/bin/mlxfwreset", True,
     ["0000:5e:00.0", "0000:5e:00.1"], ["0000:5e:00.0", "0000:5e:00.1"], "did not load it"),
    # the reset failed (the card or the tool does not support the level)
    ({"0000:5e:00.0": 1}, {"0000:5e:00.0": ["SRIOV_EN"], "0000:5e:00.1": ["SRIOV_EN"]}, "/usr/bin/mlxfwreset", True,
     ["0000:5e:00.0", "0000:5e:00.1"], ["0000:5e:00.0", "0000:5e:00.1"], "exit status 1"),
    # no reset tool, or resets turned off: a cold boot straight away
    ({}, {}, None, True, ["0000:5e:00.0", "0000:5e:00.1"], ["0000:5e:00.0", "0000:5e:00.1"], "no mlxfwreset"),
    ({}, {}, "/usr/bin/mstfwreset", False, ["0000:5e:00.0", "0000:5e:00.1"], ["0000:5e:00.0", "0000:5e:00.1"], "turned off"),
    # not reset yet (no reboot allowed, or check mode): pending, the reset is still to come
    ({}, {}, "/usr/bin/mstfwreset", True, ["0000:5e:00.0", "0000:5e:00.1"], [], "next firmware reset"),
    # the reset of the card's first function loaded both
    ({"0000:5e:00.0": 0}, {"0000:5e:00.0": [], "0000:5e:00.1": []}, "/usr/bin/mstfwreset", True, [], [], None),
])
def test_firmware_outcome(resets, after, tool, enabled, pending, cold, words):
    outcome = mlx.firmware_outcome(PENDING, resets, after, tool, enabled)
    assert outcome["pending"] == pending and outcome["cold_boot"] == cold
    if cold:
        assert all("COLD BOOT" in m for m in outcome["messages"]) and outcome["reset_devices"] == []
    if words:
        assert all(words in m for m in outcome["messages"])
    else:
        assert outcome["messages"] == [] and outcome["reset"] == ["0000:5e:00.0", "0000:5e:00.1"]
