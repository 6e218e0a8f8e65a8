# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only access to sysfs and procfs under a root directory.

Every reader in this collection goes through :class:`Sysfs`, so that tests can point it
at a captured tree and so that a file that vanishes while being read (a VF removed, a
device unplugged) yields ``None`` instead of an exception.
"""

from __future__ import absolute_import, division, print_function

import errno
import glob
import os

__metaclass__ = type


class Sysfs:
    """Paths are given as absolute host paths (``/sys/bus/pci/devices``) and resolved
    under ``root``."""

    def __init__(self, root="/"):
        self.root = os.path.abspath(root or "/")

    def path(self, host_path):
        """Return the real filesystem path of a host path under the root."""
        rel = host_path.lstrip("/")
        return os.path.join(self.root, rel) if rel else self.root

    def exists(self, host_path):
        return os.path.lexists(self.path(host_path))

    def isdir(self, host_path):
        return os.path.isdir(self.path(host_path))

    def read(self, host_path, default=None):
        """Text of a file with surrounding whitespace removed; ``default`` when it is
        missing, unreadable, or the kernel refuses the read (EINVAL on empty GID slots)."""
        try:
            with open(self.path(host_path), "r", encoding="utf-8", errors="replace") as handle:
                return handle.read().strip()
        except (OSError, IOError):
            return default

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
        try:
            with open(self.path(host_path), "r", encoding="utf-8", errors="replace") as handle:
                handle.read()
            return None
        except (OSError, IOError) as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))

    def listdir(self, host_path):
        """Sorted entries of a directory; empty when it does not exist."""
        try:
            return sorted(os.listdir(self.path(host_path)))
        except (OSError, IOError):
            return []

    def glob(self, host_pattern):
        """Sorted host paths that match a glob pattern (``/boot/efi/EFI/*/grub.cfg``) under the root."""
        prefix = self.root.rstrip(os.sep)
        return sorted(match[len(prefix):] for match in glob.glob(self.path(host_pattern)))

    def readlink_name(self, host_path):
        """Last component of a symlink's target (``driver`` -> ``vfio-pci``), or None."""
        try:
            return os.path.basename(os.readlink(self.path(host_path)))
        except (OSError, IOError):
            return None

    def realpath(self, host_path):
        """Resolved host path of a link, expressed relative to the root again
        (``/sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0``), or None."""
        real = os.path.realpath(self.path(host_path))
        if not os.path.lexists(real):
            return None
        if real == self.root:
            return "/"
        prefix = self.root.rstrip(os.sep) + os.sep
        if self.root != os.sep and not real.startswith(prefix):
            return None
        return "/" + real[len(prefix):] if self.root != os.sep else real
