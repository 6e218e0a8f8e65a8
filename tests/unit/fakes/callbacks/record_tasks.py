# -*- coding: utf-8 -*-
"""Test callback (fakes.playbook_run): every task result, one JSON object a line, into the file
named by $GPUVIRT_TEST_TASKS: the task's own name, its action, the host, whether it was delegated,
its status and its result."""

from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record_tasks"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, result, status):
        # the task's own name: ansible-core 2.21's task_name adds the role ("gpuvirt.tenancy.gpu_mps : ...")
        task = result._task  # pylint: disable=protected-access
        record = {"task": task.name, "action": task.action, "host": result._host.get_name(),  # pylint: disable=protected-access
                  "delegated": bool(task.delegate_to), "status": status, "result": result._result}  # pylint: disable=protected-access
        with open(os.environ["GPUVIRT_TEST_TASKS"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")
