# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's code as a module call loads it on the host: each source file compiled once.

Ansible sends a module call's code to the host in a zip (AnsiballZ) and Python imports it with
``zipimport``, which keeps no bytecode. ``zipimport`` also compiles each source file twice: once
to tell the import system the module's file name (``zipimporter.get_filename``, asked while the
module's spec is made) and once more to run it. CPython issue gh-141276 reports it for 3.13 to
3.15; the unit test of this module finds it on the Pythons it runs on (3.11 to 3.13 here). A call
of this collection imports up to about 730 KB of its own source, so the second compile is a real
part of each call where the CPU is slow: on the emulated lab, the gate's module run took 7.0-8.3 s
without the finder and 5.3-6.7 s with it, in alternating runs (docs/benchmarks.md).

Importing this module puts ``CollectionZipFinder`` on ``sys.meta_path``, before Python's path
finder. For a module of this collection whose package was itself loaded from a zip, it makes the
spec that ``zipimport`` would make (the same loader, file name, package path and attributes), with
the file name taken from the archive's path instead of from a compile; ``zipimport`` then loads
and runs the code as before, compiling it once. It writes nothing anywhere (no bytecode cache on
managed hosts). Anything else (another package, this collection imported from a directory as on
the controller and in the tests, a Python before 3.10, whose ``zipimport`` loads modules the older
way) is left to Python's own finders. ``host/runner.py`` imports it first, and every module file
imports the runner first, so only the files above the runner are compiled twice.
"""

from __future__ import absolute_import, division, print_function

import sys
import zipimport
from importlib.machinery import ModuleSpec, PathFinder

__metaclass__ = type

COLLECTION_PREFIX = "ansible_collections.gpuvirt.tenancy."

# zipimporter.exec_module (3.10) is what runs a module from a spec; before it the import system
# falls back to zipimporter.load_module, which makes its own module.
SUPPORTED = hasattr(zipimport.zipimporter, "exec_module")


def _join(directory, name):
    # zipimport's paths use the platform's separator after the archive's path; this collection's
    # hosts are Linux
    return directory.rstrip("/") + "/" + name


class CollectionZipFinder:
    """A meta path finder for this collection's modules inside a zip (see the module's text)."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if not fullname.startswith(COLLECTION_PREFIX) or not path:
            return None
        package, _dot, name = fullname.rpartition(".")
        parent_spec = getattr(sys.modules.get(package), "__spec__", None)
        if not isinstance(getattr(parent_spec, "loader", None), zipimport.zipimporter):
            return None
        for entry in path:
            try:
                importer = zipimport.zipimporter(entry)
                is_package = importer.is_package(fullname)
            except zipimport.ZipImportError:
                continue  # not a zip, or not in this part of the package's path
            if is_package:
                origin = _join(_join(entry, name), "__init__.py")
            else:
                origin = _join(entry, name + ".py")
            spec = ModuleSpec(fullname, importer, origin=origin, is_package=is_package)
            spec.has_location = True  # sets __file__, as zipimport's own spec does
            if is_package:
                spec.submodule_search_locations.append(_join(entry, name))
            return spec
        return None


def install():
    """Puts the finder on sys.meta_path just before Python's path finder (the one that would ask
    zipimport), once; nothing on a Python it does not support. The finders before it (built-in and
    frozen modules, or ansible-test's import checker first of all) keep their places."""
    if not SUPPORTED or CollectionZipFinder in sys.meta_path:
        return
    place = len(sys.meta_path)
    if PathFinder in sys.meta_path:
        place = sys.meta_path.index(PathFinder)
    sys.meta_path.insert(place, CollectionZipFinder)


install()
