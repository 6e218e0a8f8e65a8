# -*- coding: utf-8 -*-
"""Every public variable (``gpuvirt_*``) that the shipped playbooks and roles read or set is named
as code in docs/CONTRACTS.md and in its docsite page (docs/docsite/rst/contracts.rst), in a table
of variables or in the text: a user of the installed collection finds each one documented."""

from __future__ import annotations

import glob
import os
import re

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = re.compile(r"\bgpuvirt_[a-z0-9_]+")
# What the shipped plays and roles are made of (the lab's playbooks are not shipped).
SOURCES = ("playbooks/*.yml", "roles/*/tasks/*.yml", "roles/*/defaults/*.yml", "roles/*/vars/*.yml",
           "roles/*/handlers/*.yml", "roles/*/templates/*")
# Names of the collection's inventory groups, not variables.
NOT_VARIABLES = {"gpuvirt_hosts", "gpuvirt_guests"}


def read_names():
    names = {}
    for pattern in SOURCES:
        for path in sorted(glob.glob(os.path.join(REPO, pattern))):
            with open(path, encoding="utf-8") as handle:
                for name in NAME.findall(handle.read()):
                    names.setdefault(name, os.path.relpath(path, REPO))
    return names


def documented_names(path, rst):
    """The variables a page names as code (``name`` in RST, `name` in Markdown)."""
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        text = handle.read()
    code = re.compile(r"``(gpuvirt_[a-z0-9_]+)``" if rst else r"(?<!`)`(gpuvirt_[a-z0-9_]+)`(?!`)")
    return set(code.findall(text))


def test_the_sources_read_variables():
    names = read_names()
    assert {"gpuvirt_tenants", "gpuvirt_capture_dir", "gpuvirt_libvirt_uri", "gpuvirt_sriov_persist"} <= set(names)


@pytest.mark.parametrize("page, rst", [("docs/CONTRACTS.md", False), ("docs/docsite/rst/contracts.rst", True)])
def test_every_variable_the_playbooks_and_roles_read_is_documented(page, rst):
    documented = documented_names(page, rst)
    missing = sorted("%s (%s)" % (name, where) for name, where in read_names().items()
                     if name not in documented and name not in NOT_VARIABLES)
    assert missing == [], "not documented in %s: %s" % (page, ", ".join(missing))
