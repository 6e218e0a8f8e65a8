#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Bring-up and re-run benchmark on the lab host (docs/lab.md, docs/benchmarks.md).

1. Bring-up from bare: `lab.py stop` + `lab.py up --tcg-threads multi` (a fresh bare disk, as
   scripts/main.sh --fresh; TCG with a thread per vCPU, as in every earlier run of this benchmark),
   then the main command's playbook (molecule/default/converge.yml: playbooks/boot.yml, then
   playbooks/site.yml) with `ansible-playbook -i inventories/lab/`, as shipped
   (ansible.cfg). Wall time, reboots (boot_id before/after, kernel starts on the serial console),
   tasks run, changed, module round trips.
2. Idempotent re-runs of the same playbook, one per setting: wall time, tasks run, round trips,
   changed (must be 0), and, just before, the median wall time of `ansible -i inventories/lab/ lab
   -m ansible.builtin.ping` under the same setting, and the ratio re-run / ping; and how the
   preflight gate's result was made (preflight_info's result field host_reads: from the last run's
   reads, made again on the host, or by the gate's own call, with the reads that answered otherwise).

Counting is done by benchmarks/callback_plugins/gpuvirt_bench.py, enabled for these runs only.
Results: a JSON file and a Markdown table in $GPUVIRT_LAB_DIR/run/bench/ (git-ignored), the table
also on stdout. Standard library only; run it through scripts/bench.sh (venv and collection path).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PLAYBOOK = "molecule/default/converge.yml"
INVENTORY = "inventories/lab/"
PING = ["ansible", "-i", INVENTORY, "lab", "-m", "ansible.builtin.ping"]
LAB = [sys.executable, os.path.join(REPO, "lab", "lab.py")]

# name: (what it is, environment, playbook tree with every play gathering facts)
SETTINGS = {
    "baseline": ("as shipped: ansible.cfg (pipelining on, ControlMaster=auto, ControlPersist=120s), plays' own gather_facts", {}, False),
    "no_pipelining": ("ANSIBLE_PIPELINING=False", {"ANSIBLE_PIPELINING": "False"}, False),
    "no_controlpersist": ("ANSIBLE_SSH_ARGS='-o ControlMaster=no -o ControlPath=none -o ServerAliveInterval=15' (one SSH connection per command)",
                          {"ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ControlPath=none -o ServerAliveInterval=15"}, False),
    "no_gate_cache": ("GPUVIRT_TENANCY_GATE_CACHE=off (the preflight gate's own call on every run: no reads kept from the "
                      "last run to answer it)", {"GPUVIRT_TENANCY_GATE_CACHE": "off"}, False),
    "gather_facts": ("ANSIBLE_GATHERING=implicit and every play gather_facts: true (a copy of the playbooks with gather_facts: false turned to true)",
                     {"ANSIBLE_GATHERING": "implicit"}, True),
}
FACTS_TREE_FILES = ("molecule/default/converge.yml", "playbooks")


def setting(name):
    """A setting of SETTINGS, or several joined with '+' (gather_facts+no_pipelining): description, env, facts."""
    parts = [SETTINGS[part] for part in name.split("+")]
    env = {}
    for _desc, part_env, _facts in parts:
        env.update(part_env)
    return " + ".join(desc for desc, _env, _facts in parts), env, any(facts for _desc, _env, facts in parts)


def lab_dir():
    return os.environ.get("GPUVIRT_LAB_DIR") or os.path.join(REPO, ".lab")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def log(msg):
    print(f"bench [{now_utc():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def capture(argv, timeout=120):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def machine():
    cpu = ""
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    dirty = capture(["git", "status", "--porcelain", "--untracked-files=no"])
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "mem_total": next((line.split(":", 1)[1].strip() for line in read("/proc/meminfo").splitlines() if line.startswith("MemTotal")), ""),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "ansible": capture(["ansible", "--version"]).splitlines()[0:1],
        "git_commit": capture(["git", "rev-parse", "HEAD"]),
        "git_dirty": bool(dirty),
        "loadavg_start": read("/proc/loadavg"),
    }


def boot_id():
    return capture(LAB + ["ssh", "cat", "/proc/sys/kernel/random/boot_id"], timeout=300)


