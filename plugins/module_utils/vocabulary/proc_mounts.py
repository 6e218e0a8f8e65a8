# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rows of ``/proc/mounts`` (fstab format, proc(5)): source, mount point, type, options.
The kernel writes a blank, tab, newline and backslash in a field as the octal escapes
``\\040``, ``\\011``, ``\\012`` and ``\\134`` (fs/proc_namespace.c, mangle()); they are undone."""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(field):
    """A field as the kernel escaped it -> its text."""
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def mount_rows(text):
    """[{source, mountpoint, fstype, options: [..]}] of ``/proc/mounts`` text, in order; a line
    with fewer than three fields is skipped."""
    rows = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        rows.append({"source": unescape(fields[0]), "mountpoint": unescape(fields[1]), "fstype": fields[2],
                     "options": fields[3].split(",") if len(fields) > 3 else []})
    return rows
