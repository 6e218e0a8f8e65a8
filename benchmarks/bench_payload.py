#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""What each module of the collection ships to a host in one call: its AnsiballZ payload.

Ansible sends a module call's Python code as a zip (AnsiballZ) that holds the module and every
module_utils file ansible-core's import finder reaches from it, imports inside functions
included, plus ansible-core's own module_utils. This benchmark builds that zip for each module of
``plugins/modules/`` with ansible-core's own finder (``module_common.recursive_finder``, the code
a real run uses) and the default compression (``ZIP_DEFLATED``), and reports per module: the
collection's files in it and their source size, the whole zip, and the zip as base64 (what the
wrapper script carries). No host, no lab: it runs on the controller in a few seconds.

``--against REV`` measures the same for the collection as it is in git revision REV (its
``plugins/`` taken with ``git archive`` into a temporary collection tree) and shows both side by
side.

Usage: scripts/bench.sh payload [--against REV] [--write docs/benchmarks.md [--note TEXT]]
(``--write`` replaces the section "## Module payloads (AnsiballZ)" of that file).
"""

from __future__ import absolute_import, division, print_function

import argparse
import base64
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HEADING = "## Module payloads (AnsiballZ)"
PREFIX = "ansible_collections/gpuvirt/tenancy/"

sys.path.insert(0, HERE)
from markdown_section import write_section  # noqa: E402  pylint: disable=wrong-import-position


def measure_here():
    """{module: {files, source, zip, base64, shipped}} for the collection on this process's
    collection path (run in a child process with that path set)."""
    # pylint: disable=import-outside-toplevel
    from ansible.executor import module_common
    from ansible.plugins.loader import init_plugin_loader
    from ansible._internal._ansiballz._builder import ExtensionManager
    init_plugin_loader()
    import ansible_collections.gpuvirt.tenancy as collection
    modules_dir = os.path.join(list(collection.__path__)[0], "plugins", "modules")
    results = {}
    for name in sorted(os.listdir(modules_dir)):
        if not name.endswith(".py") or name.startswith("_"):
            continue
        module = name[:-3]
        with open(os.path.join(modules_dir, name), "rb") as handle:
            data = handle.read()
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as payload:
            module_common.recursive_finder(module, "ansible_collections.gpuvirt.tenancy.plugins.modules." + module, data,
                                           payload, datetime.datetime(2020, 1, 1), ExtensionManager())
            ours = [info for info in payload.infolist() if info.filename.startswith(PREFIX)]
        zipped = buffer.getvalue()
        results[module] = {"files": len([info for info in ours if not info.filename.endswith("/__init__.py")]),
                           "source": sum(info.file_size for info in ours) + len(data), "zip": len(zipped),
                           "base64": len(base64.b64encode(zipped)),
                           "shipped": sorted(info.filename[len(PREFIX):] for info in ours)}
    return results


def measure_tree(collections_dir):
    """measure_here() in a fresh interpreter whose collection path is ``collections_dir``."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_dir, PYTHONPATH=collections_dir)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure-here"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def revision_tree(revision, workdir):
    """A collection tree of ``plugins/`` (and galaxy.yml) at git ``revision`` under ``workdir``."""
    target = os.path.join(workdir, "ansible_collections", "gpuvirt", "tenancy")
    os.makedirs(target)
    archive = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", revision, "plugins", "galaxy.yml", "meta"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target)  # nosec: our own repository's tree
    return workdir


def kb(value):
    return "%.0f" % (value / 1024.0)


def table(current, before=None, revision=None):
    lines = []
    if before is None:
        lines.append("| module | collection files | collection source (KB) | zip (KB) | base64 in the call (KB) |")
        lines.append("| --- | ---: | ---: | ---: | ---: |")
        for module in sorted(current, key=lambda m: -current[m]["source"]):
            now = current[module]
            lines.append("| %s | %d | %s | %s | %s |" % (module, now["files"], kb(now["source"]), kb(now["zip"]),
                                                         kb(now["base64"])))
        return "\n".join(lines)
    lines.append("| module | collection files (%s -> now) | collection source, KB (%s -> now) | base64 in the call, KB "
                 "(%s -> now) |" % (revision, revision, revision))
    lines.append("| --- | ---: | ---: | ---: |")
    for module in sorted(set(current) | set(before), key=lambda m: -(before.get(m) or current[m])["source"]):
        old, now = before.get(module), current.get(module)
        cell = ["%s -> %s" % (shown(old, k), shown(now, k)) if old and now else
                ("gone" if old else "new: %s" % shown(now, k)) for k in ("files", "source", "base64")]
        lines.append("| %s | %s |" % (module, " | ".join(cell)))
    return "\n".join(lines)


def shown(sizes, key):
    """One size of a module's payload as the table writes it (a count of files, else KB)."""
    return "%d" % sizes[key] if key == "files" else kb(sizes[key])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="git revision to measure too, side by side")
    parser.add_argument("--write", help="Markdown file whose '%s' section is (re)written" % HEADING)
    parser.add_argument("--note", help="a paragraph written after the table (with --write): what changed, what was not measured")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON (with the files shipped)")
    parser.add_argument("--measure-here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_here:
        print(json.dumps(measure_here()))
        return 0
    current = measure_tree(os.path.join(REPO, ".build", "collections"))
    before = None
    if args.against:
        workdir = tempfile.mkdtemp(prefix="gpuvirt_bench_payload_")
        try:
            before = measure_tree(revision_tree(args.against, workdir))
        finally:
            shutil.rmtree(workdir)
    if args.json:
        print(json.dumps({"now": current, "before": before, "against": args.against}, indent=1, sort_keys=True))
        return 0
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    text = table(current, before, args.against)
    print(text)
    if args.write:
        command = "bash scripts/bench.sh payload" + (" --against %s" % args.against if args.against else "")
        section = ("%s\n\nCommand: `%s --write docs/benchmarks.md` (`benchmarks/bench_payload.py`; no lab), run of %s on "
                   "commit %s (the working tree as it was then). Per module: the collection's files in its AnsiballZ zip "
                   "(without the packages' empty `__init__.py`) and their source, the module file included; the base64 "
                   "of the whole zip, ansible-core's module_utils included (about %s KB of it for every module, as for a "
                   "ping), which is what the call carries. Built with ansible-core's own finder, which ships every file "
                   "the module reaches through imports, those inside functions included.\n\n%s\n"
                   % (HEADING, command, datetime.date.today().isoformat(), head or "?",
                      kb(min(m["base64"] for m in current.values())), text))
        if args.note:
            section += "\n%s\n" % args.note.strip()
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