def console_counts():
    """What the serial console shows (lab/report.py): kernel starts that were reboots, and the
    lab's own resets after a stall panic, left out of them; a count is None when unknown."""
    counts = {}
    for key, flag in (("kernel_starts", "--kernel-starts"), ("lab_stall_resets", "--stall-resets")):
        out = capture([sys.executable, os.path.join(REPO, "lab", "report.py"), "--log", "/dev/null", flag])
        counts[key] = int(out) if out.isdigit() else None
    return counts


def facts_tree(out_dir, playbook=PLAYBOOK):
    """A copy of the main playbook and playbooks/ with every play's gather_facts: false made true;
    -> (the copy of ``playbook``, plays turned)."""
    root = os.path.join(out_dir, "gather_facts_tree")
    shutil.rmtree(root, ignore_errors=True)
    for rel in FACTS_TREE_FILES:
        src, dst = os.path.join(REPO, rel), os.path.join(root, rel)
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
    turned = 0
    for base, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith((".yml", ".yaml")):
                continue
            path = os.path.join(base, name)
            text = read(path) + "\n"
            new, count = re.subn(r"(?m)^(\s*)gather_facts:\s*false\s*$", r"\1gather_facts: true", text)
            if count:
                turned += count
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(new)
    return os.path.join(root, playbook), turned


def failing_task(log_path):
    """The last TASK header before the first fatal/failed line of a playbook log."""
    task = ""
    for line in read(log_path).splitlines():
        if line.startswith("TASK [") or line.startswith("RUNNING HANDLER ["):
            task = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif line.startswith("fatal:") or line.startswith("failed:"):
            return {"task": task, "line": line[:500]}
    return None


def run_playbook(label, playbook, env_extra, out_dir, timeout):
    stamp = f"{label}-{now_utc():%Y%m%d-%H%M%S}"
    log_path = os.path.join(out_dir, f"{stamp}.log")
    cb_path = os.path.join(out_dir, f"{stamp}.callback.json")
    env = dict(os.environ, **env_extra)
    env.update({
        "ANSIBLE_CALLBACK_PLUGINS": os.path.join(HERE, "callback_plugins"),
        "ANSIBLE_CALLBACKS_ENABLED": "gpuvirt_bench",
        "GPUVIRT_BENCH_CALLBACK_OUT": cb_path,
        "ANSIBLE_NOCOLOR": "1",
    })
    argv = ["ansible-playbook", "-i", INVENTORY, playbook]
    commit = capture(["git", "rev-parse", "HEAD"])
    dirty = bool(capture(["git", "status", "--porcelain", "--untracked-files=no", "--", "roles", "playbooks", "plugins", "inventories", "molecule"]))
    log(f"{label}: {' '.join(argv)} (log {log_path})")
    started = time.monotonic()
    timed_out = False
    with open(log_path, "w", encoding="utf-8") as handle:
        try:
            proc = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO, env=env, check=False, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
    wall = time.monotonic() - started
    counts = {}
    if os.path.exists(cb_path):
        with open(cb_path, encoding="utf-8") as handle:
            counts = json.load(handle)
    result = {
        "label": label, "command": " ".join(argv), "env": env_extra, "rc": rc, "timed_out": timed_out,
        "git_commit": commit, "git_dirty_roles_playbooks": dirty, "loadavg_before": read("/proc/loadavg"),
        "wall_s": round(wall, 1), "log": log_path, "callback": cb_path if counts else None,
        "tasks_run": counts.get("recap_ok"), "changed": counts.get("recap_changed"),
        "round_trips": counts.get("totals", {}).get("round_trips"),
        "totals": counts.get("totals"), "recap": counts.get("recap"),
        "tasks": counts.get("tasks", []), "plays": counts.get("plays"), "gates": counts.get("gates", []),
    }
    if rc != 0:
        result["failure"] = failing_task(log_path)
    log(f"{label}: rc {rc}, {wall:.1f} s, run {result['tasks_run']}, changed {result['changed']}, round trips {result['round_trips']}")
    return result


