# -*- coding: utf-8 -*-
"""When the host_reboot action prints a status line while it waits, and what the line says; the
reboot's proof it gives with cmdline_wanted and cmdline_unwanted."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_status import (
    ERROR_CHARS, RebootWaitStatus, kernel_arg_list, reboot_proof, status_interval_seconds)

from fakes.captured_trees import lab_capture  # pylint: disable=import-error
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


# The boot stage's reboot proof (the host_reboot action's cmdline_wanted and cmdline_unwanted).
OLD_ID = "5c0b1f8e-2a83-4f5e-9d3a-0d9b3e1c7a11\n"
NEW_ID = "9a2d44c1-7b1e-4c55-8f0e-6e0f4d2b9c20\n"
# the lab host's /proc/cmdline after the boot stage (the capture tests/fixtures/lab/iommu-on.tar)
with open(os.path.join(lab_capture("iommu-on"), "proc", "cmdline"), encoding="utf-8") as _handle:
    CMDLINE = _handle.read()
WANTED = [arg for arg in CMDLINE.split() if "iommu" in arg]
UNWANTED = ["quiet"]


@pytest.mark.parametrize("before, after_id, cmdline, problems", [
    (OLD_ID, NEW_ID, CMDLINE, []),
    (OLD_ID, OLD_ID, CMDLINE, ["did not boot again"]),
    ("", NEW_ID, CMDLINE, ["no boot id was read"]),
    # an argument matches as written: iommu=pt is not intel_iommu=on's value
    (OLD_ID, NEW_ID, CMDLINE.replace("intel_iommu=on", ""), ["lacks intel_iommu=on"]),
    (OLD_ID, NEW_ID, CMDLINE.replace(" ro ", " ro quiet "), ["still has quiet"]),
    (OLD_ID, OLD_ID, "ro\n", ["did not boot again", "lacks " + " ".join(WANTED)]),
])
def test_the_reboot_is_proven_by_a_new_boot_and_the_wanted_command_line(before, after_id, cmdline, problems):
    assert WANTED and "intel_iommu=on" in WANTED
    proof = reboot_proof(before, after_id, cmdline, WANTED, UNWANTED)
    assert proof["ok"] is (not problems)
    assert len(proof["problems"]) == len(problems)
    for words, found in zip(problems, proof["problems"]):
        assert words in found
    assert cmdline.split()[0] in proof["message"]
    if problems:
        assert "is the edited boot entry the default one?" in proof["message"]


@pytest.mark.parametrize("value, words", [
    ("intel_iommu=on", "'intel_iommu=on' is not a list"),
    ([1], r"\[1\] is not a list of kernel command-line arguments"),
    ({"a": 1}, "is not a list"),
])
def test_a_bad_argument_list_is_named(value, words):
    with pytest.raises(ValueError, match=words) as raised:
        reboot_proof(OLD_ID, NEW_ID, CMDLINE, value, [])
    assert "cmdline_wanted" in str(raised.value)
    assert kernel_arg_list(None, "cmdline_unwanted") == [] and kernel_arg_list("", "x") == []
