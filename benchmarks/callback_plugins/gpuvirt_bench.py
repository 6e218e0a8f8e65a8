# -*- coding: utf-8 -*-
"""Benchmark-only callback: counts what a playbook run costs on the managed hosts.

Enabled only by benchmarks/bench_bringup.py (ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=gpuvirt_bench), never by ansible.cfg. Writes one JSON file to the path in
GPUVIRT_BENCH_CALLBACK_OUT at the end of the run.

Counting, per host and per task:
- a result is "run" when it is ok, changed or failed (skipped results are not run);
- a result is a "round trip" when it ran a module on the remote host: its action is not one of
  the controller-only actions (CONTROLLER_ACTIONS: set_fact, assert, debug, include_*, meta, ...)
  and it was not delegated to localhost. A loop counts one round trip per item that ran
  (skipped items excluded), and an until/retries task one per attempt;
- "changed" follows the play recap (ansible's own stats).
Per task (its file:line, name and action), the wall time from its start to the next task's start, summed over runs
of the same task (a role included twice, a loop of include_role).
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: gpuvirt_bench
type: aggregate
short_description: counts tasks, changes and module round trips for the bring-up benchmark
description:
  - Benchmark only; writes its counts as JSON to the path in the environment variable GPUVIRT_BENCH_CALLBACK_OUT.
requirements:
  - enabled with ANSIBLE_CALLBACKS_ENABLED=gpuvirt_bench
"""

# The collection's actions that run on the controller only: every ControllerAction
# (plugin_utils/controller_action.py: the guests' inventory, the MIG/MPS and RDMA decisions, the
# preflight report, the reboot share, stage_options), read from plugins/action/ so that a new one
# counts as it should.
ACTION_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "plugins", "action")


def _controller_only_actions():
    names = []
    for name in sorted(os.listdir(ACTION_DIR)) if os.path.isdir(ACTION_DIR) else ():
        if name.endswith(".py"):
            with open(os.path.join(ACTION_DIR, name)) as handle:
                if "(ControllerAction)" in handle.read():
                    names.append("gpuvirt.tenancy." + name[:-3])
    return names


# Actions that ansible runs on the controller without sending a module to the host (the
# collection's gate_check, stage_result and report_file too: they take the gate's result or a
# call's, or write the report on the controller; none runs a module, plugins/action/).
CONTROLLER_ACTIONS = frozenset([
    "add_host", "assert", "debug", "fail", "group_by", "import_playbook", "import_role", "import_tasks",
    "include", "include_role", "include_tasks", "include_vars", "meta", "pause", "set_fact", "set_stats",
    "validate_argument_spec", "gpuvirt.tenancy.gate_check", "gpuvirt.tenancy.report_file",
    "gpuvirt.tenancy.stage_result",
] + _controller_only_actions())
LOCAL_HOSTS = frozenset(("localhost", "127.0.0.1", "::1"))


def short_action(action):
    """ansible.builtin.set_fact -> set_fact; other collections keep their FQCN."""
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if action.startswith(prefix):
            return action[len(prefix):]
    return action


