# -*- coding: utf-8 -*-
"""The MIG planner of plugins/module_utils/guest/mig.py: the mig-parted v1 files of
tests/fixtures/mig-parted (each with .source.txt), layouts per GPU, and the placement search."""

from __future__ import annotations

import itertools
import os

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import mig
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nvidia_smi import parse_lgipp

from conftest import FIXTURES  # pylint: disable=import-error

MIG = os.path.join(FIXTURES, "mig")
PARTED = os.path.join(FIXTURES, "mig-parted")


def test_every_fixture_has_its_source():
    for directory in (MIG, PARTED):
        for name in os.listdir(directory):
            if not name.endswith(".source.txt"):
                assert os.path.exists(os.path.join(directory, name + ".source.txt")), name


# ---------------------------------------------------------------- mig-parted files ---
def load_yaml(name):
    with open(os.path.join(PARTED, name), "r", encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("name", ["examples_config.yaml.txt", "deployments_systemd_config-default.yaml"])
def test_every_config_of_the_mig_parted_files_is_accepted(name):
    document = load_yaml(name)
    for config in document["mig-configs"]:
        entries = mig.select_mig_parted_config(document, config, name)
        assert entries and all(isinstance(e["mig_enabled"], bool) for e in entries)


def test_mig_parted_balanced_device_filters():
    entries = mig.select_mig_parted_config(load_yaml("deployments_systemd_config-default.yaml"), "all-balanced", "config-default")
    gpus = [{"index": 0, "device_id": "10de:2331", "bus_id": "a"}, {"index": 1, "device_id": "10de:20b0", "bus_id": "b"},
            {"index": 2, "device_id": "10de:20b7", "bus_id": "c"}]
    wanted, warnings = mig.desired_per_gpu(entries, gpus)
    assert wanted[0]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert wanted[1]["mig_devices"] == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    # A30's filter is a plain string in that file, not a list.
    assert wanted[2]["mig_devices"] == {"1g.6gb": 2, "2g.12gb": 1}
    assert warnings == []


def test_custom_config_indexes_and_unknown_gpus():
    entries = mig.select_mig_parted_config(load_yaml("examples_config.yaml.txt"), "custom-config", "examples")
    gpus = [{"index": i, "device_id": "10de:20b0", "bus_id": str(i)} for i in (0, 4, 7)]
    # a mig-parted file names the GPUs of every host it serves: the others are warned about, as mig-parted skips them
    wanted, warnings = mig.desired_per_gpu(entries, gpus, "warn")
    assert [wanted[i]["mig_enabled"] for i in (0, 4, 7)] == [False, True, True]
    assert wanted[7]["mig_devices"] == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert len(warnings) == 5 and "GPU 1" in warnings[0]
    # the module's own layout is written for this host: an index it does not have is an error
    with pytest.raises(InputError, match=r"layout\[0\]\.devices: GPU 1, 2, 3 does not exist on this host \(its GPUs: 0, 4, 7\)"):
        mig.desired_per_gpu(entries, gpus)


@pytest.mark.parametrize("name", ["1g.10gb\n", "1g.10gb+me\n", "1g.10gb\nx", "MIG 1g.10gb\r"])
def test_profile_names_with_a_line_end_are_refused(name):
    with pytest.raises(InputError, match="control character"):
        mig.normalize_entry({"mig_enabled": True, "mig_devices": {name: 1}}, "layout[0]")
    assert not mig.PROFILE_NAME.match("1g.10gb\n")


def test_not_a_mig_parted_file():
    with pytest.raises(InputError, match="not a mig-parted v1 file"):
        mig.select_mig_parted_config({"version": "v2"}, "x", "f")


# ---------------------------------------------------------------- placement ----------
with open(os.path.join(MIG, "lgipp_h100-pcie-80gb_driver525.txt"), "r", encoding="utf-8") as _handle:
    H100_PLACEMENTS = parse_lgipp(_handle.read())[0]


def brute_force_fits(requests, placements, occupied):
    used0 = set()
    for start, size in occupied:
        used0.update(range(start, start + size))
    for combo in itertools.product(*[placements[p]["starts"] for p in requests]):
        used = set(used0)
        good = True
        for pid, start in zip(requests, combo):
            cells = set(range(start, start + placements[pid]["size"]))
            if cells & used:
                good = False
                break
            used |= cells
        if good:
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(sorted(H100_PLACEMENTS)), max_size=7),
       st.lists(st.tuples(st.integers(0, 7), st.integers(1, 2)), max_size=2))
