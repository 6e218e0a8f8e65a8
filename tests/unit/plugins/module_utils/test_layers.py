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
# bottom first: a package may import only the packages it names here, each listed before it
# (test_the_layers_are_listed_bottom_first), and names only those it does import
# (test_each_allowed_package_is_used), so that an import of a sibling (one stage's code from
# another stage, say sriov_vfio from boot) fails the test instead of widening the table unseen.
# Vendor specifics sit apart from the stages (connectx: the ConnectX firmware tools, as the
# kernel keeps drivers/vfio/pci/mlx5/ apart from its core), and so does what the host restores
# at every boot (restore: the boot script and its files, written by sriov_vfs and vfio_bind,
# their unit ordered by hugepages). The planner's glue for the tenants stage (planning) sits
# beside the planner, above the SR-IOV/VFIO stage whose VF projection it reads; guest runs
# inside a tenant and needs the vocabulary, the host seam and the ConnectX firmware reader.
LAYERS = {
    "vocabulary": set(),
    # the tenant contract: the tenants as the inventory gives them, parsed once into records (pure)
    "tenancy": {"vocabulary"},
    "host": {"vocabulary"},
    "connectx": {"vocabulary"},
    "restore": set(),
    # the Fabric Manager's partitions of an NVSwitch board through fmpm (NVIDIA's specifics, as connectx):
    # fabric_partition's, and the tenants stage's before a tenant starts and after one is removed
    "fabric": {"vocabulary", "host"},
    "placement": {"vocabulary", "tenancy"},
    "boot": {"vocabulary", "host", "connectx", "restore"},
    "sriov_vfio": {"vocabulary", "host", "connectx", "restore", "placement", "tenancy"},
    "planning": {"vocabulary", "placement", "sriov_vfio", "tenancy"},
    "libvirt": {"vocabulary", "host", "placement", "sriov_vfio", "planning", "tenancy", "fabric"},
    "guest": {"vocabulary", "host", "connectx"},
    "preflight": {"vocabulary", "host", "connectx", "placement", "boot", "sriov_vfio", "libvirt", "tenancy"},
}
ORDER = list(LAYERS)


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


def test_the_layers_are_listed_bottom_first():
    # the table itself has no cycle and no sibling: every allowed package comes before the one allowed it
    for position, package in enumerate(ORDER):
        later = LAYERS[package] - set(ORDER[:position])
        assert not later, "%s may import %s, which is not listed below it" % (package, sorted(later))


def test_each_allowed_package_is_used():
    # no allowance kept once its import is gone: a stale one would let a sibling import back in unseen
    used = dict((package, set()) for package in LAYERS)
    for package, path in sources():
        used[package] |= imported_packages(path) - {package}
    for package, allowed in LAYERS.items():
        assert allowed <= used[package], "%s is allowed %s but imports none of it" % (package, sorted(allowed - used[package]))


@pytest.mark.parametrize("package, imported, reported", [
    ("vocabulary", "boot import grub", "boot"),  # a leaf that imports a feature
    ("sriov_vfio", "boot import stage", "boot"),  # one stage's code from another stage
    ("boot", "sriov_vfio.vfio import vfio_bind", "sriov_vfio"),
    ("connectx", "restore import script", "restore"),  # the vendor package reaching into the boot files
    ("placement", "planning import tenant_plan", "planning"),  # the planner reaching up to its glue
    ("guest", "libvirt.domain_info import tenant_domain_info", "libvirt"),
    ("restore", "connectx import mlxconfig", "connectx"),
])
def test_the_rule_catches_an_import_it_should_not_allow(tmp_path, package, imported, reported):
    # the check itself can fail: the import, inside a function as AnsiballZ finds it, is reported
    leaf = tmp_path / "leaf.py"
    leaf.write_text("def f():\n    from %s%s\n" % (PREFIX, imported))
    assert imported_packages(str(leaf)) - LAYERS[package] - {package} == {reported}
