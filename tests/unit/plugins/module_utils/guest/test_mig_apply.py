# -*- coding: utf-8 -*-
"""The mig_profile feature's host side: which nvidia-smi it runs, and reading every GPU through
tests/unit/fakes/standins/nvidia-smi (a STAND-IN replaying tests/fixtures/mig)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.mig_apply import nvidia_smi_path, read_gpus
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nvidia_smi import NvidiaSmi

from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.mig import STANDIN, h100_fixture_layout, make_state  # pylint: disable=import-error
from fakes.rdma import StandinCommands  # pylint: disable=import-error


def test_nvidia_smi_missing_is_a_state_error(tmp_path):
    with pytest.raises(StateError, match="nvidia-smi was not found on PATH"):
        nvidia_smi_path({"nvidia_smi": None}, Host(str(tmp_path), commands=RecordedCommands()))


def test_nvidia_smi_on_path_is_used(tmp_path):
    assert nvidia_smi_path({"nvidia_smi": None}, Host(str(tmp_path), commands=RecordedCommands(["nvidia-smi"]))) == "/usr/bin/nvidia-smi"


def test_read_gpus_with_instances_and_profiles(tmp_path, monkeypatch):
    make_state(tmp_path, monkeypatch, [h100_fixture_layout()])
    host = Host(str(tmp_path), commands=StandinCommands({"nvidia-smi": STANDIN}))
    smi = NvidiaSmi(nvidia_smi_path({"nvidia_smi": None}, host), host)
    gpus = read_gpus(smi)
    assert sorted(gi["profile"] for gi in gpus[0]["instances"]) == ["1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert gpus[0]["profiles"] and gpus[0]["placements"] and gpus[0]["processes"] == []
    assert all(c["rc"] == 0 for c in smi.commands)
