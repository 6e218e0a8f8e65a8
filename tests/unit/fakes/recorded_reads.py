# -*- coding: utf-8 -*-
"""The host seam's reads recorded: ``RecordingSysfs`` is the seam's reader (``Sysfs``) that keeps
each read it answers, as ``(method, host path, follow)``; ``recording_host`` is a test ``Host``
whose reads (``host.fs``, and ``host.path``: the files a module reads to edit, writes or links)
all go through one. What a reader of the collection reads is then known from the code itself, by
running it, not from a list kept by hand (tests/unit/tools/test_capture_host.py holds the capture
to it)."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host, KernelWriter
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs


class RecordingSysfs(Sysfs):
    """``Sysfs`` that records every read: ``reads`` is a list of ``(method, host path, follow)``
    (``follow`` false: a link read, made or removed itself; ``inside`` is how ``Host.path`` names
    the files a module edits). A method that calls another records both."""

    def __init__(self, root="/"):
        super().__init__(root)
        self.reads = []

    def _record(self, method, host_path, follow=True):
        self.reads.append((method, host_path, follow))

    def inside(self, host_path, option=None, follow=True):
        self._record("inside", host_path, follow)
        return super().inside(host_path, option=option, follow=follow)

    def exists(self, host_path):
        self._record("exists", host_path, False)
        return super().exists(host_path)

    def isdir(self, host_path):
        self._record("isdir", host_path)
        return super().isdir(host_path)

    def read(self, host_path, default=None):
        self._record("read", host_path)
        return super().read(host_path, default)

    def read_bytes(self, host_path):
        self._record("read_bytes", host_path)
        return super().read_bytes(host_path)

    def read_int(self, host_path, default=None, base=10):
        self._record("read_int", host_path)
        return super().read_int(host_path, default, base)

    def read_error(self, host_path):
        self._record("read_error", host_path)
        return super().read_error(host_path)

    def listdir(self, host_path):
        self._record("listdir", host_path)
        return super().listdir(host_path)

    def glob(self, host_pattern):
        self._record("glob", host_pattern)
        return super().glob(host_pattern)

    def readlink_name(self, host_path):
        self._record("readlink_name", host_path, False)
        return super().readlink_name(host_path)

    def link_target(self, host_path):
        self._record("link_target", host_path, False)
        return super().link_target(host_path)

    def realpath(self, host_path):
        self._record("realpath", host_path)
        return super().realpath(host_path)


def recording_host(root, commands=None):
    """A ``Host`` over ``root`` whose reader is a :class:`RecordingSysfs` (``host.fs.reads``);
    its sysfs writes go through the same reader's checks, as a real host's do."""
    host = Host(root, commands=commands)
    host.fs = RecordingSysfs(host.root)
    host.kernel = KernelWriter(host.fs)
    return host