def test_place_is_sound_and_complete(requests, occupied):
    occupied = [(s, n) for s, n in occupied if s + n <= 8]
    result = mig.place(requests, H100_PLACEMENTS, occupied)
    assert (result is not None) == brute_force_fits(requests, H100_PLACEMENTS, occupied)
    if result is not None:
        used = set()
        for start, size in occupied:
            used.update(range(start, start + size))
        assert sorted(pair[0] for pair in result) == sorted(requests)
        for pid, start in result:
            assert start in H100_PLACEMENTS[pid]["starts"]
            cells = set(range(start, start + H100_PLACEMENTS[pid]["size"]))
            assert not cells & used
            used |= cells


def test_place_balanced_layout():
    assert mig.place([19, 19, 14, 9], H100_PLACEMENTS) is not None
    assert mig.place([5, 9, 19], H100_PLACEMENTS) is None


def _names_in_list_captures():
    """GPU product names as nvidia-smi -L prints them in the real captures ("GPU 0: NAME (UUID: ...)")."""
    names = {}
    for fname in sorted(os.listdir(MIG)):
        if fname.startswith("nvidia-smi-L_") and not fname.endswith(".source.txt"):
            with open(os.path.join(MIG, fname), "r", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("GPU "):
                        names[line.split(": ", 1)[1].split(" (UUID", 1)[0].strip()] = fname
    return names


def test_hopper_is_told_by_the_product_name_nvidia_smi_prints():
    names = _names_in_list_captures()
    hopper = sorted(n for n in names if mig.mode_switch_without_reset({"name": n}))
    others = sorted(n for n in names if not mig.mode_switch_without_reset({"name": n}))
    # the captures hold both generations: the H100 SXM and PCIe names, and the A100's
    assert hopper == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"], names
    assert others == ["A100-SXM4-40GB"], names
    # the GH200 of its -lgip capture's source, and names that only contain the letters
    assert mig.mode_switch_without_reset({"name": "NVIDIA GH200 144G HBM3e"})
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA A30", "NVIDIA H100X-custom", "", None):
        assert not mig.mode_switch_without_reset({"name": name}), name


def _pending_gpu(name):
    return {"index": 0, "name": name, "bus_id": "00000000:01:00.0", "mig_capable": True,
            "mig_mode": {"current": "disabled", "pending": "enabled"}, "processes": [], "instances": [],
            "profiles": [], "placements": {}}


def test_a_pending_mode_change_asks_a_reboot_on_ampere_only():
    entry = mig.normalize_entry({"mig_enabled": True, "mig_devices": {"3g.40gb": 1}}, "layout[0]")
    ampere = mig.plan_gpu(_pending_gpu("A100-SXM4-40GB"), entry, "never")
    assert ampere["pending_reboot"] is True and ampere["mode"] is None and ampere["reset_needed"] is True
    hopper = mig.plan_gpu(_pending_gpu("NVIDIA H100 PCIe"), entry, "never")
    assert not hopper.get("pending_reboot") and hopper["mode"] == "enable" and hopper["reset_needed"] is False
    assert hopper["create"] == ["3g.40gb"]
    assert mig.describe_plan(_pending_gpu("NVIDIA H100 PCIe"), hopper)[0] == (
        "GPU 0: enable MIG mode (already pending: set again; a Hopper GPU needs no reset or reboot)")
