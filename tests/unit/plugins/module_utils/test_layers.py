# -*- coding: utf-8 -*-
"""The layout of plugins/module_utils shows its layers (docs/ARCHITECTURE.md): each package
imports only packages below it, every file sits in a package, and no file grows past 600 lines.
Read from the source with ``ast``, imports inside functions included (AnsiballZ ships those too)."""

from __future__ import annotations

import ast
import os

import pytest

from conftest import REPO_ROOT

MODULE_UTILS = os.path.join(REPO_ROOT, "plugins", "module_utils")
PREFIX = "ansible_collections.gpuvirt.tenancy.plugins.module_utils."
# bottom first: a package may import the packages listed before it (guest sits beside the host
# stages: inside a tenant it needs the vocabulary, the host seam and the ConnectX firmware reader)
LAYERS = {
    "vocabulary": set(),
    # the tenant contract: the tenants as the inventory gives them, parsed once into records (pure)
    "tenancy": {"vocabulary"},
    "host": {"vocabulary"},
    "boot": {"vocabulary", "host"},
    "placement": {"vocabulary", "tenancy"},
    "sriov_vfio": {"vocabulary", "host", "boot", "placement", "tenancy"},
    "libvirt": {"vocabulary", "host", "placement", "sriov_vfio", "tenancy"},
    "preflight": {"vocabulary", "host", "boot", "placement", "sriov_vfio", "libvirt", "tenancy"},
    "guest": {"vocabulary", "host", "boot"},
}


def sources():
    for package in sorted(os.listdir(MODULE_UTILS)):
        folder = os.path.join(MODULE_UTILS, package)
        if os.path.isdir(folder) and package != "__pycache__":
            for name in sorted(os.listdir(folder)):
                if name.endswith(".py"):
                    yield package, os.path.join(folder, name)


def imported_packages(path):
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.add(node.module[len(PREFIX):].split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module == PREFIX.rstrip("."):
            found.update(alias.name for alias in node.names)
    return found


def test_every_package_has_a_layer_and_no_file_lies_outside_them():
    packages = set(package for package, _path in sources())
    assert packages == set(LAYERS)
    loose = [name for name in os.listdir(MODULE_UTILS) if name.endswith(".py")]
    assert loose == [], "module_utils files outside a package: %s" % loose


@pytest.mark.parametrize("package, path", list(sources()), ids=lambda value: os.path.basename(value) if "/" in str(value) else value)
def test_a_package_imports_only_the_layers_below_it(package, path):
    above = imported_packages(path) - LAYERS[package] - {package}
    assert not above, "%s imports %s, which is not below %s" % (os.path.relpath(path, REPO_ROOT), sorted(above), package)


@pytest.mark.parametrize("package, path", list(sources()), ids=lambda value: os.path.basename(value) if "/" in str(value) else value)
def test_no_file_over_600_lines(package, path):
    with open(path, encoding="utf-8") as handle:
        lines = sum(1 for _line in handle)
    assert lines <= 600, "%s has %d lines" % (os.path.relpath(path, REPO_ROOT), lines)


def test_the_rule_catches_an_import_from_above(tmp_path):
    # the check itself can fail: a vocabulary leaf that imports a feature is reported
    leaf = tmp_path / "leaf.py"
    leaf.write_text("def f():\n    from %sboot import grub\n" % PREFIX)
    assert imported_packages(str(leaf)) - LAYERS["vocabulary"] == {"boot"}
