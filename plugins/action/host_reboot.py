# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible.builtin.reboot with a status line while it waits for the host (the builtin reports its
attempts only at -vvv). Everything else is the builtin's: the reboot, its checks, its result."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action.reboot import ActionModule as RebootActionModule
from ansible.utils.display import Display

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_status import (
    DEFAULT_STATUS_INTERVAL, RebootWaitStatus, status_interval_seconds)

display = Display()


class ActionModule(RebootActionModule):

    _VALID_ARGS = RebootActionModule._VALID_ARGS | frozenset(("status_interval",))

    def __init__(self, *args, **kwargs):
        super(ActionModule, self).__init__(*args, **kwargs)
        self._wait_status = None
        self._status_interval = DEFAULT_STATUS_INTERVAL
        self._status_host = None
        self._clock = time.monotonic

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
        return super(ActionModule, self).run(tmp, task_vars)

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
