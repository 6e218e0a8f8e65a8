# -*- coding: utf-8 -*-
"""boot_files: planned changes to the boot files under a root, made and then idempotent."""

from __future__ import annotations

import os

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import BootFiles, add_diffs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Diff


def test_service_files_written_enabled_then_nothing_to_do(tmp_path):
    files = BootFiles(Host(str(tmp_path)))
    changes = files.service_changes(restore.SRIOV_UNIT, restore.SRIOV_UNIT_TEXT)
    assert [(path, before) for path, before, _after in changes] == [
        (restore.SCRIPT_PATH, None), (restore.UNIT_DIR + "/" + restore.SRIOV_UNIT, None)]
    assert files.wants_link_missing(restore.SRIOV_UNIT)
    files.apply(changes, enable_unit=restore.SRIOV_UNIT)
    assert os.access(str(tmp_path) + restore.SCRIPT_PATH, os.X_OK)
    assert os.readlink(str(tmp_path) + restore.WANTS_DIR + "/" + restore.SRIOV_UNIT) == restore.UNIT_DIR + "/" + restore.SRIOV_UNIT
    assert not files.service_changes(restore.SRIOV_UNIT, restore.SRIOV_UNIT_TEXT)
    assert not files.wants_link_missing(restore.SRIOV_UNIT)


def test_none_removes_a_file_and_bad_json_reads_as_the_default(tmp_path):
    files = BootFiles(Host(str(tmp_path)))
    files.apply(files.change(restore.MODULES_LOAD, "vfio-pci\n") + files.change(restore.VFIO_CONFIG, "{not json"))
    assert files.load_json(restore.VFIO_CONFIG, {"devices": {}}) == {"devices": {}}
    changes = files.change(restore.MODULES_LOAD, None)
    assert changes == [(restore.MODULES_LOAD, "vfio-pci\n", None)]
    files.apply(changes)
    assert not os.path.exists(str(tmp_path) + restore.MODULES_LOAD)
    assert files.change(restore.MODULES_LOAD, None) == []


def test_diffs_recorded_only_in_diff_mode():
    changes = [(restore.VFIO_CONFIG, None, "{}\n")]
    shown, hidden = Diff(True), Diff(False)
    add_diffs(shown, changes)
    add_diffs(hidden, changes)
    assert shown.entries == [{"before_header": restore.VFIO_CONFIG, "after_header": restore.VFIO_CONFIG, "before": "", "after": "{}\n"}]
    assert hidden.entries == []


def test_a_file_planned_earlier_in_the_call_is_the_base_of_the_next_plan(tmp_path):
    """Check mode writes nothing: the second PF's plan must build on the first one's planned
    sriov.json (what the real run, which writes after each PF, reads), and a new call reads the disk."""
    host = Host(str(tmp_path))
    first = BootFiles(host).change(restore.SRIOV_CONFIG, '{"pfs": {"a": 1}}\n')
    assert first == [(restore.SRIOV_CONFIG, None, '{"pfs": {"a": 1}}\n')]
    files = BootFiles(host)
    assert files.load_json(restore.SRIOV_CONFIG, {}) == {"pfs": {"a": 1}}
    assert files.change(restore.SRIOV_CONFIG, '{"pfs": {"a": 1, "b": 2}}\n') == [
        (restore.SRIOV_CONFIG, '{"pfs": {"a": 1}}\n', '{"pfs": {"a": 1, "b": 2}}\n')]
    # the same text planned again is no change
    assert files.change(restore.SRIOV_CONFIG, '{"pfs": {"a": 1, "b": 2}}\n') == []
    assert not os.path.exists(str(tmp_path) + restore.SRIOV_CONFIG)
    assert BootFiles(Host(str(tmp_path))).load_json(restore.SRIOV_CONFIG, {}) == {}
