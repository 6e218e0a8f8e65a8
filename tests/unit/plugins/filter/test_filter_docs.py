# -*- coding: utf-8 -*-
"""Every filter's documentation file (plugins/filter/<name>.yml) loads in ansible-doc, names its
filter, and each filter a FilterModule exports has one: a doc that YAML cannot read is a filter
an operator cannot look up."""

from __future__ import annotations

import glob
import importlib
import json
import os
import subprocess
import sys

from conftest import REPO_ROOT  # pylint: disable=import-error

FILTER_DIR = os.path.join(REPO_ROOT, "plugins", "filter")


def documented():
    return sorted(os.path.basename(path)[:-4] for path in glob.glob(os.path.join(FILTER_DIR, "*.yml")))


def exported():
    names = set()
    for path in glob.glob(os.path.join(FILTER_DIR, "*.py")):
        module = importlib.import_module("ansible_collections.gpuvirt.tenancy.plugins.filter." + os.path.basename(path)[:-3])
        names.update(module.FilterModule().filters())
    return sorted(names)


def test_each_exported_filter_has_a_doc_file_and_each_doc_file_a_filter():
    assert exported() == documented()


def test_every_filter_doc_loads_and_names_its_filter():
    names = documented()
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-t", "filter", "--json"]
                          + ["gpuvirt.tenancy." + name for name in names],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(docs) == ["gpuvirt.tenancy." + name for name in names]
    for key, doc in docs.items():
        assert doc["doc"]["name"] == key.split(".")[-1] and doc["doc"].get("short_description"), key


def test_each_filter_file_is_named_after_a_filter_it_exports():
    """Galaxy's importer lists every Python file of plugins/filter as a filter of that file's name
    and looks its docs up by that name: a file named after no filter shows on Galaxy as an
    undocumented filter that does not exist."""
    for path in glob.glob(os.path.join(FILTER_DIR, "*.py")):
        name = os.path.basename(path)[:-3]
        module = importlib.import_module("ansible_collections.gpuvirt.tenancy.plugins.filter." + name)
        assert name in module.FilterModule().filters(), "%s exports no filter named %s" % (path, name)
