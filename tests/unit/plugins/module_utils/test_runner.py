# -*- coding: utf-8 -*-
"""The one module runner, through a small feature run as a module: results, changed, warnings,
diffs and errors (with changed when a step was already done)."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import Diff, run_module as runner_run_module

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error

ARGS = dict(argument_spec=dict(root=dict(type="path", default="/"), fail=dict(type="bool", default=False)))


def feature(params, host, run):
    run.diff.add("/etc/x", "a\n", "b\n")
    run.warn("a warning")
    if not run.check_mode:
        host.commands.run(["true"])
        run.changed = True
    if params["fail"]:
        error = InputError("it failed")
        error.details = {"extra": 1}
        raise error
    return {"value": 1}


def main(host=None):
    runner_run_module(ARGS, feature, host=host)


def host_of(tmp_path):
    return Host(str(tmp_path), commands=RecordedCommands(replies=[(["true"],)]))


def test_result_changed_warnings_and_diff(tmp_path):
    result = run_module(main, {}, diff=True, host=host_of(tmp_path))
    assert result["value"] == 1 and result["changed"] is True and result["warnings"] == ["a warning"]
    assert result["diff"] == [{"before_header": "/etc/x", "after_header": "/etc/x", "before": "a\n", "after": "b\n"}]


def test_check_mode_and_no_diff(tmp_path):
    result = run_module(main, {}, check_mode=True, host=host_of(tmp_path))
    assert result["changed"] is False and "diff" not in result


def test_error_after_a_step_says_changed(tmp_path):
    result = run_module(main, {"fail": True}, host=host_of(tmp_path))
    assert result["failed"] and result["msg"] == "it failed" and result["changed"] is True and result["extra"] == 1


def test_diff_records_nothing_when_off():
    diff = Diff(False)
    diff.add("x", "a", "b")
    diff.extend([{"before": "a"}])
    assert diff.entries == []
