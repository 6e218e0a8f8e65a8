# -*- coding: utf-8 -*-
"""A play run in a test, and what each of its tasks did, one record per task result:
``{task, action, status, result}`` (and ``host``, ``delegated`` from ansible-playbook).

- :func:`run_with_runner`: through ansible-runner, as AWX runs it; the records from its events;
- :func:`run_playbook`: ``ansible-playbook`` in a subprocess with the collection's ansible.cfg and
  the recording callback (``callbacks/record_tasks.py``);
- :func:`host_calls`: the tasks that made a module call on the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COLLECTIONS = os.path.join(REPO_ROOT, ".build", "collections")
ANSIBLE_CFG = os.path.join(REPO_ROOT, "ansible.cfg")
CALLBACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callbacks")
# What runs on the controller only (no round trip to the host).
CONTROLLER_ACTIONS = {"ansible.builtin.set_fact", "ansible.builtin.debug", "ansible.builtin.assert", "ansible.builtin.fail",
                      "ansible.builtin.validate_argument_spec", "ansible.builtin.meta", "ansible.builtin.set_stats",
                      "ansible.builtin.include_role", "ansible.builtin.include_tasks",
                      # the gate's result taken, a stage's call built and the report written on the controller: the
                      # host is asked nothing
                      "gpuvirt.tenancy.gate_check", "gpuvirt.tenancy.stage_options", "gpuvirt.tenancy.stage_result",
                      "gpuvirt.tenancy.guest_inventory", "gpuvirt.tenancy.mig_layout", "gpuvirt.tenancy.mps_plan",
                      "gpuvirt.tenancy.rdma_calls", "gpuvirt.tenancy.rdma_fleet", "gpuvirt.tenancy.rdma_netdev",
                      "gpuvirt.tenancy.rdma_verbs", "gpuvirt.tenancy.preflight_report", "gpuvirt.tenancy.reboot_share",
                      "gpuvirt.tenancy.report_file"}
RUNNER_OUTCOMES = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_skipped": "skipped"}


def run_with_runner(private_dir, playbook, inventory, extravars, cmdline=None):
    """``playbook`` through ansible-runner (``private_dir``: its data directory, made here);
    -> (rc, stdout, records)."""
    import ansible_runner  # pylint: disable=import-outside-toplevel
    os.makedirs(str(private_dir))
    done = ansible_runner.run(
        private_data_dir=str(private_dir), playbook=str(playbook), inventory=inventory, extravars=extravars, cmdline=cmdline,
        quiet=True, timeout=300, envvars={"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_CONFIG": ANSIBLE_CFG})
    records = [{"task": e["event_data"].get("task"), "action": e["event_data"].get("task_action"), "host": e["event_data"].get("host"),
                "status": RUNNER_OUTCOMES[e["event"]], "result": e["event_data"].get("res") or {}}
               for e in done.events if e.get("event") in RUNNER_OUTCOMES]
    return done.rc, done.stdout.read(), records


def run_playbook(argv, cwd, env=None, timeout=300):
    """``ansible-playbook`` (``argv`` after the program's name) in ``cwd``, with ``env`` added to
    this process's environment; -> (rc, stdout and stderr, records)."""
    records = os.path.join(str(cwd), "tasks.jsonl")
    if os.path.exists(records):
        os.unlink(records)
    full = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=ANSIBLE_CFG, ANSIBLE_NOCOLOR="1",
                ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_PLUGINS=CALLBACKS, ANSIBLE_CALLBACKS_ENABLED="record_tasks",
                GPUVIRT_TEST_TASKS=records)
    full.update(env or {})
    # the ansible-playbook of this interpreter's environment
    program = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    done = subprocess.run([program] + list(argv), cwd=str(cwd), env=full, capture_output=True, text=True, timeout=timeout, check=False)
    lines = []
    if os.path.exists(records):
        with open(records, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle]
    return done.returncode, done.stdout + done.stderr, lines


# actions that run a module on the host only where their result says so (read_here): libvirt_service
# takes the play's libvirt read where it answers the role's question, else reads on the host
READING_ACTIONS = {"gpuvirt.tenancy.libvirt_service"}


def host_calls(records, host=None):
    """The tasks that ran a module on the host: not skipped, not controller-only, not the test's
    own (named ``Test | ...``); with ``host``, that host's own (not delegated) only. -> [(task, action)]."""
    return [(r["task"], r["action"]) for r in records
            if r["status"] != "skipped" and r["action"] not in CONTROLLER_ACTIONS and not (r["task"] or "").startswith("Test |")
            and not (r["action"] in READING_ACTIONS and (r.get("result") or {}).get("read_here") is False)
            and (host is None or (r.get("host") == host and not r.get("delegated")))]


def sent_as_built(built, sent):
    """Whether a module call's ``sent`` options (its result's invocation.module_args, after the module's
    argument spec filled the defaults of options and sub-options left out) hold every one of ``built``
    with its value: dicts key by key, lists item by item."""
    if isinstance(built, dict):
        return isinstance(sent, dict) and all(key in sent and sent_as_built(value, sent[key]) for key, value in built.items())
    if isinstance(built, list):
        return isinstance(sent, list) and len(built) == len(sent) and all(map(sent_as_built, built, sent))
    return built == sent
