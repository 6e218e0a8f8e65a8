# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One call at a time per root: the modules that read a file, decide, and write it back (the
GRUB defaults file of iommu_grub and hugepages) hold an exclusive lock on their root directory
from their first read to their last write. A second call on the same root waits for the first
and then decides from what the first wrote, so neither loses the other's change; one that waits
longer than :data:`WAIT_S` fails, saying so, with nothing changed.

The lock is ``flock`` on the root directory itself: nothing is created under the root (a
captured tree stays byte for byte as it was), and the kernel releases it when the process ends,
whatever ends it."""

from __future__ import absolute_import, division, print_function

import contextlib
import errno
import fcntl
import os
import time

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError

__metaclass__ = type

# a GRUB edit and its update-grub take seconds; one held longer than this is stuck
WAIT_S = 300
POLL_S = 0.05


@contextlib.contextmanager
def root_lock(root, what, wait_s=None):
    """Hold the exclusive lock of ``root`` (a directory) while the ``with`` block runs; a
    :class:`StateError` naming ``what`` (the module) and the root when another call holds it
    for more than ``wait_s`` seconds (:data:`WAIT_S` unless given)."""
    wait_s = WAIT_S if wait_s is None else wait_s
    handle = os.open(root, os.O_RDONLY)
    try:
        deadline = time.time() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.time() >= deadline:
                raise StateError("%s: another call on root %s has held its lock for %g s (a GRUB edit runs one call at a time "
                                 "per root); nothing was changed. Wait for that call to end and run again"
                                 % (what, root, wait_s))
            time.sleep(POLL_S)
        yield
    finally:
        os.close(handle)
