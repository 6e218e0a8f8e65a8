# -*- coding: utf-8 -*-
"""The captured-host trees the tests build: ``load_dgx_tree()`` is tests/tools/dgx_tree.py (the
DGX A100-class host, from public captures), whose ``write_tree(dir)`` lays it out;
``lab_capture(name)`` is a capture of the lab VM, tests/fixtures/lab/<name>.tar, unpacked."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tarfile
import tempfile

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
LAB_CAPTURES = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "lab"))
_UNPACKED = {}


def load_dgx_tree():
    spec = importlib.util.spec_from_file_location("dgx_tree", os.path.join(TOOLS, "dgx_tree.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unpack_lab_capture(name, dest):
    """tests/fixtures/lab/<name>.tar (``bare``, ``iommu-on``: see each one's .source.txt) unpacked
    into ``dest``, a new or empty directory: its sysfs names (``0000:81:00.0``) and its relative
    links as the lab's kernel showed them. -> ``dest``."""
    os.makedirs(str(dest), exist_ok=True)
    with tarfile.open(os.path.join(LAB_CAPTURES, name + ".tar")) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12, and 3.8-3.11 releases since mid-2023
            tar.extractall(str(dest), filter="data")
        else:
            tar.extractall(str(dest))  # nosec: the repository's own capture
    return str(dest)


def lab_capture(name):
    """The capture ``name`` unpacked once per test process into a temporary directory, removed
    when the process ends; a test that changes a capture copies it first
    (``shutil.copytree(path, dest, symlinks=True)``). -> its path."""
    if name not in _UNPACKED:
        work = tempfile.mkdtemp(prefix="gpuvirt-lab-%s." % name)
        atexit.register(shutil.rmtree, work, True)
        _UNPACKED[name] = unpack_lab_capture(name, os.path.join(work, name))
    return _UNPACKED[name]
