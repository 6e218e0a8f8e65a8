# -*- coding: utf-8 -*-
"""A command runner for a test :class:`Host` that runs the real programs of this machine
(qemu-img, genisoimage), as the module's runner does on a host: argument lists, ``LC_ALL=C``,
a non-zero exit raises :class:`CommandError`. Every call is recorded; ``programs`` limits which
names ``which`` finds (to test a host without one)."""

from __future__ import annotations

import os
import shutil
import subprocess

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import CommandError


class SystemCommands:
    def __init__(self, programs=None):
        self.programs = None if programs is None else set(programs)
        self.calls = []

    def which(self, name, required=False, hint=None):
        path = shutil.which(name) if self.programs is None or name in self.programs else None
        if path is None and required:
            raise StateError("%s was not found on PATH%s; nothing was changed" % (name, ": " + hint if hint else ""))
        return path

    def run(self, argv, check=True, data=None):
        self.calls.append([os.path.basename(argv[0])] + list(argv[1:]))
        done = subprocess.run(list(argv), input=data, capture_output=True, env=dict(os.environ, LC_ALL="C", LANG="C"),
                              check=False)
        out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
        if check and done.returncode != 0:
            raise CommandError(argv, done.returncode, out, err)
        return done.returncode, out, err

    def ran(self, *prefix):
        return [c for c in self.calls if c[:len(prefix)] == list(prefix)]
