#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""What one module call pays for its imports, on the running lab host (docs/benchmarks.md).

Under AnsiballZ a module's Python code travels as a zip that the host's python3 imports from
(zipimport keeps no bytecode cache), so every call compiles again all the source it imports.
`ansible -m ping` pays that for `ansible.module_utils.basic`; a collection module pays it for
basic and for its own module_utils. This benchmark times, on the lab host, `python3 -c` with the
same kind of zip on `sys.path` (ansible's `module_utils` tree and the collection's `plugins/`):

- `import ansible.module_utils.basic` (what a ping imports), timed inside a fresh `python3`;
- then, in the same process, each module of `plugins/modules/` (imported, its `main()` not run);
- and the whole process, from its start to its exit;

each the fastest and the median of `--runs` runs in one SSH session (the cases take turns in each
round), with the collection source each module imports (the `module_utils` it reaches through
imports at module level, in KB). It needs the lab
running (`python3 lab/lab.py up`); it changes nothing there (the zip goes to a temporary
directory that is removed).

Usage: scripts/bench.sh imports [--runs 5] [--write docs/benchmarks.md]
(`--write` replaces the section "## Imports per module call (lab host)" of that file).
"""

from __future__ import absolute_import, division, print_function

import argparse
import ast
import base64
import io
import json
import os
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PLUGINS = os.path.join(REPO, "plugins")
PACKAGE = "ansible_collections.gpuvirt.tenancy.plugins"
LAB = [sys.executable, os.path.join(REPO, "lab", "lab.py")]
HEADING = "## Imports per module call (lab host)"

sys.path.insert(0, HERE)
from markdown_section import write_section  # noqa: E402  pylint: disable=wrong-import-position

# Runs on the lab host as `python3 -`, after the lines that set CASES, RUNS and PAYLOAD (the way
# AnsiballZ carries its zip): writes the zip, times each import in a fresh interpreter, prints JSON.
REMOTE = r'''
import base64, json, os, shutil, statistics, subprocess, tempfile, time  # noqa: E401
cases, runs, payload = CASES, RUNS, PAYLOAD
# each run: a fresh python3 that times its own imports (basic, then the module) and prints them
PROBE = ("import sys, time; sys.path.insert(0, %r); t0 = time.perf_counter(); import ansible.module_utils.basic; "
         "t1 = time.perf_counter(); %s; t2 = time.perf_counter(); print(t1 - t0, t2 - t1)")
tmp = tempfile.mkdtemp(prefix="gpuvirt_bench_imports_")
try:
    path = os.path.join(tmp, "payload.zip")
    with open(path, "wb") as handle:
        handle.write(base64.b64decode(payload))
    times = dict((label, {"process": [], "basic": [], "module": []}) for label, _code in cases)
    # round 0 warms the page cache and is not timed; the cases take turns within each round,
    # so that a slow minute of the emulated host weighs on all of them alike
    for round_ in range(runs + 1):
        for label, code in cases:
            start = time.monotonic()
            out = subprocess.run(["python3", "-c", PROBE % (path, code)], check=True, capture_output=True, text=True).stdout
            took = time.monotonic() - start
            if round_:
                basic, module = (float(v) for v in out.split())
                for key, value in (("process", took), ("basic", basic), ("module", module)):
                    times[label][key].append(value)
    print(json.dumps(dict((label, dict((key, [min(v), statistics.median(v)]) for key, v in parts.items()))
                          for label, parts in times.items())))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
'''


def ansible_root():
    import ansible  # pylint: disable=import-outside-toplevel
    return os.path.dirname(ansible.__file__)


def payload():
    """The zip: ansible's module_utils tree and the collection's module_utils and modules."""
    buf = io.BytesIO()
    root = ansible_root()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ansible/__init__.py", "")
        for top, _dirs, files in os.walk(os.path.join(root, "module_utils")):
            for name in files:
                if name.endswith(".py"):
                    full = os.path.join(top, name)
                    archive.write(full, "ansible/" + os.path.relpath(full, root))
        parts = PACKAGE.split(".")
        for depth in range(1, len(parts) + 1):
            archive.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        for sub in ("module_utils", "modules"):
            archive.writestr("%s/%s/__init__.py" % (PACKAGE.replace(".", "/"), sub), "")
            for top, _dirs, files in os.walk(os.path.join(PLUGINS, sub)):
                for name in sorted(files):
                    if name.endswith(".py"):
                        full = os.path.join(top, name)
                        archive.write(full, "%s/%s" % (PACKAGE.replace(".", "/"), os.path.relpath(full, PLUGINS)))
    return base64.b64encode(buf.getvalue()).decode("ascii")


def top_level_utils(path):
    """The collection module_utils a file imports at module level, as dotted names under
    module_utils (imports inside functions are left out: they are compiled only when the call
    needs them)."""
    found = set()
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE + ".module_utils."):
            rest = node.module[len(PACKAGE + ".module_utils."):]
            source = os.path.join(PLUGINS, "module_utils", *rest.split("."))
            # ``from ...module_utils.<package> import <module>`` or ``from ...<package>.<module> import <name>``
            found.update([rest] if os.path.isfile(source + ".py") else ["%s.%s" % (rest, alias.name) for alias in node.names])
    return found


def util_path(name):
    return os.path.join(PLUGINS, "module_utils", *name.split(".")) + ".py"


def imported_source_kb(module_path):
    seen, todo = set(), list(top_level_utils(module_path))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(top_level_utils(util_path(name)))
    size = os.path.getsize(module_path) + sum(os.path.getsize(util_path(n)) for n in seen)
    return size / 1024.0


def measure(runs):
    modules = sorted(name[:-3] for name in os.listdir(os.path.join(PLUGINS, "modules")) if name.endswith(".py"))
    cases = [["basic", "pass"]] + [[name, "import %s.modules.%s" % (PACKAGE, name)] for name in modules]
    program = "CASES = %r\nRUNS = %d\nPAYLOAD = %r\n" % (cases, runs, payload()) + REMOTE
    proc = subprocess.run(LAB + ["ssh", "python3", "-"], input=program, text=True,
                          capture_output=True, timeout=3600, check=False)
    if proc.returncode != 0:
        sys.exit("bench imports: the lab run failed (is the lab up? python3 lab/lab.py up):\n" + proc.stderr[-2000:])
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    sizes = dict((name, imported_source_kb(os.path.join(PLUGINS, "modules", name + ".py"))) for name in modules)
    return times, sizes, modules


def render(times, sizes, modules, runs, command):
    """The fastest of the runs first: an import is the same work each time and the emulated host
    only adds delays to it; the median next to it shows the spread."""
    basic = times["basic"]
    out = [HEADING, "", "Command: `%s` (the lab running; `benchmarks/bench_imports.py`)." % command, "",
           "Seconds on the lab host, fastest (median) of %d runs each, every run a fresh `python3` that times "
           "its own imports: `import ansible.module_utils.basic` (what `ansible -m ping` imports) %.2f s (%.2f), "
           "the whole process with it %.2f s (%.2f). Then each module imported after basic (its `main()` not run):"
           % (runs, basic["basic"][0], basic["basic"][1], basic["process"][0], basic["process"][1]), "",
           "| module | collection source imported (KB) | module import after basic (s) | whole process (s) |",
           "| --- | ---: | ---: | ---: |"]
    for name in sorted(modules, key=lambda n: -times[n]["module"][0]):
        row = times[name]
        out.append("| %s | %.0f | %.2f (%.2f) | %.2f (%.2f) |" % (
            name, sizes[name], row["module"][0], row["module"][1], row["process"][0], row["process"][1]))
    out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", help="Markdown file whose '%s' section is (re)written" % HEADING)
    args = parser.parse_args()
    command = "scripts/bench.sh imports --runs %d" % args.runs + (" --write %s" % args.write if args.write else "")
    times, sizes, modules = measure(args.runs)
    section = render(times, sizes, modules, args.runs, command)
    print(section)
    if args.write:
        write_section(args.write, section)


if __name__ == "__main__":
    main()
