# -*- coding: utf-8 -*-
"""The host_reboot action: ansible.builtin.reboot's own wait loop (of the ansible-core under test:
the oldest and newest stages run this too), with a status line after failed attempts."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.plugins.action import ActionBase
from ansible.plugins.action import reboot as builtin_reboot

from ansible_collections.gpuvirt.tenancy.plugins.action import host_reboot

from fakes.clock import Clock  # pylint: disable=import-error


def action(args=None):
    task = mock.MagicMock()
    task.args = dict(args or {})
    task.action = "gpuvirt.tenancy.host_reboot"
    task.check_mode = False
    return host_reboot.ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())


@pytest.fixture(name="printed")
def fixture_printed(monkeypatch):
    lines = []
    monkeypatch.setattr(host_reboot.display, "display", lambda msg, *a, **k: lines.append(msg))
    return lines


@pytest.fixture(name="waiting")
def fixture_waiting(monkeypatch):
    """-> a function (interval, host) -> the plugin on a fake clock; the builtin's pauses between
    attempts (1, 2, 4, 8, 12, 12 ... s and a fraction) advance the clock, not the test."""
    clock = Clock()
    monkeypatch.setattr(builtin_reboot.time, "sleep", clock.sleep)

    def make(interval, host="h"):
        plugin = action()
        plugin._clock = clock
        plugin._status_interval = interval
        plugin._status_host = host
        return plugin, clock
    return make


def test_the_builtins_wait_prints_a_status_line_while_the_host_is_not_back(waiting, printed):
    plugin, _clock = waiting(20, "gpu-07")
    attempts = []

    def boot_time_check(distribution, previous_boot_time):
        attempts.append((distribution, previous_boot_time))
        if len(attempts) < 9:
            raise ConnectionError("ssh: connect to host gpu-07 port 22: Connection refused")

    plugin.do_until_success_or_timeout(action=boot_time_check, reboot_timeout=900, action_desc="last boot time check",
                                       distribution="debian", action_kwargs={"previous_boot_time": "b1"})
    assert attempts == [("debian", "b1")] * 9
    # 8 failed attempts over about 1+2+4+8+12+12+12 s: lines at least 20 s apart, each with the seconds so far
    assert len(printed) >= 2, printed
    assert all(line.startswith("REBOOT WAIT gpu-07: ") and " s of 900 s, not back yet (last boot time check: ssh: connect to host"
               in line for line in printed), printed
    seconds = [int(line.split(": ")[1].split(" s of")[0]) for line in printed]
    assert seconds[0] >= 20 and all(b - a >= 20 for a, b in zip(seconds, seconds[1:])), seconds


def test_the_test_command_wait_goes_on_counting_from_the_first_wait(waiting, printed):
    plugin, clock = waiting(5)
    plugin.do_until_success_or_timeout(action=lambda distribution: None, reboot_timeout=60, action_desc="last boot time check",
                                       distribution="debian")
    clock.now = 100.0
    calls = []

    def test_command(distribution):
        calls.append(distribution)
        if len(calls) == 1:
            raise RuntimeError("Test command failed: whoami: not found")

    plugin.do_until_success_or_timeout(action=test_command, reboot_timeout=60, action_desc="post-reboot test command", distribution="debian")
    assert printed == ["REBOOT WAIT h: 100 s of 60 s, not back yet (post-reboot test command: Test command failed: whoami: not found)"]


def test_status_interval_0_prints_nothing_and_a_bad_one_fails_before_any_reboot(waiting, printed):
    plugin, _clock = waiting(0)
    failures = iter([True] * 6 + [False])

    def flaky(distribution):
        if next(failures):
            raise ConnectionError("refused")

    plugin.do_until_success_or_timeout(action=flaky, reboot_timeout=900, action_desc="last boot time check", distribution="debian")
    assert printed == []


@pytest.mark.parametrize("bad, shown", [
    (-1, "-1 (int)"),
    ("soon", "'soon' (str)"),
    ("abc", "'abc' (str)"),
    (None, "None (NoneType)"),
    # a boolean is no number of seconds, though Python takes True for 1
    (True, "True (bool)"),
    (False, "False (bool)"),
    (2.5, "2.5 (float)"),
    ("-5", "'-5' (str)"),
])
def test_a_bad_status_interval_fails_naming_the_value_before_any_reboot(bad, shown):
    args = {"status_interval": bad, "reboot_timeout": 900}
    bad_plugin = action(args)
    with mock.patch.object(builtin_reboot.ActionModule, "run") as builtin_run:
        result = bad_plugin.run(task_vars={"inventory_hostname": "h"})
    assert result["failed"] and not result["rebooted"] and not result["changed"] and not builtin_run.called
    assert result["msg"].startswith("status_interval: %s is not a whole number of seconds, 0 or more" % shown), result["msg"]
    assert "give status_interval: 30" in result["msg"]
    assert bad_plugin._task.args == args


def builtin_checking_its_args(seen):
    """The builtin's run as far as its own check of the task's args (ActionBase.run against
    _VALID_ARGS, the code of the ansible-core under test), then a reboot that succeeded."""
    def builtin_run(self, tmp=None, task_vars=None):
        ActionBase.run(self, tmp, task_vars)
        seen.append(dict(self._task.args))
        return {"rebooted": True, "elapsed": 3, "changed": True}
    return builtin_run


@pytest.mark.parametrize("given, interval", [(15, 15), ("15", 15), (0, 0), (None, 30)])
def test_the_builtin_takes_the_task_args_as_given_and_a_retry_reads_them_again(given, interval):
    args = {"reboot_timeout": 900, "msg": "new kernel"}
    if given is not None:
        args["status_interval"] = given
    plugin = action(args)
    plugin._task.async_val = 0
    seen = []
    with mock.patch.object(builtin_reboot.ActionModule, "run", builtin_checking_its_args(seen)):
        for _attempt in range(2):  # until/retries runs the same task, args and all, again
            plugin._status_interval = None
            result = plugin.run(task_vars={"inventory_hostname": "gpu-07"})
            assert result["rebooted"] and plugin._status_interval == interval and plugin._status_host == "gpu-07"
    assert seen == [args, args] and plugin._task.args == args
    assert "status_interval" in host_reboot.ActionModule._VALID_ARGS and builtin_reboot.ActionModule._VALID_ARGS <= host_reboot.ActionModule._VALID_ARGS


def builtin_rebooting(plugin, boot_ids, failed=False):
    """The builtin's run as far as its reads of the boot id (its own get_system_boot_time, the
    command's output given in turn: once before the reboot, then once per attempt after it)."""
    reads = iter(boot_ids)

    def builtin_run(self, tmp=None, task_vars=None):
        for _read in boot_ids:
            self.get_system_boot_time("debian")
        return {"failed": True, "msg": "timed out", "rebooted": False} if failed else {"rebooted": True, "changed": True, "elapsed": 41}

    def boot_time(self, distribution):
        return next(reads)
    return builtin_run, boot_time


