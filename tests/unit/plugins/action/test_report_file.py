# -*- coding: utf-8 -*-
"""The report_file action as the preflight role calls it: the report is written on the controller,
as JSON, atomically, only when it differs, never as a change (check mode included); bad inputs are
named and write nothing."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import report_file
from fakes.actions import run_action  # pylint: disable=import-error


def run(args, check_mode=False):
    return run_action(report_file, "report_file", args, check_mode)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check mode"])
def test_a_report_is_written_once_then_left_alone(tmp_path, check_mode):
    dest = tmp_path / "reports" / "dgx01.json"
    report = {"passed": True, "checks": [{"name": "iommu", "status": "PASS"}]}
    first = run({"data": report, "dest": str(dest)}, check_mode)
    assert not first.get("failed") and first["changed"] is False and first["written"] is True
    # as ansible.builtin.to_nice_json(indent=2) writes it, and a newline
    assert dest.read_text() == json.dumps(report, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"
    assert json.loads(dest.read_text()) == report and oct(dest.stat().st_mode & 0o777) == "0o644"
    before = dest.stat().st_mtime_ns
    again = run({"data": dict(report), "dest": str(dest)}, check_mode)
    assert again["written"] is False and dest.stat().st_mtime_ns == before
    changed = run({"data": dict(report, passed=False), "dest": str(dest)}, check_mode)
    assert changed["written"] is True and changed["changed"] is False and json.loads(dest.read_text())["passed"] is False
    # written by a rename: no temporary file is left beside it
    assert os.listdir(str(dest.parent)) == ["dgx01.json"]


@pytest.mark.parametrize("args, says", [
    ({"data": {}, "dest": "reports/dgx01.json"}, "dest: give the report file's absolute path"),
    ({"data": {}}, "dest: give the report file's absolute path"),
    ({"data": '{"passed": true}', "dest": "/tmp/never-written.json"}, "data: give the report (a dict); got str"),
], ids=["relative dest", "no dest", "data not a dict"])
def test_bad_inputs_are_named_and_write_nothing(args, says):
    result = run(args)
    assert result["failed"] and says in result["msg"]
    assert not os.path.exists("/tmp/never-written.json")


def test_a_directory_that_cannot_be_written_is_named(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the report directory should be")
    result = run({"data": {}, "dest": str(blocker / "dgx01.json")})
    assert result["failed"] and "cannot be written" in result["msg"] and str(blocker) in result["msg"]
    assert blocker.read_text() == "a file where the report directory should be"
