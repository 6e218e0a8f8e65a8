# -*- coding: utf-8 -*-
"""guest_nvlink over a fake guest root: the modprobe.d file that disables NVLink in the NVIDIA driver
(option NVreg_NvLinkDisable, NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-reg.h), written,
kept, removed; check mode, diff, other files that set the option, the loaded driver's value."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import guest_nvlink
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nvlink_driver
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from conftest import run_module  # pylint: disable=import-error

PATH = "/etc/modprobe.d/gpuvirt-nvlink.conf"


@pytest.fixture
def root(tmp_path):
    (tmp_path / "etc" / "modprobe.d").mkdir(parents=True)
    return tmp_path


def nvlink(root, args, **kwargs):
    return run_module(guest_nvlink.main, args, host=Host(str(root)), **kwargs)


def loaded(root, value):
    """The loaded driver's module parameter, as /sys/module/nvidia/parameters shows it."""
    params = root / "sys" / "module" / "nvidia" / "parameters"
    params.mkdir(parents=True)
    (params / "NVreg_NvLinkDisable").write_text(value + "\n")


def test_disabled_writes_the_options_line_then_changes_nothing(root):
    result = nvlink(root, {"state": "disabled"}, diff=True)
    assert not result.get("failed"), result
    real = root / PATH.lstrip("/")
    text = real.read_text()
    assert text.endswith("\noptions nvidia NVreg_NvLinkDisable=1\n") and text.startswith("# Written by gpuvirt.tenancy")
    assert oct(os.stat(str(real)).st_mode & 0o777) == "0o644"
    assert result["changed"] is True and result["reboot_required"] is False and result["loaded"] is None
    assert result["diff"] == [{"before": "", "after": text, "before_header": PATH, "after_header": PATH}]
    again = nvlink(root, {"state": "disabled"})
    assert again["changed"] is False


def test_check_mode_writes_nothing_and_says_changed(root):
    result = nvlink(root, {"state": "disabled"}, check_mode=True)
    assert result["changed"] is True
    assert not (root / PATH.lstrip("/")).exists()


def test_enabled_removes_the_file_and_only_it(root):
    nvlink(root, {"state": "disabled"})
    other = root / "etc" / "modprobe.d" / "blacklist.conf"
    other.write_text("blacklist nouveau\n")
    check = nvlink(root, {"state": "enabled"}, check_mode=True)
    assert check["changed"] is True and (root / PATH.lstrip("/")).exists()
    result = nvlink(root, {"state": "enabled"})
    assert result["changed"] is True and not (root / PATH.lstrip("/")).exists()
    assert other.read_text() == "blacklist nouveau\n"
    assert nvlink(root, {"state": "enabled"})["changed"] is False


def test_a_file_with_other_text_is_brought_to_the_line(root):
    real = root / PATH.lstrip("/")
    real.write_text("options nvidia NVreg_NvLinkDisable=0\n")
    result = nvlink(root, {"state": "disabled"})
    assert result["changed"] is True and real.read_text() == nvlink_driver.wanted_text("disabled")


@pytest.mark.parametrize("value, state, due", [("0", "disabled", True), ("1", "disabled", False),
                                               ("1", "enabled", True), ("0", "enabled", False)])
def test_reboot_required_while_the_loaded_driver_holds_another_value(root, value, state, due):
    loaded(root, value)
    result = nvlink(root, {"state": state})
    assert result["loaded"] == value and result["reboot_required"] is due


def test_other_files_that_set_the_option_are_reported_and_warned_not_edited(root):
    other = root / "etc" / "modprobe.d" / "nvidia.conf"
    other.write_text("options nvidia NVreg_OpenRmEnableUnsupportedGpus=1 NVreg_NvLinkDisable=0\n")
    result = nvlink(root, {"state": "disabled"})
    assert result["others"] == {"/etc/modprobe.d/nvidia.conf": ["0"]}
    assert any("/etc/modprobe.d/nvidia.conf also sets NVreg_NvLinkDisable=0" in w for w in result["warnings"])
    assert other.read_text() == "options nvidia NVreg_OpenRmEnableUnsupportedGpus=1 NVreg_NvLinkDisable=0\n"


@pytest.mark.parametrize("path, message", [
    ("/etc/nvlink.conf", "path: /etc/nvlink.conf is not a file modprobe reads"),
    ("/etc/modprobe.d/nvlink", "is not a file modprobe reads"),
    ("/etc/modprobe.d/./x.conf", "is not a normalised path"),
    ("/etc/modprobe.d/sub/x.conf", "is not a file modprobe reads"),
])
def test_a_path_modprobe_does_not_read_is_refused_and_nothing_written(root, path, message):
    result = nvlink(root, {"state": "disabled", "path": path})
    assert result.get("failed") and message in result["msg"], result
    assert os.listdir(str(root / "etc" / "modprobe.d")) == []


def test_a_directory_at_the_path_is_refused(root):
    (root / PATH.lstrip("/")).mkdir()
    result = nvlink(root, {"state": "disabled"})
    assert result.get("failed") and "is a directory" in result["msg"]


def test_a_state_not_known_is_refused_by_the_argument_spec(root):
    result = nvlink(root, {"state": "off"})
    assert result.get("failed") and "state" in result["msg"]


def test_settings_in_reads_only_options_lines_of_the_nvidia_module():
    text = ("# options nvidia NVreg_NvLinkDisable=1\noptions nvidia_uvm NVreg_NvLinkDisable=1\n"
            "options nvidia NVreg_EnableMSI=1 NVreg_NvLinkDisable=1\n  options   nvidia NVreg_NvLinkDisable=0\n")
    assert nvlink_driver.settings_in(text) == ["1", "0"]
