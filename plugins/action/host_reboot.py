# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible.builtin.reboot with a status line while it waits for the host (the builtin reports its
attempts only at -vvv) and, where ``cmdline_wanted`` or ``cmdline_unwanted`` is given, the
reboot's proof: the boot id read before it and the one after it differ (the builtin's own reads of
/proc/sys/kernel/random/boot_id, kept), and /proc/cmdline, read once after it, has every wanted
argument and no unwanted one; a reboot not proven fails the task, naming what is missing.
Everything else is the builtin's: the reboot, its checks, its result."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action.reboot import ActionModule as RebootActionModule
from ansible.utils.display import Display

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_status import (
    DEFAULT_STATUS_INTERVAL, RebootWaitStatus, kernel_arg_list, reboot_proof, status_interval_seconds)

display = Display()


class ActionModule(RebootActionModule):

    _VALID_ARGS = RebootActionModule._VALID_ARGS | frozenset(("status_interval", "cmdline_wanted", "cmdline_unwanted"))
    # the command line of the running kernel, read after the reboot (Linux: proc(5))
    CMDLINE_COMMAND = "cat /proc/cmdline"

    def __init__(self, *args, **kwargs):
        super(ActionModule, self).__init__(*args, **kwargs)
        self._wait_status = None
        self._status_interval = DEFAULT_STATUS_INTERVAL
        self._status_host = None
        self._clock = time.monotonic
        self._boot_ids = []

    def run(self, tmp=None, task_vars=None):
        # The task's args are read, never changed: a retried task (until/retries) runs this again
        # with the same args. The builtin checks them against _VALID_ARGS, which holds ours, and
        # reads only its own.
        try:
            interval = status_interval_seconds(self._task.args.get("status_interval", DEFAULT_STATUS_INTERVAL))
        except ValueError as exc:
            return {"failed": True, "changed": False, "rebooted": False, "elapsed": 0, "msg": to_text(exc)}
        self._status_interval = interval
        self._status_host = (task_vars or {}).get("inventory_hostname", "host")
        proving = "cmdline_wanted" in self._task.args or "cmdline_unwanted" in self._task.args
        wanted, unwanted = self._task.args.get("cmdline_wanted"), self._task.args.get("cmdline_unwanted")
        try:  # a bad list fails before any reboot
            wanted, unwanted = kernel_arg_list(wanted, "cmdline_wanted"), kernel_arg_list(unwanted, "cmdline_unwanted")
        except ValueError as exc:
            return {"failed": True, "changed": False, "rebooted": False, "elapsed": 0, "msg": to_text(exc)}
        self._boot_ids = []
        result = super(ActionModule, self).run(tmp, task_vars)
        if not proving or self._task.check_mode or result.get("failed") or not result.get("rebooted"):
            return result
        return self._proven(result, wanted, unwanted)

    def get_system_boot_time(self, distribution):
        """The builtin's read of the boot id (before the reboot, then at each attempt after it), kept."""
        boot_id = super(ActionModule, self).get_system_boot_time(distribution)
        self._boot_ids.append(boot_id)
        return boot_id

    def _proven(self, result, wanted, unwanted):
        """``result`` with the proof of the reboot: the boot ids, the new command line; failed where not proven."""
        read = self._low_level_execute_command(self.CMDLINE_COMMAND, sudoable=self.DEFAULT_SUDOABLE)
        if read.get("rc") != 0:
            return dict(result, failed=True, msg="%s: /proc/cmdline could not be read after the reboot (rc %s: %s); the reboot "
                                                 "is not proven" % (self._status_host, read.get("rc"), to_text(read.get("stderr")).strip()))
        before = self._boot_ids[0] if self._boot_ids else ""
        after = self._boot_ids[-1] if len(self._boot_ids) > 1 else ""
        proof = reboot_proof(before, after, to_text(read.get("stdout")), wanted, unwanted)
        result.update(boot_id_before=before, boot_id=after, cmdline=to_text(read.get("stdout")).strip(), problems=proof["problems"])
        if not proof["ok"]:
            return dict(result, failed=True, msg=proof["message"])
        return dict(result, msg="%s rebooted in %s s: %s" % (self._status_host, result.get("elapsed", "?"), proof["message"]))

    # The builtin waits twice (the new boot, then its test command), each an attempt retried until it
    # succeeds or reboot_timeout passes; a failed attempt may print a line, counted from the first wait.
    def do_until_success_or_timeout(self, action, reboot_timeout, action_desc, distribution, action_kwargs=None):
        if self._wait_status is None:
            self._wait_status = RebootWaitStatus(self._status_host, reboot_timeout, self._status_interval, self._clock)
        status = self._wait_status

        def attempt(distribution, **kwargs):
            try:
                return action(distribution=distribution, **kwargs)
            except Exception as exc:
                line = status.after_failed_attempt(action_desc or "attempt", to_text(exc))
                if line:
                    display.display(line)
                raise

        return super(ActionModule, self).do_until_success_or_timeout(
            action=attempt, reboot_timeout=reboot_timeout, action_desc=action_desc, distribution=distribution, action_kwargs=action_kwargs)
