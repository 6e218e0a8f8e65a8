# -*- coding: utf-8 -*-
"""The captured-host trees the tests build: ``load_dgx_tree()`` is tests/tools/dgx_tree.py (the
DGX A100-class host, from public captures), whose ``write_tree(dir)`` lays it out."""

from __future__ import annotations

import importlib.util
import os

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")


def load_dgx_tree():
    spec = importlib.util.spec_from_file_location("dgx_tree", os.path.join(TOOLS, "dgx_tree.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
