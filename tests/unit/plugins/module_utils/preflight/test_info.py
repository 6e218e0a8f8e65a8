# -*- coding: utf-8 -*-
"""The preflight_info feature on an injected Host over the real capture of the bare lab VM."""

from __future__ import annotations


import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.info import preflight_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run

from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

BARE = lab_capture("bare")


def test_bare_lab_has_no_connectx_and_runs_nothing():
    commands = RecordedCommands()
    result = preflight_info({"gpu_ids": ["1234:11e8"], "nic_ids": [], "firmware_tool": "auto"},
                            Host(BARE, commands=commands), Run(check_mode=True))
    assert result["firmware"] == {} and [g["address"] for g in result["topology"]["gpus"]] == ["0000:82:00.0"]
    assert commands.calls == []


def test_bad_ids_name_the_inputs():
    with pytest.raises(InputError, match="gpu_ids/nic_ids"):
        preflight_info({"gpu_ids": ["zzzz:1"], "nic_ids": [], "firmware_tool": "none"}, Host(BARE), Run())
