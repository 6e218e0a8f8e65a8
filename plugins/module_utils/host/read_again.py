# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The program that makes a gate's kept reads again on the host, without a module.

The preflight gate's action keeps each run's reads (``host/reads.py``). To know whether the host
still answers them the same, the reads are made again on the host; a module call would spend most
of its time starting (AnsiballZ, then ``ansible.module_utils.basic``, about two seconds of imports
under emulation, as much as the reads). So the action runs this program instead, as one command
with the gate's own Python and the program on stdin (the way a pipelined module is run):
:func:`script`, on the controller, writes it (this file's source, the sources of the seam's files
the reads need, the reads and the root); on the host it serves those sources from memory
(:class:`SourceImporter`), makes the reads through :func:`reads.read_again` on a :class:`seam.Host`
whose programs run as the module's ``run_command`` runs them (:class:`ProgramRunner`), and prints
one line of JSON: ``{"digests": [...], "python": [3, 11]}``, or ``{"failed": true, "msg": ...}``.

Standard library only: nothing else is importable before the program serves its sources.
"""

from __future__ import absolute_import, division, print_function

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

__metaclass__ = type

PACKAGE = "ansible_collections.gpuvirt.tenancy.plugins.module_utils"
# the seam's files the reads need (the libvirt connection, imported only where a read is libvirt's, included),
# relative to module_utils; tests/unit checks that the program runs with no other file of the collection
SOURCES = ("vocabulary/common.py", "host/sysfs.py", "host/seam.py", "host/reads.py", "host/libvirt_connection.py",
           "host/program_runner.py")


def module_name(relative):
    """The module name of a file of :data:`SOURCES` (``host/seam.py``)."""
    return PACKAGE + "." + relative[:-len(".py")].replace("/", ".")


class SourceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules of ``sources`` (module name -> [file name, source]) from memory, and their
    packages as empty ones that hold nothing else: a collection installed on the host is not seen."""

    def __init__(self, sources):
        self.sources = dict(sources)
        self.packages = set()
        for name in self.sources:
            parts = name.split(".")
            self.packages.update(".".join(parts[:end]) for end in range(1, len(parts)))

    def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
        if fullname in self.sources:
            return importlib.util.spec_from_loader(fullname, self, origin=self.sources[fullname][0])
        if fullname in self.packages:
            spec = importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            spec.submodule_search_locations = []
            return spec
        return None

    def create_module(self, spec):  # pylint: disable=unused-argument
        return None

    def exec_module(self, module):
        if module.__name__ in self.sources:
            filename, source = self.sources[module.__name__]
            exec(compile(source, filename, "exec"), module.__dict__)  # pylint: disable=exec-used


def run(payload_text):
    """On the host: the reads of ``payload_text`` (what :func:`script` wrote) made again, their
    digests printed as one line of JSON."""
    try:
        payload = json.loads(payload_text)
        sys.meta_path.insert(0, SourceImporter(payload["sources"]))
        seam = importlib.import_module(module_name("host/seam.py"))
        reads = importlib.import_module(module_name("host/reads.py"))
        runner = importlib.import_module(module_name("host/program_runner.py"))
        host = seam.Host(payload["root"]).bind(runner.ProgramRunner())
        result = {"digests": reads.read_again(host, payload["records"]), "python": list(sys.version_info[:2])}
    except Exception as exc:  # pylint: disable=broad-except
        # any failure is a miss for the action, which then runs the gate itself
        result = {"failed": True, "msg": str(exc) or type(exc).__name__}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def script(module_utils, records, root):
    """On the controller: the program's text, to run with the host's Python reading it from stdin.
    ``module_utils`` is the collection's module_utils directory, ``records`` the kept reads,
    ``root`` the gate's root."""
    sources = {}
    for relative in SOURCES:
        with open(os.path.join(module_utils, relative), "r", encoding="utf-8") as handle:
            sources[module_name(relative)] = ["<gpuvirt.tenancy>/plugins/module_utils/" + relative, handle.read()]
    with open(os.path.join(module_utils, "host", "read_again.py"), "r", encoding="utf-8") as handle:
        program = handle.read()
    payload = json.dumps({"sources": sources, "records": records, "root": root})
    return "%s\n\nrun(%r)\n" % (program, payload)