def ping(env_extra, count):
    env = dict(os.environ, **env_extra)
    samples = []
    for index in range(count + 1):
        started = time.monotonic()
        proc = subprocess.run(PING, capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=300)
        took = time.monotonic() - started
        if proc.returncode != 0:
            return {"error": (proc.stdout + proc.stderr)[-500:], "samples_s": samples}
        if index:  # the first one is a warm-up (it may open the SSH control master)
            samples.append(round(took, 2))
    return {"command": " ".join(PING), "warmup_excluded": True, "samples_s": samples, "median_s": round(statistics.median(samples), 2)}


def reboots(before_id, after_id, counts_before, counts_after):
    """Reboots during a run from the boot ids and console_counts() before and after it."""
    out = {"boot_id_before": before_id, "boot_id_after": after_id, "boot_id_changed": bool(before_id and after_id and before_id != after_id)}
    for key, before in counts_before.items():
        if before is not None and counts_after.get(key) is not None:
            out[key] = counts_after[key] - before
    out["count"] = out.get("kernel_starts", int(out["boot_id_changed"]))
    return out


def top_tasks(run, key, limit=15):
    tasks = [t for t in run.get("tasks", []) if t.get("run") or t.get("round_trips")]
    return sorted(tasks, key=lambda t: (-t[key], -t["wall_s"] if key != "wall_s" else -t["round_trips"]))[:limit]


