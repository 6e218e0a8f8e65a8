# -*- coding: utf-8 -*-
"""When the host_reboot action prints a status line while it waits, and what the line says."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_status import ERROR_CHARS, RebootWaitStatus, status_interval_seconds

from fakes.clock import Clock  # pylint: disable=import-error


@pytest.mark.parametrize("interval, attempts_at, lines_at", [
    # an attempt every 5 s: a line once 30 s passed since the start, then since the last line
    (30, [5, 10, 29, 30, 35, 59, 61, 90], [30, 61]),
    # attempts further apart than the interval: a line after each
    (10, [12, 40, 41, 55], [12, 40, 55]),
    # 0: never a line
    (0, [5, 100, 1000], []),
])
def test_a_line_comes_after_a_failed_attempt_once_the_interval_passed(interval, attempts_at, lines_at):
    clock = Clock(1000.0)
    status = RebootWaitStatus("gpu-07", 900, interval, clock)
    printed = []
    for second in attempts_at:
        clock.now = 1000.0 + second
        if status.after_failed_attempt("last boot time check", "timed out"):
            printed.append(second)
    assert printed == lines_at


def test_the_line_names_the_host_the_seconds_the_bound_the_step_and_the_last_line_of_the_error():
    clock = Clock(1000.0)
    status = RebootWaitStatus("gpu-07", 900, 30, clock)
    clock.now += 45.7
    error = "Failed to connect to the host via ssh:\nssh: connect to host 10.0.0.7 port 22: Connection refused\n"
    assert status.after_failed_attempt("last boot time check", error) == (
        "REBOOT WAIT gpu-07: 45 s of 900 s, not back yet (last boot time check: ssh: connect to host 10.0.0.7 port 22: Connection refused)")


def test_a_long_error_is_cut_and_an_empty_one_says_no_answer():
    clock = Clock(1000.0)
    status = RebootWaitStatus("h", 600, 1, clock)
    clock.now += 2
    line = status.after_failed_attempt("post-reboot test command", "x" * 1000)
    assert line.endswith("x" * (ERROR_CHARS - 3) + "...)") and "x" * (ERROR_CHARS - 2) not in line
    clock.now += 2
    assert status.after_failed_attempt("post-reboot test command", "\n  \n").endswith("(post-reboot test command: no answer)")


@pytest.mark.parametrize("given, seconds", [(30, 30), (0, 0), ("45", 45), (" 7 ", 7), (3600, 3600)])
def test_status_interval_is_whole_seconds_as_an_int_or_its_digits(given, seconds):
    assert status_interval_seconds(given) == seconds


@pytest.mark.parametrize("given", [True, False, -1, "-1", "abc", "1.5", "", "30s", 1.5, 30.0, None, [30], "\u0663"])
def test_anything_else_is_refused_naming_the_value_and_the_fix(given):
    with pytest.raises(ValueError) as caught:
        status_interval_seconds(given)
    message = str(caught.value)
    assert message.startswith("status_interval: %r (%s) is not a whole number of seconds" % (given, type(given).__name__))
    assert "give status_interval: 30" in message and "or 0 (no status line)" in message
