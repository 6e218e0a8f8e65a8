# -*- coding: utf-8 -*-
"""The GPU sharing roles' logic (plugin_utils mps and mig, the actions mps_plan and mig_layout): mps_plan
(what it hands to the gpu_mps role, and a clear error for unreadable output), mig_profile_options
(the gpu_mig role's inputs mapped to its mig_profile call, checked by the module's own argument spec)
and waiting_gpus (the GPUs a reboot waits for)."""

from __future__ import annotations

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.modules.mig_profile import MODULE_ARGS as MIG_PROFILE_ARGS
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.mig import MigInputError, mig_profile_options, waiting_gpus
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.mps import InputError, ReadError, mps_plan

MPS_GPUS = mps_plan
MIG_OPTIONS = mig_profile_options
MIG_REBOOT_GPUS = waiting_gpus


def test_empty_output_selects_nothing():
    assert MPS_GPUS("", "") == {"gpus": [], "indexes": [], "requested": [], "missing": [], "conflicts": [], "conflicts_text": "",
                                "skipped": [], "selected": [], "answered": True, "message": ""}


# registered results of the role's command tasks (failed_when false), as ansible-core returns them
MISSING_PROGRAM = {"rc": 2, "cmd": ["/opt/no/nvidia-smi", "--query-gpu=index"], "stdout": "", "stderr": "",
                   "msg": "[Errno 2] No such file or directory: b'/opt/no/nvidia-smi'"}
