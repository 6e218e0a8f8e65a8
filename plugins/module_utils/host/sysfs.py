# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only access to sysfs and procfs under a root directory.

Every reader in this collection goes through :class:`Sysfs`, so that tests can point it
at a captured tree and so that a file that vanishes while being read (a VF removed, a
device unplugged) yields ``None`` instead of an exception. Under a root other than ``/``,
a path that resolves outside the root (``..`` out of it, a symlink in the tree that leads
out, such as an absolute sysfs link in a capture) reads as missing, and :meth:`Sysfs.inside`
refuses it for a write: nothing reads or changes the machine the tree was copied to.
"""

from __future__ import absolute_import, division, print_function

import errno
import glob
import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type


class Sysfs:
    """Paths are given as absolute host paths (``/sys/bus/pci/devices``) and resolved
    under ``root``."""

    def __init__(self, root="/"):
        self.root = os.path.abspath(root or "/")
        self.real_root = os.path.realpath(self.root)
        # resolved directories (joined path -> real path): a reader resolves the same device
        # directories thousands of times. Only existing directories are kept; a directory that
        # goes away (a VF removed) resolves to a path that no longer exists, and reads as missing.
        self._real_dirs = {}

    def path(self, host_path):
        """Return the real filesystem path of a host path under the root, as joined (not
        checked: :meth:`inside` checks)."""
        rel = host_path.lstrip("/")
        return os.path.join(self.root, rel) if rel else self.root

    def contains(self, real):
        """Whether the real path ``real`` is the root or under it (always, for the root ``/``)."""
        if self.real_root == os.sep:
            return True
        return real == self.real_root or real.startswith(self.real_root + os.sep)

    def escape(self, host_path, follow=True):
        """Where a host path leads outside the root (the resolved real path), or None when it
        stays inside. With ``follow`` false, the last component is not resolved (a link that
        is itself removed or made, not written through)."""
        if self.real_root == os.sep:
            return None
        joined = self.path(host_path)
        parent, name = os.path.split(joined)
        if name in ("", ".", ".."):
            real = os.path.realpath(joined)
        else:
            real = os.path.join(self._real_dir(parent), name)
            if follow and os.path.islink(real):
                real = os.path.realpath(real)
        return None if self.contains(real) else real

    def _real_dir(self, joined):
        real = self._real_dirs.get(joined)
        if real is None:
            real = os.path.realpath(joined)
            if os.path.isdir(real):
                self._real_dirs[joined] = real
        return real

    def inside(self, host_path, option=None, follow=True):
        """The real path of ``host_path`` under the root, refused with an :class:`InputError`
        naming ``option`` when it resolves outside the root: what every write goes through."""
        outside = self.escape(host_path, follow=follow)
        if outside is not None:
            raise InputError("%s: %s resolves to %s, outside the root %s (a '..' or a symlink that leads out of "
                             "the tree); give a path that stays inside the root, or replace the link; nothing was "
                             "changed" % (option or "path", host_path, outside, self.root))
        return self.path(host_path)

    def _readable(self, host_path, follow=True):
        """The real path to read, or None when it leads outside the root."""
        return None if self.escape(host_path, follow=follow) is not None else self.path(host_path)

    def exists(self, host_path):
        real = self._readable(host_path, follow=False)
        return real is not None and os.path.lexists(real)

    def isdir(self, host_path):
        real = self._readable(host_path)
        return real is not None and os.path.isdir(real)

    def read(self, host_path, default=None):
        """Text of a file with surrounding whitespace removed; ``default`` when it is
        missing, unreadable, or the kernel refuses the read (EINVAL on empty GID slots)."""
        real = self._readable(host_path)
        if real is None:
            return default
        try:
            with open(real, "r", encoding="utf-8", errors="replace") as handle:
                return handle.read().strip()
        except (OSError, IOError):
            return default

    def read_bytes(self, host_path):
        """The bytes of a file as they are (an EFI variable), or None when it is missing or
        unreadable."""
        real = self._readable(host_path)
        if real is None:
            return None
        try:
            with open(real, "rb") as handle:
                return handle.read()
        except (OSError, IOError):
            return None

    def read_int(self, host_path, default=None, base=10):
        text = self.read(host_path)
        if text is None or text == "":
            return default
        try:
            return int(text, base)
        except ValueError:
            return default

    def read_error(self, host_path):
        """``None`` when the file reads, else the errno name (``EINVAL``, ``ENOENT``)."""
        real = self._readable(host_path)
        if real is None:
            return "ENOENT"
        try:
            with open(real, "r", encoding="utf-8", errors="replace") as handle:
                handle.read()
            return None
        except (OSError, IOError) as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))

    def read_keys(self, host_path, keys):
        """The lines of a ``key: value`` file (/proc/cpuinfo, a node's meminfo) whose key ends in one
        of ``keys`` (``Node 0 MemTotal`` ends in ``MemTotal``), the first of each, as they read; ""
        when the file is missing. A reader that uses only these lines reads only them: the others
        (``cpu MHz``, ``MemFree``) change between two reads of a host where nothing else does."""
        wanted = set(keys)
        lines = []
        for line in (self.read(host_path) or "").splitlines():
            key = line.partition(":")[0].split()
            if key and key[-1] in wanted:
                wanted.discard(key[-1])
                lines.append(line)
                if not wanted:
                    break
        return "\n".join(lines)

    def read_table(self, host_path, counters):
        """The text of a whitespace-separated table (``/proc/net/route``, ``ipv6_route``) with the
        fields at the column indexes of ``counters`` read as ``0``, each line's fields joined by one
        space; "" when the file is missing. A route's reference and use counts change with the
        traffic, between two reads of a host where nothing else does, and no reader uses them."""
        lines = []
        for line in (self.read(host_path) or "").splitlines():
            fields = line.split()
            for index in counters:
                if index < len(fields):
                    fields[index] = "0"
            lines.append(" ".join(fields))
        return "\n".join(lines)

    def listdir(self, host_path):
        """Sorted entries of a directory; empty when it does not exist."""
        real = self._readable(host_path)
        if real is None:
            return []
        try:
            return sorted(os.listdir(real))
        except (OSError, IOError):
            return []

    def glob(self, host_pattern):
        """Sorted host paths that match a glob pattern (``/boot/efi/EFI/*/grub.cfg``) under the root."""
        prefix = self.root.rstrip(os.sep)
        return sorted(match[len(prefix):] for match in glob.glob(self.path(host_pattern))
                      if self.contains(os.path.realpath(match)))

    def readlink_name(self, host_path):
        """Last component of a symlink's target (``driver`` -> ``vfio-pci``), or None (also
        for a link that leads outside the root)."""
        real = self._readable(host_path, follow=False)
        if real is None:
            return None
        try:
            return os.path.basename(os.readlink(real))
        except (OSError, IOError):
            return None

    def link_target(self, host_path):
        """What a symlink names, with no link in it resolved: one ``readlink``, where
        :meth:`realpath` looks up every component (a ``/proc/PID/fd/N`` link names its file
        outright, ``/dev/vfio/12``). An absolute target comes back as a host path; a relative
        one as it reads (the kernel's pseudo-files, ``socket:[123]``, are such). None when the
        path is no link, or names a place outside the root."""
        real = self._readable(host_path, follow=False)
        if real is None:
            return None
        try:
            target = os.readlink(real)
        except (OSError, IOError):
            return None
        if not target.startswith(os.sep) or self.real_root == os.sep:
            return target
        for prefix in (self.real_root, self.root):
            if target == prefix:
                return "/"
            if target.startswith(prefix + os.sep):
                return target[len(prefix):]
        return None

    def fd_links(self, prefix):
        """``[pid, target]`` for each open file of each process (a ``/proc/PID/fd/N`` link, read
        with :meth:`link_target`) whose target starts with ``prefix`` (``/dev/vfio/``), by pid and
        descriptor: who holds such a file now, without the links of every other process (the
        reader's own among them), which differ from one read to the next."""
        held = []
        for entry in self.listdir("/proc"):
            if entry.isdigit():
                for fd in self.listdir("/proc/%s/fd" % entry):
                    target = self.link_target("/proc/%s/fd/%s" % (entry, fd)) or ""
                    if target.startswith(prefix):
                        held.append([int(entry), target])
        return sorted(held)

    def environ_field(self, name, index, pid=None):
        """Field ``index`` (whitespace-separated, from 0) of the environment variable ``name`` of
        this session, or None: this process' environment (on the live machine), else that of the
        nearest ancestor of ``pid`` (default this process) that has it, from ``/proc/PID/environ``
        (become methods reset the environment). One field, not the whole value: ``SSH_CONNECTION``'s
        server address stays while its client port changes with each connection."""
        value = os.environ.get(name) if self.real_root == os.sep else None
        pid, seen = os.getpid() if pid is None else pid, set()
        while not value and pid and pid > 1 and pid not in seen:
            seen.add(pid)
            for item in (self.read("/proc/%d/environ" % pid, "") or "").split("\0"):
                if item.startswith(name + "="):
                    value = item.split("=", 1)[1]
                    break
            match = re.search(r"^PPid:\s*(\d+)", self.read("/proc/%d/status" % pid, "") or "", re.M)
            pid = int(match.group(1)) if match else None
        fields = (value or "").split()
        return fields[index] if len(fields) > index else None

    def realpath(self, host_path):
        """Resolved host path of a link, expressed relative to the root again
        (``/sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0``), or None (also when it
        resolves outside the root)."""
        real = os.path.realpath(self.path(host_path))
        if not os.path.lexists(real) or not self.contains(real):
            return None
        if self.real_root == os.sep:
            return real
        if real == self.real_root:
            return "/"
        return real[len(self.real_root):]
