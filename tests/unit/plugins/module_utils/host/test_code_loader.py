# -*- coding: utf-8 -*-
"""host/code_loader: the collection's code loaded from a zip, as AnsiballZ ships it to a host,
compiles each file once and gets the modules zipimport alone would give (file names, package
paths, loader). Each case imports the collection's real module_utils from a zip built here, in
a fresh interpreter, and counts the calls of ``compile`` per file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from importlib.machinery import PathFinder

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import code_loader

from conftest import COLLECTIONS  # pylint: disable=import-error

PACKAGE = "ansible_collections/gpuvirt/tenancy"
UTILS = "ansible_collections.gpuvirt.tenancy.plugins.module_utils."
# the gate's feature: it imports most of module_utils
IMPORTED = [UTILS + "host.runner", UTILS + "preflight.info", UTILS + "libvirt.tenant_domain_call"]

PROBE = r"""
import builtins, json, sys, zipimport
sys.path.insert(0, sys.argv[1])
finder_on = sys.argv[2] == "on"
compiles = {}
real_compile = builtins.compile
def counting_compile(source, filename, *args, **kwargs):
    compiles[filename] = compiles.get(filename, 0) + 1
    return real_compile(source, filename, *args, **kwargs)
builtins.compile = counting_compile
import ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.code_loader as loader
if not finder_on:
    sys.meta_path.remove(loader.CollectionZipFinder)
compiles.clear()
for name in sys.argv[3:]:
    __import__(name)
modules = {}
for name, module in sorted(sys.modules.items()):
    if not name.startswith("ansible_collections.gpuvirt.tenancy.") or name.endswith("code_loader"):
        continue
    spec = module.__spec__
    modules[name] = {
        "file": module.__file__, "path": list(getattr(module, "__path__", []) or []) or None,
        "package": module.__package__, "origin": spec.origin, "has_location": spec.has_location,
        "search": spec.submodule_search_locations and list(spec.submodule_search_locations),
        "cached": spec.cached, "parent": spec.parent,
        "loader": [type(module.__loader__).__name__, module.__loader__.archive, module.__loader__.prefix],
        "loader_is_spec_loader": module.__loader__ is spec.loader,
    }
print(json.dumps({"compiles": compiles, "modules": modules}))
"""


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    """A zip of the collection's module_utils with the package files AnsiballZ adds."""
    path = tmp_path_factory.mktemp("ansiballz") / "payload.zip"
    source = os.path.join(COLLECTIONS, PACKAGE, "plugins", "module_utils")
    with zipfile.ZipFile(path, "w") as archive:
        for package in ("ansible_collections", "ansible_collections/gpuvirt", PACKAGE, PACKAGE + "/plugins",
                        PACKAGE + "/plugins/module_utils"):
            archive.writestr(package + "/__init__.py", "")
        for directory, _dirs, files in os.walk(source):
            for name in files:
                if name.endswith(".py") and os.path.join(directory, name) != os.path.join(source, "__init__.py"):
                    full = os.path.join(directory, name)
                    archive.write(full, PACKAGE + "/plugins/module_utils/" + os.path.relpath(full, source))
    return str(path)


def probe(payload, finder):
    out = subprocess.run([sys.executable, "-B", "-c", PROBE, payload, finder] + IMPORTED,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.skipif(not code_loader.SUPPORTED, reason="Python before 3.10: the finder stays out")
def test_each_file_of_the_collection_compiles_once_from_a_zip(payload):
    found = probe(payload, "on")
    ours = dict((name, count) for name, count in found["compiles"].items() if "/ansible_collections/gpuvirt/" in name)
    assert len(ours) > 40, "the gate's feature imports most of module_utils"
    assert set(ours.values()) == {1}, sorted(name for name, count in ours.items() if count != 1)


@pytest.mark.skipif(not code_loader.SUPPORTED, reason="Python before 3.10: the finder stays out")
def test_the_modules_are_those_zipimport_gives(payload):
    with_finder = probe(payload, "on")
    without = probe(payload, "off")
    assert with_finder["modules"] == without["modules"]
    assert set(with_finder["modules"]) >= set(IMPORTED)
    runner = with_finder["modules"][UTILS + "host.runner"]
    assert runner["file"] == payload + "/" + PACKAGE + "/plugins/module_utils/host/runner.py"
    assert runner["loader"][0] == "zipimporter" and runner["loader_is_spec_loader"]
    host = with_finder["modules"][UTILS.rstrip(".") + ".host"]
    assert host["path"] == [payload + "/" + PACKAGE + "/plugins/module_utils/host"]
    # what the finder saves: zipimport alone compiles the same files at least as often
    for name, count in with_finder["compiles"].items():
        assert without["compiles"].get(name, 0) >= count


@pytest.mark.skipif(not code_loader.SUPPORTED, reason="Python before 3.10: the finder stays out")
def test_a_module_missing_from_the_zip_is_still_an_import_error(payload):
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.code_loader\n"
            "try:\n    import ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.no_such_file\n"
            "except ModuleNotFoundError as exc:\n    print(exc.name)\n" % payload)
    out = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == UTILS + "host.no_such_file"


@pytest.mark.parametrize("fullname, path", [
    # the collection imported from a directory (the controller, these tests): Python's own finders
    (UTILS + "host.seam", [os.path.join(COLLECTIONS, PACKAGE, "plugins", "module_utils", "host")]),
    # another package, or a top-level name
    ("ansible.module_utils.basic", ["/x.zip/ansible/module_utils"]),
    ("ansible_collections.gpuvirt.tenancy", None),
])
def test_the_finder_leaves_everything_else_to_python(fullname, path):
    assert code_loader.CollectionZipFinder.find_spec(fullname, path) is None


def test_installed_once_before_the_path_finder():
    first = sys.meta_path[0]
    assert code_loader.install() is None
    assert sys.meta_path[0] is first
    if code_loader.SUPPORTED:
        assert sys.meta_path.count(code_loader.CollectionZipFinder) == 1
        assert sys.meta_path.index(code_loader.CollectionZipFinder) < sys.meta_path.index(PathFinder)
    else:
        assert code_loader.CollectionZipFinder not in sys.meta_path
