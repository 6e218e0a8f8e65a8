#!/usr/bin/env python
"""The preview's cost on the controller: `playbooks/site.yml --check --diff` of the example
inventory against the DGX A100-class capture (tests/tools/dgx_tree.py), counted by the
benchmark callback (benchmarks/callback_plugins/gpuvirt_bench.py: module calls on the previewed
hosts, i.e. "round trips"), its CPU time (user + system of ansible-playbook and all its
children) against the CPU time of a local `ansible -m ping` in the same run, for 1 host and for
N hosts (N aliases of the same capture in a generated inventory). With --hgx, the same in the
same runs on the HGX H100 capture (tests/tools/hgx_tree.py, SNC off, its desired state from
hgx_tree.preview_vars as extra vars), side by side with the DGX capture, and the load average
of the machine before and after.

usage: scripts/bench.sh preview [--hosts N] [--runs R] [--hgx] [--write FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from markdown_section import write_section  # noqa: E402  pylint: disable=import-error,wrong-import-position

EXAMPLE = os.path.join(REPO, "inventories", "example")


def cpu_of(argv, env):
    """(CPU seconds of the command and its children, its exit status, its stdout+stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, proc.returncode, proc.stdout


def inventory_with(hosts, workdir):
    """A copy of the example inventory whose gpuvirt_preview (and dgx_a100) group holds ``hosts`` aliases."""
    target = os.path.join(workdir, "inventory-%d" % hosts)
    shutil.copytree(EXAMPLE, target)
    names = ["dgx%02d-preview" % (i + 1) for i in range(hosts)]
    lines = ["---", "all:", "  children:", "    gpuvirt_hosts:", "      hosts:", "        dgx01:",
             "          ansible_host: 192.0.2.11", "    gpuvirt_guests:", "      hosts: {}", "    gpuvirt_preview:",
             "      hosts:"] + ["        %s:" % n for n in names] + ["    dgx_a100:", "      hosts:", "        dgx01:"] + \
            ["        %s:" % n for n in names]
    with open(os.path.join(target, "hosts.yml"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return target


def preview(inventory, capture, env, workdir, extra=()):
    out = os.path.join(workdir, "callback.json")
    run_env = dict(env, ANSIBLE_CALLBACK_PLUGINS=os.path.join(REPO, "benchmarks", "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="gpuvirt_bench", GPUVIRT_BENCH_CALLBACK_OUT=out)
    cpu, rc, output = cpu_of(["ansible-playbook", "-i", inventory, "playbooks/site.yml", "--check", "--diff",
                              "-e", "gpuvirt_host_root=%s" % capture, "-e", "gpuvirt_serial=100%"] + list(extra), run_env)
    if rc != 0:
        sys.stderr.write(output[-4000:])
        raise SystemExit("bench preview: the preview failed (rc=%s)" % rc)
    with open(out, encoding="utf-8") as handle:
        counts = json.load(handle)
    calls = {}
    for task in counts["tasks"]:
        if task.get("round_trips"):
            calls["%s (%s)" % (task.get("name"), task.get("action"))] = task["round_trips"]
    return cpu, counts["totals"]["round_trips"], calls


def ping(env):
    # the previewed hosts' interpreter too (group_vars/gpuvirt_preview: ansible_playbook_python)
    cpu, rc, output = cpu_of(["ansible", "-i", "localhost,", "localhost", "-c", "local", "-m", "ansible.builtin.ping",
                              "-e", "ansible_python_interpreter=%s" % sys.executable], env)
    if rc != 0:
        raise SystemExit("bench preview: the ping failed: %s" % output[-2000:])
    return cpu


def load():
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return " ".join(handle.read().split()[:3])


def side_by_side(args, env, workdir):
    """The DGX and the HGX H100 captures' previews in the same runs, each against the run's ping."""
    dgx, hgx = os.path.join(workdir, "dgx01"), os.path.join(workdir, "hgx01")
    subprocess.run([sys.executable, os.path.join(REPO, "tests", "tools", "dgx_tree.py"), dgx], check=True, env=env)
    hgx_vars = os.path.join(workdir, "hgx01.json")
    subprocess.run([sys.executable, os.path.join(REPO, "tests", "tools", "hgx_tree.py"), "--vars", hgx_vars, hgx],
                   check=True, env=env)
    one, fleet = inventory_with(1, workdir), inventory_with(args.hosts, workdir)
    captures = (("DGX A100-class", dgx, ()), ("HGX H100, SNC off", hgx, ("-e", "@" + hgx_vars)))
    loads = [load()]
    pings, singles, fleets, trips = [], dict((c[0], []) for c in captures), dict((c[0], []) for c in captures), {}
    for _run in range(args.runs):
        pings.append(ping(env))
        for name, capture, extra in captures:
            cpu, calls, _calls = preview(one, capture, env, workdir, extra)
            singles[name].append(cpu)
            cpu, fleet_calls, _calls = preview(fleet, capture, env, workdir, extra)
            fleets[name].append(cpu)
            trips[name] = (calls, fleet_calls)
    loads.append(load())
    p = statistics.median(pings)
    rows = [
        "Command: `bash scripts/bench.sh preview --hgx --hosts %d --runs %d` (medians of %d runs, each run a ping then "
        "each capture's 1-host and %d-host previews; CPU = user + system of the command and its children). Load "
        "average (1, 5, 15 min) before: %s; after: %s." % (args.hosts, args.runs, args.runs, args.hosts, loads[0], loads[1]),
        "",
        "| capture | module calls (1 host / %d hosts) | 1-host preview | %d-host preview | per added host |" % (args.hosts, args.hosts),
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, _capture, _extra in captures:
        s, f = statistics.median(singles[name]), statistics.median(fleets[name])
        per_added = (f - s) / max(args.hosts - 1, 1)
        rows.append("| %s | %d / %d | %.2f s (%.1fx a ping) | %.2f s | %.2f s (%.1fx a ping) |" % (
            name, trips[name][0], trips[name][1], s, s / p, f, per_added, per_added / p))
    rows += ["", "CPU of a local `ansible -m ping`: %.2f s (median of %s)." % (p, ", ".join("%.2f" % x for x in pings))]
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=10, help="hosts of the fleet preview (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement (median; default 3)")
    parser.add_argument("--hgx", action="store_true", help="the HGX H100 capture too, side by side with the DGX one")
    parser.add_argument("--write", help="write the section into this Markdown file (docs/benchmarks.md)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    workdir = tempfile.mkdtemp(prefix="gpuvirt-bench-preview-")
    if args.hgx:
        text = side_by_side(args, env, workdir)
        print(text)
        if args.write:
            write_section(args.write, "## Preview of an HGX H100 capture beside the DGX A100-class capture\n\n" + text + "\n")
        shutil.rmtree(workdir, ignore_errors=True)
        return 0
    capture = os.path.join(workdir, "dgx01")
    subprocess.run([sys.executable, os.path.join(REPO, "tests", "tools", "dgx_tree.py"), capture], check=True, env=env)
    one, fleet = inventory_with(1, workdir), inventory_with(args.hosts, workdir)
    pings, singles, fleets = [], [], []
    calls = trips = fleet_trips = None
    for _run in range(args.runs):
        pings.append(ping(env))
        cpu, trips, calls = preview(one, capture, env, workdir)
        singles.append(cpu)
        cpu, fleet_trips, _calls = preview(fleet, capture, env, workdir)
        fleets.append(cpu)
    p, s, f = statistics.median(pings), statistics.median(singles), statistics.median(fleets)
    per_added = (f - s) / max(args.hosts - 1, 1)
    rows = [
        "Command: `bash scripts/bench.sh preview --hosts %d --runs %d` (medians of %d runs; CPU = user + system of "
        "the command and its children)." % (args.hosts, args.runs, args.runs),
        "",
        "| measure | value |",
        "| --- | --- |",
        "| host-side module calls, 1-host preview | %d |" % trips,
        "| host-side module calls, %d-host preview | %d (%.1f per host) |" % (args.hosts, fleet_trips, fleet_trips / args.hosts),
        "| CPU of a local `ansible -m ping` | %.2f s |" % p,
        "| CPU of the 1-host preview | %.2f s (%.1fx a ping) |" % (s, s / p),
        "| CPU of the %d-host preview | %.2f s |" % (args.hosts, f),
        "| CPU per added host | %.2f s (%.1fx a ping) |" % (per_added, per_added / p),
        "",
        "Module calls of the 1-host preview: " + "; ".join("%s: %d" % kv for kv in sorted(calls.items())) + ".",
    ]
    text = "\n".join(rows)
    print(text)
    if args.write:
        write_section(args.write, "## Preview of the DGX A100-class capture\n\n" + text + "\n")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