def fmt(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(result):
    mach = result["machine"]
    lines = [
        f"Machine: {mach['nproc']} CPUs ({mach['cpu_model']}), {mach['mem_total']}, lab under {result['accel'] or '?'}; "
        f"{', '.join(mach['ansible'])}; commit {mach['git_commit'][:12]}{' (with local changes)' if mach['git_dirty'] else ''}; "
        f"load at start {mach['loadavg_start'].split(' ')[0:3]}.",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Bring-up: `{result['playbook']}`; re-runs: `{result.get('rerun_playbook', result['playbook'])}`.",
        "",
        "| run | settings | wall (s) | reboots | tasks run | changed | round trips | gate answered by | ping median (s) | wall / ping |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    changed_reads = []
    for run in result["runs"]:
        if run.get("skipped"):
            lines.append(f"| {run['label']} | {run['setting']} | not run: {run['skipped']} | | | | | | | |")
            continue
        pmed = (run.get("ping") or {}).get("median_s")
        ratio = f"{run['wall_s'] / pmed:.1f}x" if pmed and run.get("kind") == "rerun" and run["rc"] == 0 else "-"
        status = "" if run["rc"] == 0 else (" (timed out)" if run.get("timed_out") else f" (failed, rc {run['rc']})")
        reboot_count = fmt((run.get("reboots") or {}).get("count"))
        lab_resets = (run.get("reboots") or {}).get("lab_stall_resets")
        if lab_resets:
            reboot_count += f" (+{lab_resets} lab stall reset)"
        gates = run.get("gates") or []
        answered = ", ".join("%s (%s reads)" % (g["answered_from"], g["reads"]) for g in gates) or "-"
        for gate in gates:
            if gate.get("changed") or gate.get("not_answerable"):
                changed_reads.append(f"- {run['label']} ({fmt(run['wall_s'])} s): answered otherwise: "
                                     f"{'; '.join(gate.get('changed') or []) or '-'}; not kept: {'; '.join(gate.get('not_answerable') or []) or '-'}")
        lines.append(f"| {run['label']}{status} | {run['setting']} | {fmt(run['wall_s'])} | {reboot_count} | "
                     f"{fmt(run['tasks_run'])} | {fmt(run['changed'])} | {fmt(run['round_trips'])} | {answered} | {fmt(pmed, 2)} | {ratio} |")
    if changed_reads:
        lines += ["", "Gate runs whose kept reads answered otherwise, or whose own reads were not kept:", ""] + changed_reads
    commits = sorted({r["git_commit"][:12] + ("+" if r.get("git_dirty_roles_playbooks") else "") for r in result["runs"] if r.get("git_commit")})
    if len(commits) > 1:
        lines += ["", f"The tree changed during the benchmark (commits, + with local changes to roles/playbooks): {', '.join(commits)}."]
    reruns = [r for r in result["runs"] if r.get("kind") == "rerun" and r.get("rc") == 0 and r.get("tasks")]
    base = next((r for r in reruns if r["setting"] == "baseline"), reruns[0] if reruns else None)
    if base:
        what = f"Re-run ({base['setting']})"
        for key, title in (("wall_s", "time"), ("round_trips", "round trips")):
            lines += ["", f"{what}, top 15 tasks by {title}:", "",
                      "| task | role | action | wall (s) | round trips | results run | results skipped | runs of the task |",
                      "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
            for task in top_tasks(base, key):
                name = task["name"].split(" : ", 1)[1] if task["role"] and " : " in task["name"] else task["name"]
                name = name.replace("|", "\\|")
                role = task["role"].rsplit(".", 1)[-1] or "-"
                lines.append(f"| {name} | {role} | {task['action']} | {task['wall_s']:.1f} | {task['round_trips']} | "
                             f"{task['run']} | {task['skipped']} | {task['starts']} |")
        if base.get("plays"):
            lines += ["", f"{what}, per play:", "", "| play | wall (s) |", "| --- | ---: |"]
            lines += [f"| {play['name'].replace('|', '/')} | {fmt(play['wall_s'])} |" for play in base["plays"]]
        roles = {}
        for task in base["tasks"]:
            entry = roles.setdefault(task["role"] or "(play)", [0.0, 0])
            entry[0] += task["wall_s"]
            entry[1] += task["round_trips"]
        lines += ["", f"{what}, per role:", "", "| role | wall (s) | round trips |", "| --- | ---: | ---: |"]
        for name, (wall, trips) in sorted(roles.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"| {name} | {wall:.1f} | {trips} |")
    return "\n".join(lines) + "\n"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="scripts/bench.sh bringup",
        description="Bring-up from a bare lab host, then idempotent re-runs under a settings matrix; "
                    "JSON + Markdown into $GPUVIRT_LAB_DIR/run/bench/. Settings: "
                    + "; ".join(f"{name}: {desc}" for name, (desc, _env, _facts) in SETTINGS.items()))
    parser.add_argument("--settings", default=",".join(SETTINGS),
                        help="comma-separated re-run settings, in order; join settings with + to combine them (default: all; '' for none)")
    parser.add_argument("--bringup-settings", default="baseline",
                        help="comma-separated settings of the bring-up(s), each from a bare lab (stop + up); default baseline")
    parser.add_argument("--no-bringup", action="store_true", help="skip stop/up and the bring-up: re-runs only, on the running converged lab")
    parser.add_argument("--pings", type=int, default=5, help="pings per setting after one warm-up (median reported; default 5)")
    parser.add_argument("--deadline", help="UTC HH:MM: start no re-run that would not end by then, kill one that runs past it")
    parser.add_argument("--rerun-estimate", type=float, default=300.0, help="seconds a re-run is assumed to take before one was measured (default 300)")
    parser.add_argument("--rerun-playbook", default=PLAYBOOK,
                        help="playbook of the re-runs (default the bring-up's, %s; playbooks/site.yml for what an operator re-runs)" % PLAYBOOK)
    parser.add_argument("--stop", action="store_true", help="stop the lab at the end")
    parser.add_argument("--out", default=None, help="result directory (default $GPUVIRT_LAB_DIR/run/bench)")
    args = parser.parse_args(argv)
    args.settings = [s for s in args.settings.split(",") if s]
    args.bringup_settings = [s for s in args.bringup_settings.split(",") if s]
    unknown = [part for name in args.settings + args.bringup_settings for part in name.split("+") if part not in SETTINGS]
    if unknown:
        parser.error(f"--settings: unknown {', '.join(unknown)}; choose from {', '.join(SETTINGS)}")
    return args


def deadline_ts(text):
    if not text:
        return None
    hour, minute = (int(x) for x in text.split(":"))
    today = now_utc().replace(hour=hour, minute=minute, second=0, microsecond=0)
    return today.timestamp()


def main(argv=None):  # pylint: disable=too-many-locals,too-many-statements
    args = parse_args(argv)
    os.chdir(REPO)
    out_dir = args.out or os.path.join(lab_dir(), "run", "bench")
    os.makedirs(out_dir, exist_ok=True)
    deadline = deadline_ts(args.deadline)
    result = {
        "benchmark": "bringup", "started_utc": now_utc().isoformat(timespec="seconds"),
        "command": "scripts/bench.sh bringup" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip(),
        "playbook": PLAYBOOK, "rerun_playbook": args.rerun_playbook, "inventory": INVENTORY, "ping_command": " ".join(PING),
        "settings": {name: setting(name)[0] for name in args.settings + args.bringup_settings},
        "machine": machine(), "accel": None, "runs": [],
    }
    stamp = f"{now_utc():%Y%m%d-%H%M%S}"
    json_path = os.path.join(out_dir, f"bringup-{stamp}.json")
    md_path = os.path.join(out_dir, f"bringup-{stamp}.md")

    def save():
        result["machine"]["loadavg_end"] = read("/proc/loadavg")
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1, sort_keys=True)
        with open(md_path, "w", encoding="utf-8") as handle:
            handle.write(markdown(result))

    converged = True
    try:
        for name in [] if args.no_bringup else args.bringup_settings:
            _desc, env_extra, facts = setting(name)
            label = f"bringup-{name}"
            if deadline and time.time() + 900 > deadline:
                result["runs"].append({"label": label, "setting": name, "skipped": f"deadline {args.deadline} UTC"})
                log(f"{label}: skipped, it would not end before {args.deadline} UTC")
                continue
            log("stopping the lab and starting it from a bare disk")
            subprocess.run(LAB + ["stop"], cwd=REPO, check=True)
            started = time.monotonic()
            # TCG with a thread per vCPU, as every earlier run of this benchmark: the lab's two stand-in
            # guests' calls then run side by side, as two guests' would (docs/benchmarks.md)
            subprocess.run(LAB + ["up", "--tcg-threads", "multi"], cwd=REPO, check=True)
            result.setdefault("lab_up_s", []).append(round(time.monotonic() - started, 1))
            result["accel"] = read(os.path.join(lab_dir(), "run", "accel")) or None
            playbook, turned = facts_tree(out_dir) if facts else (PLAYBOOK, None)
            before, counts_before = boot_id(), console_counts()
            timeout = max(60.0, deadline - time.time()) if deadline else None
            run = run_playbook(label, playbook, env_extra, out_dir, timeout)
            run.update({"kind": "bringup", "setting": name, "reboots": reboots(before, boot_id(), counts_before, console_counts())})
            if turned is not None:
                run["plays_turned_to_gather_facts"] = turned
            result["runs"].append(run)
            save()
            converged = run["rc"] == 0
        result["accel"] = result["accel"] or read(os.path.join(lab_dir(), "run", "accel")) or None
        estimate = args.rerun_estimate
        for name in args.settings:
            _desc, env_extra, facts = setting(name)
            label = f"rerun-{name}"
            if not converged:
                result["runs"].append({"label": label, "setting": name, "skipped": "the bring-up failed"})
                continue
            if deadline and time.time() + estimate > deadline:
                result["runs"].append({"label": label, "setting": name, "skipped": f"deadline {args.deadline} UTC"})
                log(f"{label}: skipped, it would not end before {args.deadline} UTC")
                continue
            playbook = args.rerun_playbook
            turned = None
            if facts:
                playbook, turned = facts_tree(out_dir, args.rerun_playbook)
            pings = ping(env_extra, args.pings)
            log(f"{label}: ping {pings}")
            before, counts_before = boot_id(), console_counts()
            timeout = max(60.0, deadline - time.time()) if deadline else None
            run = run_playbook(label, playbook, env_extra, out_dir, timeout)
            run.update({"kind": "rerun", "setting": name, "ping": pings, "reboots": reboots(before, boot_id(), counts_before, console_counts())})
            if turned is not None:
                run["plays_turned_to_gather_facts"] = turned
            if run["changed"]:
                log(f"{label}: NOT IDEMPOTENT: {run['changed']} changed task(s): "
                    + ", ".join(t["name"] for t in run["tasks"] if t["changed"]))
            result["runs"].append(run)
            save()
            estimate = max(estimate, run["wall_s"] * 1.15)
    finally:
        if args.stop:
            subprocess.run(LAB + ["stop"], cwd=REPO, check=False)
        save()
    print(markdown(result))
    log(f"results: {json_path} and {md_path}")
    runs = [r for r in result["runs"] if not r.get("skipped")]
    return 0 if runs and all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
