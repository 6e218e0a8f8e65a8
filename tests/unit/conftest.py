# -*- coding: utf-8 -*-
"""Shared pytest helpers: import path for the collection, running a module's ``main()``
in-process with given arguments (returning its JSON result), and a libvirt connection on
libvirt's built-in test driver."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys

import pytest

UNIT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(UNIT_DIR, "..", ".."))
COLLECTIONS = os.path.join(REPO_ROOT, ".build", "collections")
FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")

# The tests import their kit as top-level names (``fakes``, ``conftest``, ``built_collection``,
# ``placement_*``). pytest.ini puts this directory on the path; ``ansible-test units`` runs pytest
# with its own configuration from the collection's path, so this conftest (which pytest loads
# before any test module) puts it there too.
for _path in (UNIT_DIR, COLLECTIONS):
    if _path not in sys.path:
        sys.path.insert(0, _path)


class ModuleExit(Exception):
    """Raised instead of sys.exit by exit_json / fail_json."""

    def __init__(self, result, failed):
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


def run_module(main, args, check_mode=False, diff=False, host=None):
    """Run a module's main() with ``args``; return its result dict (``failed`` set on
    fail_json). ``host``: the injected :class:`Host` (a test tree, recorded commands, a fake
    kernel); modules built on the runner take it as ``main(host=...)``."""
    # pylint: disable=import-outside-toplevel
    from ansible.module_utils import basic

    full = dict(args)
    full["_ansible_check_mode"] = check_mode
    full["_ansible_diff"] = diff
    full.setdefault("_ansible_remote_tmp", "/tmp")
    full.setdefault("_ansible_keep_remote_files", False)

    from ansible.module_utils.common import warnings as module_warnings
    module_warnings._global_warnings.clear()  # pylint: disable=protected-access
    # a module runs on the managed host: its warnings go into its result, even when an earlier
    # test loaded controller code into this process (ansible-core 2.19 tells them apart)
    internal = _module_internal()
    was_controller = internal.is_controller if internal else None
    if internal:
        internal.is_controller = False

    def exit_json(self, **kwargs):  # pylint: disable=unused-argument
        kwargs.setdefault("changed", False)
        # what module.warn() collected, as the controller shows it
        messages = list(module_warnings.get_warning_messages())
        if messages:
            kwargs.setdefault("warnings", messages)
        raise ModuleExit(json.loads(json.dumps(kwargs, default=str)), False)

    def fail_json(self, msg, **kwargs):  # pylint: disable=unused-argument
        kwargs["msg"] = msg
        kwargs["failed"] = True
        # a failed module's result carries its warnings too, as AnsibleModule's fail_json does
        messages = list(module_warnings.get_warning_messages())
        if messages:
            kwargs.setdefault("warnings", messages)
        raise ModuleExit(json.loads(json.dumps(kwargs, default=str)), True)

    original = (basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json)
    basic.AnsibleModule.exit_json = exit_json
    basic.AnsibleModule.fail_json = fail_json
    try:
        with module_args(full):
            if host is None:
                main()
            else:
                main(host=host)
    except ModuleExit as done:
        return done.result
    finally:
        basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json = original
        if internal:
            internal.is_controller = was_controller
    raise AssertionError("module returned without exit_json or fail_json")


def _module_internal():
    try:
        from ansible.module_utils import _internal  # pylint: disable=import-outside-toplevel
    except ImportError:  # ansible-core before 2.19
        return None
    return _internal


def module_args(args):
    """The module arguments as AnsibleModule reads them: ansible-core 2.19's own helper, or
    the serialized arguments older versions read from ``basic._ANSIBLE_ARGS``."""
    try:
        from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel
    except ImportError:
        return _legacy_module_args(args)
    return patch_module_args(args)


@contextlib.contextmanager
def _legacy_module_args(args):
    from ansible.module_utils import basic  # pylint: disable=import-outside-toplevel
    from ansible.module_utils.common.text.converters import to_bytes  # pylint: disable=import-outside-toplevel
    saved = basic._ANSIBLE_ARGS  # pylint: disable=protected-access
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))  # pylint: disable=protected-access
    try:
        yield
    finally:
        basic._ANSIBLE_ARGS = saved  # pylint: disable=protected-access


@pytest.fixture
def fixtures_dir():
    return FIXTURES


# libvirt's built-in test driver: a real libvirt in process, with a host of 2 NUMA cells (CPUs
# 0-7 and 8-15; CPU maps 8 wide) and page sizes 4K/8K/2M/1G. Its domains live while a connection
# to it is open, so a test that runs a module against it holds one (the ``libvirt_conn`` fixture).
LIBVIRT_TEST_URI = "test:///default"


@pytest.fixture
def libvirt_conn():
    """An open connection to ``LIBVIRT_TEST_URI``. libvirt-python is a test requirement: without
    it this fails, it does not skip."""
    import libvirt  # pylint: disable=import-outside-toplevel
    libvirt.registerErrorHandler(lambda *_: None, None)
    handle = libvirt.open(LIBVIRT_TEST_URI)
    yield handle
    # The driver's state outlives this connection while any other one is open (a module's, a
    # test's): the domains a test made go with it, so the next test finds only the driver's own.
    for domain in handle.listAllDomains(0):
        if domain.name() == "test":
            continue
        if domain.isActive():
            domain.destroy()
        if domain.isPersistent():
            domain.undefine()
    handle.close()


# lab/report.py loaded as a module, its lab directory a temporary one (GPUVIRT_LAB_DIR): tests/unit/tools
@pytest.fixture(name="report")
def fixture_report(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIRT_LAB_DIR", str(tmp_path))
    os.makedirs(tmp_path / "run")
    monkeypatch.syspath_prepend(os.path.join(REPO_ROOT, "lab"))
    spec = importlib.util.spec_from_file_location("lab_report", os.path.join(REPO_ROOT, "lab", "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("lab", None)
