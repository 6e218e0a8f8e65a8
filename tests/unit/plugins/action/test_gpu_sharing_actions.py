# -*- coding: utf-8 -*-
"""The GPU sharing roles' actions as the roles call them: mig_layout (gpu_mig's mig_profile options
from its inputs; with the call's result, the GPUs whose MIG mode change waits) and mps_plan (the GPUs
gpu_mps acts on from its registered nvidia-smi queries). The tasks change nothing; a bad argument is
named and nothing is given."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import mig_layout, mps_plan
from fakes.actions import run_action  # pylint: disable=import-error

LAYOUT = [{"devices": "all", "mig_enabled": True, "mig_devices": {"3g.20gb": 2}}]
FIRST = {"changed": True, "reboot_required": True,
         "gpus": [{"bus_id": "00000000:36:00.0", "reboot_required": True}, {"bus_id": "00000000:37:00.0", "reboot_required": False}]}
# the query as the stand-in tests/unit/fakes/standins/nvidia-smi prints it
QUERY = {"rc": 0, "stdout": "0, 00000000:01:00.0, NVIDIA H100 PCIe, Default, Enabled\n1, 00000000:02:00.0, NVIDIA H100 PCIe, "
                            "Default, Disabled\n", "stderr": ""}


def test_mig_layout_gives_the_calls_options_and_what_waits():
    built = run_action(mig_layout, "mig_layout", {"layout": LAYOUT, "reset": "never", "force": False, "nvidia_smi": ""})
    assert not built.get("failed") and built["changed"] is False
    assert built["options"] == {"layout": LAYOUT, "reset": "never", "force": False}
    waits = run_action(mig_layout, "mig_layout", {"result": FIRST})
    assert waits["waiting"] == ["00000000:36:00.0"] and waits["reboot_required"] is True and waits["changed"] is False
    skipped = {"changed": False, "skipped": True}
    assert run_action(mig_layout, "mig_layout", {"result": FIRST, "after": skipped})["waiting"] == ["00000000:36:00.0"]
    done = run_action(mig_layout, "mig_layout", {"result": FIRST, "after": dict(FIRST, gpus=[])})
    assert done["waiting"] == [] and done["reboot_required"] is False


@pytest.mark.parametrize("args, message", [
    ({"layout": []}, "mig_layout: gpu_mig_layout (gpuvirt_mig_layout) is an empty layout list"),
    ({"reset": "auto"}, "mig_layout: layout: give gpu_mig_layout (gpuvirt_mig_layout), or result"),
    ({"result": FIRST, "layout": LAYOUT}, "mig_layout: layout: give either the role's inputs"),
    ({"after": FIRST}, "mig_layout: after: only with result"),
    ({"result": "done"}, "mig_layout: result: expected the mig_profile result, got str"),
])
def test_mig_layout_names_a_bad_argument(args, message):
    ran = run_action(mig_layout, "mig_layout", args)
    assert ran["failed"] and ran["msg"].startswith(message) and ran["changed"] is False, ran
    assert "options" not in ran and "waiting" not in ran


def test_mps_plan_gives_the_gpus_the_role_acts_on():
    ran = run_action(mps_plan, "mps_plan", {"query": QUERY, "apps": {"rc": 0, "stdout": ""}, "gpus": "all", "state": "started",
                                            "active_thread_percentage": None, "pinned_memory_limit": None})
    assert not ran.get("failed") and ran["changed"] is False and ran["answered"] is True
    assert [g["index"] for g in ran["selected"]] == ["1"] and [g["index"] for g in ran["skipped"]] == ["0"]


@pytest.mark.parametrize("args, message", [
    ({"query": QUERY, "gpus": "all", "active_thread_percentage": 150}, "gpu_mps: bad input - active_thread_percentage 1-100"),
    ({"query": QUERY, "apps": {"rc": 15, "stderr": "Unknown Error"}}, "gpu_mps: the GPUs answered but their processes could not be read"),
    ({"apps": ""}, "gpu_mps: query: give the registered nvidia-smi --query-gpu result"),
])
def test_mps_plan_names_a_bad_argument(args, message):
    ran = run_action(mps_plan, "mps_plan", args)
    assert ran["failed"] and ran["msg"].startswith(message) and ran["changed"] is False, ran
    assert "selected" not in ran
