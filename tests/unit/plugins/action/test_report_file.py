# -*- coding: utf-8 -*-
"""The report_file action as the preflight role calls it: the report is written on the controller,
atomically, only when its content differs, never as a change (check mode included); bad inputs are
named and write nothing."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import report_file
from fakes.actions import run_action  # pylint: disable=import-error


def run(args, check_mode=False):
    return run_action(report_file, "report_file", args, check_mode)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check mode"])
def test_a_report_is_written_once_then_left_alone(tmp_path, check_mode):
    dest = tmp_path / "reports" / "dgx01.json"
    first = run({"content": '{"passed": true}\n', "dest": str(dest)}, check_mode)
    assert not first.get("failed") and first["changed"] is False and first["written"] is True
    assert dest.read_text() == '{"passed": true}\n' and oct(dest.stat().st_mode & 0o777) == "0o644"
    before = dest.stat().st_mtime_ns
    again = run({"content": '{"passed": true}\n', "dest": str(dest)}, check_mode)
    assert again["written"] is False and dest.stat().st_mtime_ns == before
    changed = run({"content": '{"passed": false}\n', "dest": str(dest)}, check_mode)
    assert changed["written"] is True and changed["changed"] is False and dest.read_text() == '{"passed": false}\n'
    # written by a rename: no temporary file is left beside it
    assert os.listdir(str(dest.parent)) == ["dgx01.json"]


@pytest.mark.parametrize("args, says", [
    ({"content": "x", "dest": "reports/dgx01.json"}, "dest: give the report file's absolute path"),
    ({"content": "x"}, "dest: give the report file's absolute path"),
    ({"content": {"passed": True}, "dest": "/tmp/never-written.json"}, "content: give the report's text (a string); got dict"),
], ids=["relative dest", "no dest", "content not text"])
def test_bad_inputs_are_named_and_write_nothing(args, says):
    result = run(args)
    assert result["failed"] and says in result["msg"]
    assert not os.path.exists("/tmp/never-written.json")


def test_a_directory_that_cannot_be_written_is_named(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the report directory should be")
    result = run({"content": "x", "dest": str(blocker / "dgx01.json")})
    assert result["failed"] and "cannot be written" in result["msg"] and str(blocker) in result["msg"]
    assert blocker.read_text() == "a file where the report directory should be"
