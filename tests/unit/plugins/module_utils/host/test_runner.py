# -*- coding: utf-8 -*-
"""The one module runner, through a small feature run as a module: results, changed, warnings,
diffs and errors (with changed when a step was already done)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import (
    Diff, Run, run_here, run_module as runner_run_module, run_nested)

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error

ARGS = dict(argument_spec=dict(root=dict(type="path", default="/"), fail=dict(type="bool", default=False)))


def feature(params, host, run):
    run.diff.add("/etc/x", "a\n", "b\n")
    run.warn("a warning")
    if not run.check_mode:
        with run.timed("true"):
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


def test_the_long_steps_seconds_in_the_result_also_on_failure(tmp_path):
    done = run_module(main, {}, host=host_of(tmp_path))
    failed = run_module(main, {"fail": True}, host=host_of(tmp_path))
    assert set(done["elapsed_s"]) == set(failed["elapsed_s"]) == {"true"}
    assert "elapsed_s" not in run_module(main, {}, check_mode=True, host=host_of(tmp_path))


def test_timed_adds_up_each_steps_seconds_even_when_it_fails():
    ticks = iter([10.0, 12.5, 20.0, 21.04, 30.0, 30.3])
    run = Run(clock=lambda: next(ticks))
    with run.timed("reset"):
        pass
    with run.timed("reset"):
        pass
    with pytest.raises(RuntimeError), run.timed("rebuild"):
        raise RuntimeError("the command failed")
    assert run.elapsed_s == {"reset": 3.5, "rebuild": 0.3}


def test_diff_records_nothing_when_off():
    diff = Diff(False)
    diff.add("x", "a", "b")
    diff.extend([{"before": "a"}])
    assert diff.entries == []


# ---- a module running another module's feature in its own call (run_nested)

INNER_ARGS = dict(argument_spec=dict(root=dict(type="path", default="/"), count=dict(type="int", required=True),
                                     size=dict(type="str", default="2M", choices=["2M", "1G"]), a=dict(type="bool"),
                                     b=dict(type="bool")),
                  mutually_exclusive=[("a", "b")])


def inner(params, host, run):
    if not run.check_mode:
        run.changed = True
    return {"seen": dict(params)}


OUTER_ARGS = dict(argument_spec=dict(root=dict(type="path", default="/"), inner=dict(type="dict")))


def outer(params, host, run):
    return {"inner": run_nested("inner", "gpuvirt.tenancy.inner", INNER_ARGS, inner, params["inner"], host, run)}


def outer_main(host=None):
    runner_run_module(OUTER_ARGS, outer, host=host)


def test_nested_feature_gets_its_defaults_and_shares_the_run(tmp_path):
    result = run_module(outer_main, {"inner": {"count": "3"}}, host=Host(str(tmp_path)))
    assert result["inner"]["seen"] == {"count": 3, "size": "2M", "a": None, "b": None}
    assert result["changed"] is True
    checked = run_module(outer_main, {"inner": {"count": 3}}, check_mode=True, host=Host(str(tmp_path)))
    assert checked["changed"] is False


@pytest.mark.parametrize("inner_params, words", [
    ({}, ["inner:", "count"]),
    ({"count": 1, "size": "4M"}, ["inner:", "size", "4M"]),
    ({"count": 1, "a": True, "b": True}, ["inner:", "mutually exclusive"]),
    ({"count": 1, "root": "/x"}, ["inner:", "root", "without root"]),
    ({"count": 1, "colour": "red"}, ["inner:", "colour"]),
])
def test_nested_options_are_validated_by_the_other_modules_spec(tmp_path, inner_params, words):
    result = run_module(outer_main, {"inner": inner_params}, host=Host(str(tmp_path)))
    assert result["failed"] and result["changed"] is False
    for word in words:
        assert word in result["msg"]
    assert "gpuvirt.tenancy.inner" in result["msg"]


def without_seconds(result):
    return dict((key, value) for key, value in result.items() if key not in ("elapsed_s", "invocation"))


@pytest.mark.parametrize("params, check_mode, diff", [
    ({}, False, True), ({}, True, True), ({}, True, False), ({"fail": True}, False, False), ({"fail": "maybe"}, False, False),
    ({"colour": "red"}, False, False),
])
def test_a_call_run_here_answers_as_the_module_does(tmp_path, params, check_mode, diff):
    """run_here (the controller-side run of a captured tree): the same validation, result,
    warnings, diff and errors as the module run, the commands run for real on both sides."""
    params = dict(params, root=str(tmp_path))
    here = run_here("main", ARGS, feature, params, check_mode=check_mode, diff=diff)
    module = run_module(main, params, check_mode=check_mode, diff=diff)
    if "msg" in module:
        module["msg"] = module["msg"].replace("(basic.py) module", "(main) module")
    assert without_seconds(here) == without_seconds(module)
    assert ("elapsed_s" in here) == ("elapsed_s" in module)