class CallbackModule(CallbackBase):
    """Counts run, changed, skipped and remote results per task; see the module docstring."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuvirt_bench"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.out_path = os.environ.get("GPUVIRT_BENCH_CALLBACK_OUT", "")
        self.started = time.time()
        self.tasks = {}
        self.current = None
        self.current_start = None
        self.plays = []
        self.totals = {"results_run": 0, "results_skipped": 0, "results_failed": 0, "results_changed": 0,
                       "round_trips": 0, "retries": 0, "controller_results": 0, "task_starts": 0}
        # how each preflight gate result was made (preflight_info's host_reads): from the last run's reads
        # made again, or by the gate's own call, and which reads answered otherwise
        self.gates = []

    # ---- bookkeeping
    def _close_current(self, now):
        if self.current is not None and self.current_start is not None:
            self.tasks[self.current]["wall_s"] += now - self.current_start
        self.current = None
        self.current_start = None

    def _entry(self, task):
        # Implicit tasks (fact gathering, flush_handlers) share their play's path: the name and
        # action keep them apart.
        path = task.get_path() or ""
        key = f"{path}|{task.get_name()}|{task.action}"
        if key not in self.tasks:
            role = getattr(task, "_role", None)
            self.tasks[key] = {
                "key": key, "path": path, "name": task.get_name(), "action": short_action(task.action or ""),
                "role": role.get_name() if role is not None else "",
                "starts": 0, "wall_s": 0.0, "run": 0, "skipped": 0, "changed": 0, "failed": 0,
                "round_trips": 0, "retries": 0,
            }
        return self.tasks[key]

    @staticmethod
    def _remote(result):
        action = short_action(result._task.action or "")  # pylint: disable=protected-access
        if action in CONTROLLER_ACTIONS:
            return False
        delegated = result._result.get("_ansible_delegated_vars") or {}  # pylint: disable=protected-access
        target = delegated.get("ansible_delegated_host") or getattr(result._task, "delegate_to", None) or ""  # pylint: disable=protected-access
        return str(target) not in LOCAL_HOSTS

    def _count(self, result, status, item=False):
        entry = self._entry(result._task)  # pylint: disable=protected-access
        res = result._result  # pylint: disable=protected-access
        if status == "skipped":
            if not item:
                entry["skipped"] += 1
                self.totals["results_skipped"] += 1
            return
        if not item and isinstance(res.get("host_reads"), dict) and res["host_reads"].get("answered_from"):
            self.gates.append(dict((key, res["host_reads"].get(key)) for key in ("answered_from", "reads", "changed", "not_answerable")))
        if not item:
            entry["run"] += 1
            self.totals["results_run"] += 1
            if res.get("changed"):
                entry["changed"] += 1
                self.totals["results_changed"] += 1
            if status == "failed":
                entry["failed"] += 1
                self.totals["results_failed"] += 1
        # A loop's final per-host result carries "results"; its items were counted one by one.
        if not item and isinstance(res.get("results"), list):
            return
        if self._remote(result):
            entry["round_trips"] += 1
            self.totals["round_trips"] += 1
        else:
            self.totals["controller_results"] += 1

    def _close_play(self, now):
        if self.plays and self.plays[-1]["wall_s"] is None:
            self.plays[-1]["wall_s"] = now - self.plays[-1].pop("_start")

    # ---- ansible events
    def v2_playbook_on_play_start(self, play):
        now = time.time()
        self._close_play(now)
        self.plays.append({"name": play.get_name(), "wall_s": None, "_start": now})

    def v2_playbook_on_task_start(self, task, is_conditional):
        now = time.time()
        self._close_current(now)
        entry = self._entry(task)
        entry["starts"] += 1
        self.totals["task_starts"] += 1
        self.current = entry["key"]
        self.current_start = now

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_runner_on_ok(self, result):
        self._count(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_runner_item_on_ok(self, result):
        self._count(result, "ok", item=True)

    def v2_runner_item_on_failed(self, result):
        self._count(result, "failed", item=True)

    def v2_runner_item_on_skipped(self, result):
        self._count(result, "skipped", item=True)

    def v2_runner_retry(self, result):
        # One failed attempt of an until/retries task: it ran the module once more.
        entry = self._entry(result._task)  # pylint: disable=protected-access
        entry["retries"] += 1
        self.totals["retries"] += 1
        if self._remote(result):
            entry["round_trips"] += 1
            self.totals["round_trips"] += 1

    def v2_playbook_on_stats(self, stats):
        now = time.time()
        self._close_current(now)
        self._close_play(now)
        hosts = {}
        for host in sorted(stats.processed):
            summary = stats.summarize(host)
            hosts[host] = {key: summary.get(key, 0) for key in ("ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored")}
        data = {
            "wall_s": now - self.started,
            "totals": self.totals,
            "recap": hosts,
            "recap_changed": sum(h["changed"] for h in hosts.values()),
            "recap_ok": sum(h["ok"] for h in hosts.values()),
            "plays": self.plays,
            "gates": self.gates,
            "tasks": sorted(self.tasks.values(), key=lambda t: -t["wall_s"]),
        }
        if self.out_path:
            with open(self.out_path, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
