# -*- coding: utf-8 -*-
"""Helpers for running mig_profile against tests/unit/fakes/standins/nvidia-smi, a STAND-IN for
nvidia-smi (see its docstring): it replays the real output formats of tests/fixtures/mig
and keeps MIG state in the JSON file named by $NVIDIA_SMI_STANDIN_STATE."""

from __future__ import annotations

import json
import os

from fakes.paths import STANDINS  # pylint: disable=import-error
from conftest import FIXTURES, run_module  # pylint: disable=import-error

STANDIN = os.path.join(STANDINS, "nvidia-smi")
READ_ONLY = ("-lgip", "-lgipp", "-lgi", "-lci")


def gpu(model, bus_id, mode="Disabled", **extra):
    data = {"model": model, "bus_id": bus_id, "mig": {"current": mode, "pending": mode}, "gpu_instances": [], "processes": []}
    data.update(extra)
    return data


def h100_fixture_layout():
    """The H100 PCIe of the scaleway captures after `mig -cgi 9,19,19,19 -C`
    (lgi_h100-pcie_3g.40gb+3x1g.10gb_driver525.txt): GI 2 = 3g.40gb at 4:4, GIs 7-9 =
    1g.10gb at 0-2, each with compute instance 0."""
    gis = [{"id": 2, "profile_id": 9, "start": 4, "size": 4, "compute_instances": [{"id": 0, "profile_id": 2}]}]
    gis += [{"id": 7 + s, "profile_id": 19, "start": s, "size": 1, "compute_instances": [{"id": 0, "profile_id": 0}]} for s in range(3)]
    return gpu("NVIDIA H100 PCIe", "00000000:01:00.0", mode="Enabled", gpu_instances=gis)


def make_state(tmp_path, monkeypatch, gpus):
    path = str(tmp_path / "nvidia-smi-state.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"gpus": gpus}, handle)
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", path)
    return path


def read_state(path):
    with open(path, "r", encoding="utf-8") as handle:
        return json.load(handle)


def mutating_calls(path, since=0):
    """The stand-in calls that change state (not queries, listings or the process table)."""
    calls = read_state(path).get("calls", [])[since:]
    return [c for c in calls if c and not c[0].startswith("--query-gpu") and not any(flag in c for flag in READ_ONLY)]


def run(args, check_mode=False, diff=False, root="/"):
    """mig_profile on an injected Host (``root``: the tree config_file is read under), with the
    stand-in as nvidia_smi unless the args name another; warnings are in the result."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
    from ansible_collections.gpuvirt.tenancy.plugins.modules import mig_profile
    full = dict(args)
    full.setdefault("nvidia_smi", STANDIN)
    result = run_module(mig_profile.main, full, check_mode=check_mode, diff=diff, host=Host(root))
    result.setdefault("warnings", [])
    return result


__all__ = ["FIXTURES", "STANDIN", "gpu", "h100_fixture_layout", "make_state", "mutating_calls", "read_state", "run"]
