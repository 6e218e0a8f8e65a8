# -*- coding: utf-8 -*-
"""Interrupted runs: a :class:`Host` whose every change of the machine (a sysfs write, a configfs
mkdir/rmdir, a file write/removal/link, a program that changes state) first ticks a
:class:`Countdown`, which raises :class:`Interrupted` before the Nth one, as a killed run or a
lost SSH connection would stop a module between two steps.

:func:`converges_from_every_interruption` runs a module once uninterrupted (counting its
changes), then for each N on a fresh world: interrupted before change N, run again to the end,
and run once more; the final state must equal the uninterrupted run's, and the last run must
report ``changed: false``.
"""

from __future__ import annotations

import os

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import FileWriter, Host


class Interrupted(BaseException):
    """The run stopped here (a BaseException: no error handler of the module catches it)."""


class Countdown:
    """Counts the changes a run makes; raises :class:`Interrupted` before change ``at`` (1-based)."""

    def __init__(self, at=None):
        self.at = at
        self.done = []

    def tick(self, what):
        if self.at is not None and len(self.done) + 1 == self.at:
            raise Interrupted("before change %d: %s" % (self.at, what))
        self.done.append(what)


class InterruptingKernel:
    def __init__(self, kernel, countdown):
        self.kernel, self.countdown = kernel, countdown

    def write(self, host_path, value):
        self.countdown.tick(("write", host_path, value))
        return self.kernel.write(host_path, value)

    def mkdir(self, host_path):
        self.countdown.tick(("mkdir", host_path))
        return self.kernel.mkdir(host_path)

    def rmdir(self, host_path):
        self.countdown.tick(("rmdir", host_path))
        return self.kernel.rmdir(host_path)


class InterruptingFiles(FileWriter):
    def __init__(self, countdown):
        self.countdown = countdown

    def write(self, real_path, content, mode=None, backup=False):
        self.countdown.tick(("file", real_path))
        return super().write(real_path, content, mode=mode, backup=backup)

    def remove(self, real_path):
        self.countdown.tick(("remove", real_path))
        return super().remove(real_path)

    def symlink(self, target, real_path):
        self.countdown.tick(("symlink", real_path))
        return super().symlink(target, real_path)


class InterruptingCommands:
    """The host's command runner; a call ``changes(argv)`` calls a change is ticked first."""

    def __init__(self, commands, countdown, changes):
        self.commands, self.countdown, self.changes = commands, countdown, changes

    def which(self, name, required=False, hint=None):
        return self.commands.which(name, required=required, hint=hint)

    def run(self, argv, check=True, data=None):
        if self.changes(list(argv)):
            self.countdown.tick(("run",) + tuple(argv))
        return self.commands.run(argv, check=check, data=data)


class InterruptingHost(Host):
    """A :class:`Host` whose kernel, files and state-changing commands tick ``countdown``."""

    def __init__(self, root, countdown, changes=lambda argv: False, commands=None, kernel=None):
        super().__init__(root, commands=commands, kernel=kernel)
        self.countdown, self.changes = countdown, changes
        self.kernel = InterruptingKernel(self.kernel, countdown)
        self.files = InterruptingFiles(countdown)
        if commands is not None:
            self.commands = InterruptingCommands(commands, countdown, changes)

    def bind(self, module):
        if self.commands is None:
            super().bind(module)
            self.commands = InterruptingCommands(self.commands, self.countdown, self.changes)
        return self


def tree_state(root, skip=()):
    """{relative path: file text or '-> link target'} of every file and link under ``root``
    (directories by their entries), leaving out paths that start with one of ``skip``."""
    state = {}
    for directory, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            if any(rel.startswith(prefix) for prefix in skip):
                continue
            if os.path.islink(path):
                state[rel] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    state[rel] = handle.read()
            else:
                state[rel] = "dir"
    return state


def converges_from_every_interruption(build, run, state):
    """``build(name)`` -> a fresh world; ``run(world, countdown)`` -> the module's result;
    ``state(world)`` -> what the host holds. Returns the number of changes an uninterrupted
    run makes (each one interrupted in turn)."""
    world = build("uninterrupted")
    countdown = Countdown()
    first = run(world, countdown)
    assert not first.get("failed"), first
    assert first["changed"] is True, first
    wanted = state(world)
    again = run(world, Countdown())
    assert again["changed"] is False and not again.get("failed"), again
    changes = list(countdown.done)
    assert changes, "the uninterrupted run changed nothing through the host"
    for number in range(1, len(changes) + 1):
        world = build("stopped-before-%d" % number)
        try:
            stopped = run(world, Countdown(at=number))
        except Interrupted:
            pass
        else:
            raise AssertionError("change %d (%r) was not reached: %r" % (number, changes[number - 1], stopped))
        rerun = run(world, Countdown())
        assert not rerun.get("failed"), (number, changes[number - 1], rerun)
        assert state(world) == wanted, "stopped before %r, the re-run ends elsewhere" % (changes[number - 1],)
        last = run(world, Countdown())
        assert last["changed"] is False and not last.get("failed"), (number, changes[number - 1], last)
    return len(changes)