CMDLINE = "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/vda1 ro intel_iommu=on iommu=pt\n"


def proving(args, boot_ids, cmdline=CMDLINE, rc=0, failed=False):
    plugin = action(args)
    plugin._task.async_val = 0
    builtin_run, boot_time = builtin_rebooting(plugin, boot_ids, failed)
    commands = []

    def execute(command, sudoable=True, **_kwargs):
        commands.append(command)
        return {"rc": rc, "stdout": cmdline, "stderr": "cat: /proc/cmdline: Permission denied" if rc else ""}
    plugin._low_level_execute_command = execute
    with mock.patch.object(builtin_reboot.ActionModule, "run", builtin_run), \
            mock.patch.object(builtin_reboot.ActionModule, "get_system_boot_time", boot_time):
        return plugin.run(task_vars={"inventory_hostname": "gpu-07"}), commands


def test_the_reboot_is_proven_from_the_builtins_boot_id_reads_and_one_read_of_the_command_line():
    # the first read before the reboot, then the attempts after it: the old id while the host is going down
    result, commands = proving({"cmdline_wanted": ["intel_iommu=on", "iommu=pt"], "cmdline_unwanted": ["quiet"]},
                               ["id-1", "id-1", "id-2"])
    assert not result.get("failed") and result["rebooted"]
    assert (result["boot_id_before"], result["boot_id"], result["problems"]) == ("id-1", "id-2", [])
    assert result["cmdline"] == CMDLINE.strip() and commands == ["cat /proc/cmdline"]
    assert result["msg"].startswith("gpu-07 rebooted in 41 s: boot id id-1 -> id-2; the kernel runs with BOOT_IMAGE=")


@pytest.mark.parametrize("args, cmdline, words", [
    ({"cmdline_wanted": ["intel_iommu=on", "iommu=pt"]}, CMDLINE.replace(" iommu=pt", ""), "the new command line lacks iommu=pt"),
    ({"cmdline_unwanted": ["ro"]}, CMDLINE, "the new command line still has ro"),
])
def test_a_reboot_not_proven_fails_naming_what_the_command_line_lacks_or_still_has(args, cmdline, words):
    result, _commands = proving(args, ["id-1", "id-2"], cmdline)
    assert result["failed"] and words in result["msg"] and "boot id id-1 -> id-2" in result["msg"]
    assert "is the edited boot entry the default one?" in result["msg"]


def test_a_command_line_that_cannot_be_read_fails_the_proof():
    result, _commands = proving({"cmdline_wanted": ["iommu=pt"]}, ["id-1", "id-2"], rc=1)
    assert result["failed"] and "/proc/cmdline could not be read after the reboot (rc 1: cat: /proc/cmdline: Permission denied)" \
        in result["msg"]


def test_no_proof_without_its_options_nor_after_a_failed_reboot():
    result, commands = proving({}, ["id-1", "id-2"])
    assert not result.get("failed") and "msg" not in result and commands == []
    result, commands = proving({"cmdline_wanted": ["iommu=pt"]}, ["id-1"], failed=True)
    assert result["failed"] and result["msg"] == "timed out" and commands == []


@pytest.mark.parametrize("args, words", [
    ({"cmdline_wanted": "intel_iommu=on"}, "cmdline_wanted: 'intel_iommu=on' is not a list of kernel command-line arguments"),
    ({"cmdline_unwanted": [["quiet"]]}, "cmdline_unwanted: [['quiet']] is not a list"),
])
def test_a_bad_argument_list_fails_before_any_reboot(args, words):
    plugin = action(args)
    with mock.patch.object(builtin_reboot.ActionModule, "run") as builtin_run:
        result = plugin.run(task_vars={"inventory_hostname": "h"})
    assert result["failed"] and not result["rebooted"] and not builtin_run.called and words in result["msg"]
