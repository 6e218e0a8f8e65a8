# -*- coding: utf-8 -*-
"""The GPUs the gpu_mps role acts on, from nvidia-smi CSV in the formats of
tests/unit/fakes/standins/nvidia-smi (which replays the real --query-gpu CSV of tests/fixtures/mig)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.mps import mps_gpus

from fakes.mig import STANDIN, gpu, h100_fixture_layout  # pylint: disable=import-error

H100 = "NVIDIA H100 PCIe"


def smi(tmp_path, gpus, *args):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"gpus": gpus}))
    env = dict(os.environ, NVIDIA_SMI_STANDIN_STATE=str(state))
    return subprocess.run([STANDIN] + list(args), env=env, capture_output=True, text=True, check=True).stdout


def selection(tmp_path, gpus, wanted="all", state="started"):
    query = smi(tmp_path, gpus, "--query-gpu=index,pci.bus_id,name,compute_mode,mig.mode.current", "--format=csv,noheader")
    apps = smi(tmp_path, gpus, "--query-compute-apps=gpu_bus_id,pid,process_name", "--format=csv,noheader")
    return mps_gpus(query, apps, wanted, state)


@pytest.mark.parametrize("gpus, wanted, state, selected, conflicts", [
    ([gpu(H100, "00000000:01:00.0"), gpu(H100, "00000000:02:00.0")], "all", "started", ["0", "1"], []),
    ([gpu(H100, "00000000:01:00.0"), gpu(H100, "00000000:02:00.0")], [1], "started", ["1"], []),
    ([h100_fixture_layout()], "all", "started", [], ["0"]),
    ([h100_fixture_layout()], "all", "stopped", ["0"], ["0"]),
    ([gpu(H100, "00000000:01:00.0", compute_mode="Exclusive_Process", processes=[{"pid": 31, "name": "python3"}]),
      gpu(H100, "00000000:02:00.0", compute_mode="Exclusive_Process")], "all", "started", ["1"], ["0"]),
])
def test_selection(tmp_path, gpus, wanted, state, selected, conflicts):
    result = selection(tmp_path, gpus, wanted, state)
    assert [g["index"] for g in result["selected"]] == selected
    assert [g["index"] for g in result["conflicts"]] == conflicts
    assert result["missing"] == []


def test_missing_gpus_are_named(tmp_path):
    result = selection(tmp_path, [gpu(H100, "00000000:01:00.0")], [0, 5])
    assert result["missing"] == ["5"] and [g["index"] for g in result["gpus"]] == ["0"]


def test_cells_are_kept_as_printed(tmp_path):
    result = selection(tmp_path, [h100_fixture_layout()])
    assert result["gpus"][0]["mig"] == "Enabled" and result["gpus"][0]["bus_id"] == "00000000:01:00.0"
