# -*- coding: utf-8 -*-
"""mig_profile against tests/unit/fakes/standins/nvidia-smi, a STAND-IN for nvidia-smi that replays the
real output formats of tests/fixtures/mig and keeps MIG state in a JSON file between calls
(mode current/pending, GPU and compute instances, processes, clients). No real GPU here."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import mig_profile

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.mig import FIXTURES, STANDIN, gpu, h100_fixture_layout, make_state, mutating_calls, read_state, run  # pylint: disable=import-error

H100 = "NVIDIA H100 PCIe"
A100 = "A100-SXM4-40GB"


def test_check_mode_reports_exact_plan_and_changes_nothing(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0")])
    result = run({"layout": [{"devices": "all", "mig_enabled": True, "mig_devices": {"1g.10gb": 3, "3g.40gb": 1}}]}, check_mode=True)
    assert result["changed"] is True and not result.get("failed"), result
    assert result["plan"] == [
        "GPU 0: enable MIG mode",
        "GPU 0: create GPU instance 3g.40gb with its default compute instance",
        "GPU 0: create GPU instance 1g.10gb with its default compute instance",
        "GPU 0: create GPU instance 1g.10gb with its default compute instance",
        "GPU 0: create GPU instance 1g.10gb with its default compute instance",
    ]
    assert result["gpus"][0]["instances_after"] == ["1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert mutating_calls(state) == []
    assert read_state(state)["gpus"][0]["mig"] == {"current": "Disabled", "pending": "Disabled"}


def test_apply_then_second_run_changes_nothing(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0")])
    args = {"layout": [{"devices": "all", "mig_enabled": True, "mig_devices": {"1g.10gb": 3, "3g.40gb": 1}}]}
    first = run(args, diff=True)
    assert first["changed"] is True and not first.get("failed"), first
    assert first["gpus"][0]["instances_after"] == ["1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert first["diff"][0]["before"] != first["diff"][0]["after"]
    # The stand-in now holds exactly what the real H100 showed after the same commands.
    lgi = os.popen("%s mig -i 0 -lgi" % STANDIN).read()
    with open(os.path.join(FIXTURES, "mig", "lgi_h100-pcie_3g.40gb+3x1g.10gb_driver525.txt"), encoding="utf-8") as handle:
        assert lgi == handle.read()
    calls_before = len(read_state(state)["calls"])
    second = run(args)
    assert second["changed"] is False and second["plan"] == [], second
    assert mutating_calls(state, since=calls_before) == []
    check = run(args, check_mode=True)
    assert check["changed"] is False and check["plan"] == []


def test_only_the_difference_is_applied(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [h100_fixture_layout()])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1, "1g.10gb": 4}}]})
    assert result["changed"] is True and not result.get("failed"), result
    assert result["plan"] == ["GPU 0: create GPU instance 1g.10gb with its default compute instance"]
    assert mutating_calls(state) == [["mig", "-i", "0", "-cgi", "19", "-C"]]
    ids = sorted(gi["id"] for gi in read_state(state)["gpus"][0]["gpu_instances"])
    assert ids == [2, 7, 8, 9, 10]


def test_unwanted_instances_are_destroyed_first(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [h100_fixture_layout()])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1, "2g.20gb": 1}}]}, check_mode=True)
    assert result["plan"] == [
        "GPU 0: destroy GPU instance 7 (1g.10gb, placement 0:1) and its compute instances",
        "GPU 0: destroy GPU instance 8 (1g.10gb, placement 1:1) and its compute instances",
        "GPU 0: destroy GPU instance 9 (1g.10gb, placement 2:1) and its compute instances",
        "GPU 0: create GPU instance 2g.20gb with its default compute instance",
    ]
    applied = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1, "2g.20gb": 1}}]})
    assert applied["gpus"][0]["instances_after"] == ["2g.20gb", "3g.40gb"], applied
    assert mutating_calls(state)[:2] == [["mig", "-i", "0", "-gi", "7,8,9", "-dci"], ["mig", "-i", "0", "-gi", "7,8,9", "-dgi"]]


def test_disable_destroys_everything_then_turns_mig_off(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [h100_fixture_layout()])
    result = run({"layout": [{"devices": [0], "mig_enabled": False}]})
    assert result["changed"] is True and result["gpus"][0]["mig_mode_after"] == {"current": "disabled", "pending": "disabled"}, result
    assert mutating_calls(state)[-1] == ["-i", "0", "-mig", "0"]
    assert read_state(state)["gpus"][0]["gpu_instances"] == []


def test_pending_without_reset_reports_reboot_required(tmp_path, monkeypatch):
    # A100 (R450): -mig 1 leaves the mode pending until a reset or a reboot.
    state = make_state(tmp_path, monkeypatch, [gpu(A100, "00000000:36:00.0")])
    args = {"layout": [{"mig_enabled": True, "mig_devices": {"3g.20gb": 2}}], "reset": "never"}
    result = run(args)
    assert not result.get("failed"), result
    assert result["reboot_required"] is True and result["gpus"][0]["reboot_required"] is True
    assert result["gpus"][0]["reset_performed"] is False
    assert result["gpus"][0]["mig_mode_after"] == {"current": "disabled", "pending": "enabled"}
    assert not any(call[:1] == ["--gpu-reset"] for call in read_state(state)["calls"])
    # Still pending on the next run: nothing more to do, still reboot_required, no change.
    again = run(args)
    assert again["changed"] is False and again["reboot_required"] is True and again["plan"] == [], again
    check = run(args, check_mode=True)
    assert check["changed"] is False and check["reboot_required"] is True
    # After the "reboot" the same task creates the instances.
    data = read_state(state)
    data["gpus"][0]["mig"]["current"] = "Enabled"
    with open(state, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    done = run(args)
    assert done["changed"] is True and done["gpus"][0]["instances_after"] == ["3g.20gb", "3g.20gb"], done


def test_pending_with_reset_auto_resets_an_idle_gpu(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [gpu(A100, "00000000:36:00.0")])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"1g.5gb": 7}}], "reset": "auto"})
    assert not result.get("failed"), result
    assert result["gpus"][0]["reset_performed"] is True and result["reboot_required"] is False
    assert result["gpus"][0]["instances_after"] == ["1g.5gb"] * 7
    assert ["--gpu-reset", "-i", "0"] in read_state(state)["calls"]


def test_pending_with_a_client_is_not_reset(tmp_path, monkeypatch):
    # "In use by another client": nvidia-persistenced holds the GPU (fixture err_mig-disable-pending_...).
    state = make_state(tmp_path, monkeypatch, [gpu(A100, "00000000:C1:00.0", clients=["nvidia-persistenced"])])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.20gb": 1}}], "reset": "auto"})
    assert not result.get("failed"), result
    assert result["reboot_required"] is True and result["gpus"][0]["reset_performed"] is False
    assert any("In use by another client" in w or "reset refused" in w for w in result.get("warnings", [])), result
    assert read_state(state)["gpus"][0]["mig"] == {"current": "Disabled", "pending": "Enabled"}


def test_hopper_takes_a_pending_mode_change_without_a_reboot(tmp_path, monkeypatch):
    # H100: the driver makes the mode current without a reset (NVIDIA/gpu-operator#2600). A change
    # a client left pending is set again once the GPU is idle, even with reset: never; no reboot.
    left_pending = gpu(H100, "00000000:01:00.0")
    left_pending["mig"]["pending"] = "Enabled"
    state = make_state(tmp_path, monkeypatch, [left_pending])
    args = {"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1}}], "reset": "never"}
    check = run(args, check_mode=True)
    assert check["changed"] is True and check["reboot_required"] is False, check
    assert check["gpus"][0]["mig_mode_after"] == {"current": "enabled", "pending": "enabled"}
    assert mutating_calls(state) == []
    result = run(args)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["reboot_required"] is False, result
    assert result["gpus"][0]["reset_performed"] is False and result["gpus"][0]["instances_after"] == ["3g.40gb"]
    assert not any(call[:1] == ["--gpu-reset"] for call in read_state(state)["calls"])
    # the A100 in the same state waits for the reboot (test_pending_without_reset_reports_reboot_required)


def test_hopper_held_by_a_client_fails_naming_the_clients_not_a_reboot(tmp_path, monkeypatch):
    make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0", clients=["nvidia-persistenced"])])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1}}], "reset": "auto"})
    assert result.get("failed") and result.get("reboot_required") is not True, result
    assert "a Hopper GPU takes it without a reset or reboot once no client holds it" in result["msg"], result


def test_instances_with_processes_are_not_destroyed_without_force(tmp_path, monkeypatch):
    layout = h100_fixture_layout()
    layout["processes"] = [{"gi": 7, "ci": 0, "pid": 4242, "name": "python3"}]
    state = make_state(tmp_path, monkeypatch, [layout])
    args = {"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 2}}]}
    result = run(args)
    assert result["failed"] and "force" in result["msg"] and "GPU instance 7" in result["msg"], result
    assert mutating_calls(state) == []
    forced = run(dict(args, force=True))
    # With force the module goes ahead; the (stand-in) driver still refuses an instance
    # whose compute instance holds a process, and the module says so.
    assert forced["failed"] and "In use by another client" in forced["msg"], forced
    assert mutating_calls(state)[0] == ["mig", "-i", "0", "-gi", "7,8,9", "-dci"]


def test_idle_instances_are_kept_while_busy_ones_are_untouched(tmp_path, monkeypatch):
    layout = h100_fixture_layout()
    layout["processes"] = [{"gi": 2, "ci": 0, "pid": 4242, "name": "tritonserver"}]
    state = make_state(tmp_path, monkeypatch, [layout])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1, "1g.10gb": 2}}]})
    assert not result.get("failed"), result
    assert result["plan"] == ["GPU 0: destroy GPU instance 9 (1g.10gb, placement 2:1) and its compute instances"]
    assert 2 in [gi["id"] for gi in read_state(state)["gpus"][0]["gpu_instances"]]


@pytest.mark.parametrize("devices, message", [
    ({"1g.5gb": 1}, "has no MIG profile '1g.5gb'"),
    ({"1g.10gb": 8}, "allows at most 7 instance(s) of 1g.10gb"),
    ({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "cannot hold"),
    ({"7g.80gb": 1, "1g.10gb": 1}, "cannot hold"),
])
def test_layouts_that_do_not_fit_fail_before_any_change(tmp_path, monkeypatch, devices, message):
    state = make_state(tmp_path, monkeypatch, [h100_fixture_layout()])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": devices}]})
    assert result["failed"] and message in result["msg"] and "nothing was changed" in result["msg"], result
    assert mutating_calls(state) == []


def test_gpu_without_mig_fails_clearly(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [{"name": "NVIDIA A40", "mig_capable": False, "bus_id": "00000000:4F:00.0",
                                                "device_id": "0x223510DE", "mig": {"current": "Disabled", "pending": "Disabled"}}])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"1g.10gb": 1}}]})
    assert result["failed"] and "is not MIG-capable" in result["msg"], result
    assert mutating_calls(state) == []
    untouched = run({"layout": [{"mig_enabled": False}]})
    assert untouched["changed"] is False and untouched["gpus"][0]["mig_capable"] is False


def test_no_nvidia_smi_fails_clearly(tmp_path):
    host = Host(str(tmp_path), commands=RecordedCommands())
    result = run_module(mig_profile.main, {"layout": [{"mig_enabled": True}]}, host=host)
    assert result["failed"] and "nvidia-smi was not found" in result["msg"] and result["changed"] is False
    assert host.commands.calls == []


def test_mig_parted_file_is_read_under_the_hosts_root(tmp_path, monkeypatch):
    """A Host over a tree in a temporary directory: config_file is a host path under its root."""
    state = make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0")])
    root = tmp_path / "root"
    (root / "etc" / "nvidia-mig-manager").mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, "mig-parted", "deployments_systemd_config-default.yaml"),
                str(root / "etc" / "nvidia-mig-manager" / "config.yaml"))
    args = {"config_file": "/etc/nvidia-mig-manager/config.yaml", "config": "all-balanced"}
    result = run(args, root=str(root))
    assert not result.get("failed"), result
    assert result["gpus"][0]["instances_after"] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert read_state(state)["gpus"][0]["mig"]["current"] == "Enabled"
    assert run(args)["failed"]  # the same host path on this machine holds no such file


def test_nvidia_smi_option_must_be_executable(tmp_path, monkeypatch):
    make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0")])
    result = run({"layout": [{"mig_enabled": True}], "nvidia_smi": str(tmp_path / "nope")})
    assert result["failed"] and "is not an executable file" in result["msg"]


def test_insufficient_permissions_is_reported(tmp_path, monkeypatch):
    layout = h100_fixture_layout()
    layout["lci_error"] = "Insufficient Permissions"
    make_state(tmp_path, monkeypatch, [layout])
    result = run({"layout": [{"mig_enabled": True, "mig_devices": {"3g.40gb": 1}}]})
    assert result["failed"] and "Insufficient Permissions" in result["msg"], result


def test_mig_parted_file_is_accepted_unchanged_with_device_filters(tmp_path, monkeypatch):
    state = make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0"), gpu(A100, "00000000:36:00.0")])
    path = os.path.join(FIXTURES, "mig-parted", "deployments_systemd_config-default.yaml")
    result = run({"config_file": path, "config": "all-balanced"})
    assert not result.get("failed"), result
    assert result["gpus"][0]["instances_after"] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert result["gpus"][1]["instances_after"] == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert result["gpus"][1]["reset_performed"] is True
    assert run({"config_file": path, "config": "all-balanced"})["changed"] is False
    assert read_state(state)["gpus"][0]["mig"]["current"] == "Enabled"


def test_mig_parted_example_custom_config_on_a_two_gpu_host(tmp_path, monkeypatch):
    make_state(tmp_path, monkeypatch, [gpu(A100, "00000000:36:00.0"), gpu(A100, "00000000:37:00.0")])
    path = os.path.join(FIXTURES, "mig-parted", "examples_config.yaml.txt")
    result = run({"config_file": path, "config": "custom-config"}, check_mode=True)
    assert not result.get("failed"), result
    # custom-config names GPUs 0-7; GPUs 0 and 1 are in its "mig-enabled: false" entry.
    assert result["changed"] is False and any("GPU 7" in w for w in result["warnings"])
    result = run({"config_file": path, "config": "all-2g.10gb"}, check_mode=True)
    assert result["plan"].count("GPU 1: create GPU instance 2g.10gb with its default compute instance") == 3


@pytest.mark.parametrize("args, message", [
    ({"config_file": "/nonexistent/config.yaml", "config": "all-balanced"}, "cannot be read"),
    ({"config_file": os.path.join(FIXTURES, "mig-parted", "examples_config.yaml.txt"), "config": "nope"}, "config 'nope' is not in"),
    ({"config_file": os.path.join(FIXTURES, "mig-parted", "deployments_systemd_hooks-default.yaml"), "config": "x"}, "has no 'mig-configs'"),
    ({"layout": [{"mig_enabled": False, "mig_devices": {"1g.10gb": 1}}]}, "sets mig_enabled: false but asks for mig_devices"),
    ({"layout": [{"mig_enabled": True, "mig_devices": {"big": 1}}]}, "is not a MIG profile name"),
    ({"layout": [{"mig_enabled": True, "devices": "some"}]}, "devices must be 'all' or a list"),
    ({"layout": [{"mig_enabled": True}, {"devices": [0], "mig_enabled": False}]}, "both apply to GPU 0"),
    ({"layout": [{"mig_enabled": True, "device_filter": ["nvidia"]}]}, "is not a PCI id"),
    ({"layout": [{"mig_enabled": True, "devices": [5], "mig_devices": {"1g.10gb": 1}}]},
     "layout[0].devices: GPU 5 does not exist on this host (its GPUs: 0)"),
    ({"layout": [{"mig_enabled": True, "devices": [0, 3]}]}, "GPU 3 does not exist"),
    ({"layout": [{"mig_enabled": True, "devices": [-1]}]}, "layout[0].devices must be 'all' or a list of GPU indexes (0 or more)"),
    ({"layout": [{"mig_enabled": True, "devices": [True]}]}, "list of GPU indexes"),
    ({"layout": [{"mig_enabled": True, "mig_devices": {"1g.10gb\n": 1}}]}, "layout[0].mig_devices: '1g.10gb\\n' holds the control"),
    ({"layout": [{"mig_enabled": True, "mig_devices": {"1g.10gb+me\n": 1}}]}, "control character"),
])
def test_bad_input_fails_naming_the_input(tmp_path, monkeypatch, args, message):
    state = make_state(tmp_path, monkeypatch, [gpu(H100, "00000000:01:00.0")])
    result = run(args)
    assert result["failed"] and message in result["msg"], result
    assert mutating_calls(state) == []
