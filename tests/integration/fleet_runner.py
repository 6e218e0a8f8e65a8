#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a playbook of the collection the way AWX does (ansible-runner, extra vars from a survey)
and judge its event stream.

AWX launches a job template through ansible-runner with the survey's answers as extra vars and
records the job's events; this does the same from a checkout and prints a JSON summary: the
failed and unreachable events (host, task, message), the changed results per host, the hosts
that ran at least one task, and the final stats. The exit status says whether the expectations
given on the command line hold.

  python tests/integration/fleet_runner.py --playbook playbooks/site.yml \\
      --inventory inventories/lab/ --survey awx/surveys/workflow.json --answer gpuvirt_serial=1 \\
      --expect-changed 0 --json /tmp/site.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "unit", "awx"))

from survey_spec import answers, validate_spec  # noqa: E402  pylint: disable=import-error,wrong-import-position

TASK_EVENTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped")


def survey_extravars(survey_path, overrides=None):
    """The extra vars of a launch of the survey at ``survey_path`` (defaults plus ``overrides``).
    Answers given as text (the command line) take the question's type, as AWX's form does."""
    with open(survey_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    validate_spec(spec)
    types = dict((q["variable"], q["type"]) for q in spec["spec"])
    typed = {}
    for key, value in (overrides or {}).items():
        if isinstance(value, str) and types.get(key) == "integer":
            value = int(value)
        elif isinstance(value, str) and types.get(key) == "float":
            value = float(value)
        typed[key] = value
    return answers(spec, typed)


def summarize(events, rc, status):
    """The parts of an ansible-runner event stream that decide a fleet job."""
    summary = {"rc": rc, "status": status, "failed": [], "unreachable": [], "changed": [], "hosts_with_tasks": [],
               "stats": {}, "plays": [], "messages": [], "facts": {}}
    hosts = []
    for event in events:
        kind = event.get("event")
        data = event.get("event_data") or {}
        host = data.get("host")
        if kind == "playbook_on_play_start":
            summary["plays"].append(data.get("play"))
        if kind in TASK_EVENTS and host and kind != "runner_on_skipped" and host not in hosts:
            hosts.append(host)
        res = data.get("res") or {}
        entry = {"host": host, "task": data.get("task"), "msg": res.get("msg")}
        if kind == "runner_on_failed" and not data.get("ignore_errors"):
            summary["failed"].append(entry)
        elif kind == "runner_on_unreachable":
            summary["unreachable"].append(entry)
        elif kind == "runner_on_ok" and res.get("changed"):
            summary["changed"].append(entry)
        if kind in ("runner_on_ok", "runner_item_on_ok") and data.get("task_action") in ("debug", "ansible.builtin.debug") \
                and res.get("msg"):
            summary["messages"].append(entry)
        if kind == "runner_on_ok" and data.get("task_action") in ("set_fact", "ansible.builtin.set_fact"):
            summary["facts"].setdefault(host, {}).update(res.get("ansible_facts") or {})
        if kind == "playbook_on_stats":
            summary["stats"] = dict((key, data.get(key) or {}) for key in ("ok", "changed", "failures", "dark", "skipped",
                                                                           "rescued", "ignored", "processed"))
    summary["hosts_with_tasks"] = hosts
    return summary


def run(playbook, inventory, extravars=None, check=False, tags=None, skip_tags=None, private_data_dir=None,
        timeout=3600, quiet=True):
    """Run ``playbook`` (relative to the repository) with ansible-runner; return the summary."""
    import ansible_runner  # pylint: disable=import-outside-toplevel

    cmdline = []
    if check:
        cmdline.append("--check")
    if tags:
        cmdline += ["--tags", tags]
    if skip_tags:
        cmdline += ["--skip-tags", skip_tags]
    pdd = private_data_dir or tempfile.mkdtemp(prefix="gpuvirt-runner-")
    os.makedirs(pdd, exist_ok=True)
    env = {"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, ".build", "collections"),
           "ANSIBLE_FORCE_COLOR": "0"}
    result = ansible_runner.run(
        private_data_dir=pdd, project_dir=REPO, playbook=playbook,
        inventory=[os.path.abspath(i) for i in ([inventory] if isinstance(inventory, str) else inventory)],
        extravars=dict(extravars or {}), cmdline=" ".join(cmdline) or None, envvars=env, quiet=quiet, timeout=timeout)
    summary = summarize(list(result.events), result.rc, result.status)
    summary.update(playbook=playbook, extravars=dict(extravars or {}), check=check, tags=tags,
                   artifacts=os.path.join(pdd, "artifacts"))
    return summary


def judge(summary, expect_changed=None, expect_failed_hosts=None, expect_untouched=(), expect_messages=()):
    """Problems with a run: failed or unreachable events other than the expected failed hosts,
    an expected failure whose message lacks the expected text, a changed count other than the
    expected, hosts that ran tasks although they must not."""
    problems = []
    for text in expect_messages:
        if not any(text in str(e["msg"]) for e in summary["failed"]):
            problems.append("no failure message says %r: %s" % (text, [e["msg"] for e in summary["failed"]]))
    allowed = set(expect_failed_hosts or ())
    for entry in summary["failed"] + summary["unreachable"]:
        if entry["host"] not in allowed:
            problems.append("unexpected failure on %s in %r: %s" % (entry["host"], entry["task"], entry["msg"]))
    failed_hosts = set(e["host"] for e in summary["failed"])
    missing = allowed - failed_hosts
    if missing:
        problems.append("expected a failure on %s, none happened" % ", ".join(sorted(missing)))
    if expect_changed is not None and len(summary["changed"]) != expect_changed:
        problems.append("expected %d changed results, got %d: %s" % (
            expect_changed, len(summary["changed"]), ["%s: %s" % (e["host"], e["task"]) for e in summary["changed"]]))
    for host in expect_untouched:
        if host in summary["hosts_with_tasks"] or host in (summary["stats"].get("processed") or {}):
            problems.append("%s ran tasks although the rollout should have stopped before it" % host)
    if not allowed and summary["rc"] != 0:
        problems.append("ansible-playbook exited %s (%s)" % (summary["rc"], summary["status"]))
    if allowed and summary["rc"] == 0:
        problems.append("ansible-playbook exited 0 although a host was expected to fail")
    return problems


def gate_hosts(directory, capture=None):
    """An inventory of two hosts to put after the real ones in gpuvirt_hosts, for the rollout
    gate: ``fake-noiommu`` reads, through a local connection, the bare lab capture without its
    ACPI DMAR table and its CPU's hypervisor flag (what a host with VT-d off in the BIOS shows) and
    fails preflight;
    ``never-reached`` is an address of TEST-NET-1 (RFC 5737): any task on it would be
    unreachable. Returns the inventory file's path."""
    import shutil  # pylint: disable=import-outside-toplevel

    root = os.path.join(directory, "noiommu")
    if os.path.exists(root):
        shutil.rmtree(root)
    if capture:
        shutil.copytree(capture, root, symlinks=True)
    else:  # the bare lab capture, kept as a tar (tests/fixtures/lab/bare.tar.source.txt)
        import tarfile  # pylint: disable=import-outside-toplevel
        with tarfile.open(os.path.join(REPO, "tests", "fixtures", "lab", "bare.tar")) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(root, filter="data")
            else:
                tar.extractall(root)  # nosec: the repository's own capture
    os.unlink(os.path.join(root, "sys", "firmware", "acpi", "tables", "DMAR"))
    # bare metal: the lab VM's hypervisor CPU flag out (a VM is told of a virtual IOMMU instead)
    cpuinfo = os.path.join(root, "proc", "cpuinfo")
    with open(cpuinfo, encoding="utf-8") as handle:
        text = handle.read()
    with open(cpuinfo, "w", encoding="utf-8") as handle:
        handle.write(text.replace(" hypervisor", ""))
    # Connection variables as host variables: they win over any group's (the lab inventory's
    # group of gpuvirt_hosts carries the lab VM's port lookup and key).
    inventory = {"gpuvirt_hosts": {"hosts": {
        "fake-noiommu": {"ansible_connection": "local", "ansible_host": "localhost", "ansible_port": 22,
                         "ansible_python_interpreter": sys.executable, "gpuvirt_topology_root": root},
        "never-reached": {"ansible_host": "192.0.2.1", "ansible_port": 22, "ansible_connection": "ssh", "ansible_user": "nobody",
                          "ansible_ssh_private_key_file": os.path.join(directory, "no-such-key"),
                          "ansible_ssh_common_args": "-o ConnectTimeout=2 -o BatchMode=yes"},
    }}}
    path = os.path.join(directory, "gate-hosts.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(inventory, handle, indent=1)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--playbook", required=True, help="relative to the repository, e.g. playbooks/site.yml")
    parser.add_argument("--inventory", action="append", required=True, help="inventory source (repeatable)")
    parser.add_argument("--survey", help="AWX survey spec (JSON) whose defaults give the extra vars")
    parser.add_argument("--answer", action="append", default=[], help="survey answer VAR=VALUE (JSON values are parsed)")
    parser.add_argument("--extra", action="append", default=[], help="extra var outside the survey VAR=VALUE")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--tags")
    parser.add_argument("--skip-tags")
    parser.add_argument("--expect-changed", type=int)
    parser.add_argument("--expect-failed-host", action="append", default=[])
    parser.add_argument("--expect-untouched", action="append", default=[])
    parser.add_argument("--expect-message", action="append", default=[], help="text a failure message must hold")
    parser.add_argument("--private-data-dir")
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--add-gate-hosts", metavar="DIR",
                        help="add fake-noiommu (fails preflight) and never-reached after the inventory's hosts, built in DIR")
    args = parser.parse_args(argv)

    def pairs(items):
        result = {}
        for item in items:
            key, _sep, value = item.partition("=")
            try:
                result[key] = json.loads(value)
            except ValueError:
                result[key] = value
        return result

    if args.add_gate_hosts:
        os.makedirs(args.add_gate_hosts, exist_ok=True)
        args.inventory.append(gate_hosts(args.add_gate_hosts))
    extravars = survey_extravars(args.survey, dict(a.partition("=")[::2] for a in args.answer)) if args.survey else {}
    extravars.update(pairs(args.extra))
    summary = run(args.playbook, args.inventory, extravars, check=args.check, tags=args.tags, skip_tags=args.skip_tags,
                  private_data_dir=args.private_data_dir)
    summary["problems"] = judge(summary, args.expect_changed, args.expect_failed_host, args.expect_untouched, args.expect_message)
    text = json.dumps(summary, indent=2, default=str)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    print(json.dumps({"playbook": summary["playbook"], "rc": summary["rc"], "changed": len(summary["changed"]),
                      "failed": summary["failed"], "unreachable": summary["unreachable"],
                      "hosts_with_tasks": summary["hosts_with_tasks"], "problems": summary["problems"]}, indent=2, default=str))
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
