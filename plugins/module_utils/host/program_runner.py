# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Programs run as a module's ``run_command`` runs them, in a process that has no AnsibleModule.

:class:`seam.ModuleCommands` asks two things of an AnsibleModule: ``get_bin_path`` and
``run_command``. Two callers have no AnsibleModule: the controller's own run of a module over a
captured tree (``runner.run_here``), and the program that makes a gate's reads again on the host
without loading ``ansible.module_utils.basic`` (``host/read_again.py``). There, a program must
answer exactly as the module's ``run_command`` would have answered it (the gate's kept digests
were made through ``run_command``), so this class follows ansible-core's
``AnsibleModule.run_command`` for an argument list (``lib/ansible/module_utils/basic.py``, 2.16 to
2.21): ``~`` and ``$VAR`` expanded in each argument, None arguments dropped, the environment copied
and updated, the AnsiballZ entries taken out of ``PYTHONPATH``, stdin a pipe only when there is
data (with a newline added unless it is binary), output decoded as UTF-8 with surrogate escapes;
and ``common/process.py``'s ``get_bin_path``: PATH, then ``/sbin``, ``/usr/sbin`` and
``/usr/local/sbin``, the first existing executable that is no directory. Standard library only.
"""

from __future__ import absolute_import, division, print_function

import os
import stat
import subprocess

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError

__metaclass__ = type

SBIN_PATHS = ("/sbin", "/usr/sbin", "/usr/local/sbin")
# what AnsibleModule.run_command takes out of PYTHONPATH: its own AnsiballZ payload's paths
ANSIBALLZ_PATH_ENDINGS = ("/ansible_modlib.zip", "/debug_dir")


def _bytes(text):
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")


def _text(data):
    return data.decode("utf-8", "surrogateescape")


class ProgramRunner:
    """``get_bin_path`` and ``run_command`` of an AnsibleModule, for a process without one."""

    def get_bin_path(self, name):
        """The path of the executable ``name`` on PATH, then in the sbin directories, or None."""
        paths = os.environ.get("PATH", "").split(os.pathsep)
        paths += [path for path in SBIN_PATHS if path not in paths and os.path.exists(path)]
        for directory in paths:
            path = os.path.join(directory, name) if directory else None
            if path and os.path.exists(path) and not os.path.isdir(path) and \
                    os.stat(path).st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
                return path
        return None

    def run_command(self, argv, environ_update=None, data=None, binary_data=False):
        """``(rc, stdout, stderr)`` of the argument list ``argv``; a program that cannot be started
        is a :class:`StateError` naming it (where the module's run_command fails the module)."""
        args = [_bytes(os.path.expanduser(os.path.expandvars(arg))) for arg in argv if arg is not None]
        env = dict(os.environ, **dict(environ_update or {}))
        if "PYTHONPATH" in env:
            kept = [path for path in env["PYTHONPATH"].split(":") if path and not path.endswith(ANSIBALLZ_PATH_ENDINGS)]
            if kept:
                env["PYTHONPATH"] = ":".join(kept)
        if data and not binary_data:
            data += "\n"
        try:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE if data else None, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, close_fds=True, env=env)
        except OSError as exc:
            raise StateError("%s: %s" % (" ".join(str(arg) for arg in argv), exc))
        out, err = proc.communicate(_bytes(data) if data else None)
        return proc.returncode, _text(out), _text(err)