NO_DRIVER = {"rc": 9, "cmd": ["nvidia-smi", "--query-gpu=index"], "stderr": "",
             "stdout": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. " * 4}


@pytest.mark.parametrize("query, words", [
    (MISSING_PROGRAM, "(/opt/no/nvidia-smi: [Errno 2] No such file or directory: b'/opt/no/nvidia-smi')"),
    # what the program said is cut at 200 characters
    (NO_DRIVER, "(nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. NVIDIA-SMI"),
    ({"rc": 0, "cmd": ["nvidia-smi"], "stdout": "\n", "stderr": ""}, "(nvidia-smi: )"),
])
def test_a_host_without_an_nvidia_gpu_is_said_and_selects_nothing(query, words):
    result = MPS_GPUS(query, dict(MISSING_PROGRAM, cmd=["nvidia-smi"]), [0], "started")
    assert not result["answered"] and result["message"].startswith("no NVIDIA GPU answers here " + words)
    assert len(result["message"]) <= len("no NVIDIA GPU answers here (nvidia-smi: )") + 200
    assert result["selected"] == [] and result["missing"] == ["0"]


def test_registered_results_are_read_as_their_output():
    result = MPS_GPUS({"rc": 0, "stdout": QUERY}, {"rc": 0, "stdout": BUSY}, [2, 3], "started")
    assert result["answered"] and result["message"] == ""
    assert result == dict(MPS_GPUS(QUERY, BUSY, [2, 3], "started"))
    assert [g["index"] for g in result["skipped"]] == ["2"] and [g["index"] for g in result["selected"]] == ["3"]
    # a stop keeps the conflicting GPUs: none is skipped
    stopped = MPS_GPUS({"rc": 0, "stdout": QUERY}, {"rc": 0, "stdout": BUSY}, [2, 3], "stopped")
    assert stopped["skipped"] == [] and [g["index"] for g in stopped["selected"]] == ["2", "3"]


def test_processes_unreadable_while_the_gpus_answer_is_an_error():
    with pytest.raises(ReadError, match="processes could not be read .*--query-compute-apps"):
        MPS_GPUS({"rc": 0, "stdout": QUERY}, {"rc": 15, "stdout": "", "stderr": "Unknown Error"})


def test_bad_role_inputs_are_refused_on_a_host_without_gpus_too():
    with pytest.raises(InputError, match="active_thread_percentage 1-100"):
        MPS_GPUS(MISSING_PROGRAM, MISSING_PROGRAM, "all", "started", 150)


# nvidia-smi --query-gpu=index,pci.bus_id,name,compute_mode,mig.mode.current --format=csv,noheader, as the
# stand-in tests/unit/fakes/standins/nvidia-smi prints it; and --query-compute-apps=gpu_bus_id,pid,process_name
H100 = "NVIDIA H100 PCIe"
QUERY = ("0, 00000000:01:00.0, %s, Default, Enabled\n1, 00000000:02:00.0, %s, Prohibited, Disabled\n"
         "2, 00000000:03:00.0, %s, Exclusive_Process, Disabled\n3, 00000000:04:00.0, %s, Default, Disabled\n") % ((H100,) * 4)
BUSY = "00000000:03:00.0, 31, python3\n"
MPS_SERVER = "00000000:03:00.0, 40, nvidia-cuda-mps-server\n"
REFUSED = {
    "0": "0 (NVIDIA H100 PCIe, 00000000:01:00.0: MIG Enabled, compute mode Default)",
    "1": "1 (NVIDIA H100 PCIe, 00000000:02:00.0: MIG Disabled, compute mode Prohibited)",
    "2": "2 (NVIDIA H100 PCIe, 00000000:03:00.0: MIG Disabled, compute mode Exclusive_Process)",
}


@pytest.mark.parametrize("apps, wanted, missing, refused", [
    # the role's refusal names each conflicting GPU, MIG first, then Prohibited, then Exclusive_Process held by another process
    (BUSY, "all", [], ["0", "1", "2"]),
    (MPS_SERVER, "all", [], ["0", "1"]),
    (BUSY, [2, 3], [], ["2"]),
    (BUSY, [3], [], []),
    # indexes the host lacks are missing; every index the host has is said with them
    (BUSY, [1, 7, 9], ["7", "9"], ["1"]),
])
def test_the_role_names_the_missing_and_the_conflicting_gpus(apps, wanted, missing, refused):
    result = MPS_GPUS(QUERY, apps, wanted, "started")
    assert result["indexes"] == ["0", "1", "2", "3"]
    assert result["missing"] == missing
    assert result["conflicts_text"] == "; ".join(REFUSED[i] for i in refused)
    assert [g["index"] for g in result["conflicts"]] == refused


def test_unreadable_output_is_named():
    with pytest.raises(ReadError, match="nvidia-smi printed what the role cannot read"):
        MPS_GPUS("0, 00000000:01:00.0\n", "")


@pytest.mark.parametrize("wanted, percentage, limit, words", [
    ("0", None, None, ["gpus 'all' or a list of indexes (got '0')"]),
    ("all", 0, None, ["active_thread_percentage 1-100 (got 0)"]),
    ("all", 101, None, ["active_thread_percentage 1-100 (got 101)"]),
    ("all", "half", None, ["active_thread_percentage 1-100 (got 'half')"]),
    ("all", None, "20 GB", ["pinned_memory_limit like 20G (got '20 GB')"]),
    # every bad input named in one refusal, with where to fix them
    ({"gpus": 1}, 150, "8T", ["gpus 'all'", "active_thread_percentage 1-100 (got 150)", "pinned_memory_limit like 20G (got '8T')",
                              "set them in gpuvirt_mps"]),
])
def test_bad_role_inputs_are_refused_naming_each(wanted, percentage, limit, words):
    with pytest.raises(InputError) as caught:
        MPS_GPUS(QUERY, "", wanted, "started", percentage, limit)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize("percentage, limit", [(None, None), ("", ""), (1, "20G"), (100, "512M"), ("33", 1024)])
def test_good_or_unset_role_inputs_pass(percentage, limit):
    assert MPS_GPUS(QUERY, "", [3], "started", percentage, limit)["selected"][0]["index"] == "3"


# ---- gpu_mig: the role's inputs as the mig_profile call's options

LAYOUT = [{"devices": "all", "mig_enabled": True, "mig_devices": {"3g.40gb": 1, "1g.10gb": 3}}]
FILE = {"config_file": "/etc/nvidia-mig-manager/config-default.yaml", "config": "all-balanced"}
MIG_VALIDATOR = ArgumentSpecValidator(
    MIG_PROFILE_ARGS["argument_spec"], mutually_exclusive=MIG_PROFILE_ARGS["mutually_exclusive"],
    required_together=MIG_PROFILE_ARGS["required_together"], required_one_of=MIG_PROFILE_ARGS["required_one_of"])


@pytest.mark.parametrize("args, options", [
    # the role's defaults: reset auto, no force, nvidia-smi found on PATH (left out)
    ((LAYOUT, "auto", False, ""), {"layout": LAYOUT, "reset": "auto", "force": False}),
    ((LAYOUT, "never", True, "/usr/bin/nvidia-smi"),
     {"layout": LAYOUT, "reset": "never", "force": True, "nvidia_smi": "/usr/bin/nvidia-smi"}),
    # a mig-parted v1 file: its path and config, no layout
    ((FILE, "auto", False, None), dict(FILE, reset="auto", force=False)),
    ((dict(FILE, comment="kept out"), "auto", "no", ""), dict(FILE, reset="auto", force="no")),
    ((LAYOUT,), {"layout": LAYOUT, "reset": "auto", "force": False}),
])
def test_mig_profile_options_map_the_role_inputs(args, options):
    built = MIG_OPTIONS(*args)
    assert built == options
    result = MIG_VALIDATOR.validate(built)
    assert not result.error_messages, result.error_messages


@pytest.mark.parametrize("layout, words", [
    ({"config_file": "/etc/mig.yaml"}, "config missing"),
    ({"name": "all-balanced"}, "config_file and config missing"),
    ("all-balanced", "must be a mig_profile layout list or {config_file, config}, got str"),
    (None, "got NoneType"),
    ([], "is an empty layout list"),
])
def test_mig_profile_options_name_a_bad_layout(layout, words):
    with pytest.raises(MigInputError, match="gpu_mig_layout.*" + words.replace("{", "\\{").replace("}", "\\}")):
        MIG_OPTIONS(layout, "auto", False, "")


def gpu(bus_id, reboot_required):
    return {"index": int(bus_id[9:11], 16) - 1, "bus_id": bus_id, "name": "NVIDIA H100 PCIe", "reboot_required": reboot_required,
            "mig_mode": {"current": "disabled", "pending": "enabled"}, "actions": []}


PENDING = [gpu("00000000:01:00.0", True), gpu("00000000:02:00.0", False), gpu("00000000:03:00.0", True)]


@pytest.mark.parametrize("result, bus_ids", [
    ({"changed": True, "reboot_required": True, "gpus": PENDING}, ["00000000:01:00.0", "00000000:03:00.0"]),
    ({"changed": False, "reboot_required": False, "gpus": [gpu("00000000:01:00.0", False)]}, []),
    ({"changed": False, "gpus": []}, []),
    ({"failed": True, "msg": "nvidia-smi: not found"}, []),
])
def test_mig_reboot_gpus_are_the_ones_a_reboot_waits_for(result, bus_ids):
    assert MIG_REBOOT_GPUS(result) == bus_ids


def test_mig_reboot_gpus_names_a_bad_input():
    with pytest.raises(MigInputError, match="result: expected the mig_profile result, got list"):
        MIG_REBOOT_GPUS([])


SKIPPED = {"changed": False, "skipped": True, "false_condition": "not ansible_check_mode"}


@pytest.mark.parametrize("after, bus_ids", [
    # no reboot ran (check mode, gpu_mig_reboot_ok false): what the first call found waits
    (SKIPPED, ["00000000:01:00.0", "00000000:03:00.0"]),
    (None, ["00000000:01:00.0", "00000000:03:00.0"]),
    # the call after the reboot: what it still finds
    ({"changed": True, "reboot_required": False, "gpus": [gpu("00000000:01:00.0", False), gpu("00000000:03:00.0", False)]}, []),
    ({"changed": False, "reboot_required": True, "gpus": [gpu("00000000:03:00.0", True)]}, ["00000000:03:00.0"]),
])
def test_mig_reboot_gpus_after_the_reboot_are_the_ones_still_waiting(after, bus_ids):
    assert MIG_REBOOT_GPUS({"changed": True, "reboot_required": True, "gpus": PENDING}, after) == bus_ids


def test_mig_reboot_gpus_names_a_bad_after():
    with pytest.raises(MigInputError, match="after: the mig_profile result after the reboot, got str"):
        MIG_REBOOT_GPUS({"gpus": PENDING}, "rebooted")
