# -*- coding: utf-8 -*-
"""A command runner for a test :class:`Host`: programs answer from data, and every call is
recorded, so a test states the commands it expects as a list and asserts on ``calls``."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import CommandError
from fakes.paths import STANDINS  # pylint: disable=import-error


class Reply:
    """What one command answers: ``argv`` is matched word by word, ``*`` globs allowed, and
    a pattern shorter than the call matches its prefix when it ends in ``...``."""

    def __init__(self, argv, rc=0, out="", err="", times=None, effect=None):
        self.argv = list(argv)
        self.rc, self.out, self.err = rc, out, err
        self.times = times  # None: any number of calls
        self.effect = effect  # callable(argv): a side effect on the fake tree (a file the tool writes)

    def matches(self, argv):
        pattern = self.argv
        if pattern and pattern[-1] == "...":
            pattern = pattern[:-1]
            argv = argv[:len(pattern)]
        return len(pattern) == len(argv) and all(fnmatch.fnmatchcase(a, p) for a, p in zip(argv, pattern))


class RecordedCommands:
    """``programs``: names found on PATH (``/usr/bin/<name>`` is returned); ``replies``:
    :class:`Reply` objects or tuples ``(argv, rc, out, err)``; argv starts with the program's
    name, not its path. A call nothing answers fails the test with the call shown."""

    def __init__(self, programs=(), replies=()):
        self.programs = set(programs)
        self.replies = [r if isinstance(r, Reply) else Reply(*r) for r in replies]
        for reply in self.replies:
            self.programs.add(reply.argv[0])
        self.calls = []

    def which(self, name, required=False, hint=None):
        if name in self.programs:
            return "/usr/bin/" + name
        if required:
            raise StateError("%s was not found on PATH%s; nothing was changed" % (name, ": " + hint if hint else ""))
        return None

    def run(self, argv, check=True, data=None):
        argv = [a.rsplit("/", 1)[-1] if i == 0 else a for i, a in enumerate(argv)]
        self.calls.append(argv)
        for reply in self.replies:
            if reply.times == 0 or not reply.matches(argv):
                continue
            if reply.times is not None:
                reply.times -= 1
            if reply.effect:
                reply.effect(argv)
            if check and reply.rc != 0:
                raise CommandError(argv, reply.rc, reply.out, reply.err)
            return reply.rc, reply.out, reply.err
        raise AssertionError("unexpected command: %r (replies: %r)" % (argv, [r.argv for r in self.replies]))

    def ran(self, *prefix):
        """The recorded calls that start with ``prefix``."""
        return [c for c in self.calls if c[:len(prefix)] == list(prefix)]


def standin_reply(name):
    """A reply to every call of ``name`` that the stand-in executable of fakes/standins gives
    (its state in the files its environment names, as the stand-in says)."""
    reply = Reply([name, "..."])

    def answer(argv):
        done = subprocess.run([sys.executable, os.path.join(STANDINS, name)] + argv[1:],
                              capture_output=True, text=True, check=False)
        reply.rc, reply.out, reply.err = done.returncode, done.stdout, done.stderr
    reply.effect = answer
    return reply
