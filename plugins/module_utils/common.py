# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers shared by the modules: input errors, atomic writes, commands."""

from __future__ import absolute_import, division, print_function

import io
import os
import shutil
import tempfile
import time

__metaclass__ = type


class InputError(ValueError):
    """A bad module input. The message names the input and the fix; nothing was changed."""


class StateError(RuntimeError):
    """The host is not in a state where the change can be made safely; nothing was changed."""


def atomic_write(path, content, mode=None, backup=False):
    """Write ``content`` to ``path`` through a temporary file in the same directory and a
    rename, so a reader never sees half a file. Returns the backup path or None."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    backup_path = None
    if backup and os.path.exists(path):
        backup_path = "%s.%s~" % (path, time.strftime("%Y-%m-%d@%H:%M:%S"))
        shutil.copy2(path, backup_path)
    if mode is None:
        mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path))
    try:
        with io.open(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return backup_path


def read_text(path, default=None):
    try:
        with io.open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except (OSError, IOError):
        return default


def run_command(module, argv, check=True):
    """Deprecated: features run programs through ``host.commands`` (host.py). Run an argument list with ``LC_ALL=C`` (parsable output); fail the module with the
    command and its stderr when ``check`` and the exit status is non-zero."""
    rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})
    if check and rc != 0:
        module.fail_json(msg="command failed (rc=%d): %s: %s" % (rc, " ".join(argv), (err or out).strip()),
                         rc=rc, stdout=out, stderr=err, cmd=argv)
    return rc, out, err
