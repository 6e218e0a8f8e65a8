# -*- coding: utf-8 -*-
"""A pytest plugin that finds the collection's file reads that pass the host seam by: loaded into
a test run (``-p fakes.seam_audit``), it wraps the filesystem calls of ``os`` and ``open`` for the
whole run and notes each call made from the collection's ``module_utils`` whose nearest caller (past
the shared helpers of ``vocabulary/common.py``) is outside ``host/``. Every read and stat of the
machine is meant to go through ``host/`` (``Sysfs``, ``Host.read_text``, ``Host.file_target``,
``Host.lexists``, the command runner, the libvirt connection): the one place where a test's fake
root, a captured tree or any other reader of the host can stand in. The calls found go to the file
named by ``GPUVIRT_SEAM_AUDIT`` (JSON: ``[[call, "package/file.py:line function"], ...]``) when
the run ends."""

from __future__ import annotations

import builtins
import io
import json
import os
import sys

MODULE_UTILS = os.sep + os.path.join("plugins", "module_utils") + os.sep
# the helpers the seam itself calls (read_text, file_target, atomic_write): their callers are what counts
HELPERS = os.path.join("vocabulary", "common.py")
SEAM = "host" + os.sep
TESTS = os.sep + "tests" + os.sep
CALLS = ("stat", "lstat", "listdir", "scandir", "readlink", "access")
FOUND = set()


def _place():
    """Where a call comes from: the nearest caller that is the collection's (past the helpers) or a
    test's; None when that is the seam, or a test's (a fake kernel or command runner writing its state)."""
    frame = sys._getframe(2)  # pylint: disable=protected-access
    while frame is not None:
        name = frame.f_code.co_filename
        if TESTS in name:
            return None
        if MODULE_UTILS in name:
            relative = name.split(MODULE_UTILS, 1)[1]
            if relative != HELPERS:
                return None if relative.startswith(SEAM) else "%s:%d %s" % (relative, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def _wrap(owner, attribute, label):
    original = getattr(owner, attribute)

    def audited(*args, **kwargs):
        place = _place()
        if place is not None:
            FOUND.add((label, place))
        return original(*args, **kwargs)

    setattr(owner, attribute, audited)


for _call in CALLS:
    _wrap(os, _call, "os." + _call)
_wrap(builtins, "open", "open")
_wrap(io, "open", "io.open")


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    target = os.environ.get("GPUVIRT_SEAM_AUDIT")
    if target:
        with open(target, "w") as handle:
            json.dump(sorted(FOUND), handle)
