# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files under the root that bring VFs and driver bindings back at boot (a config file
each, the restore script of restore/script.py, a systemd unit each), shared by sriov_vfs and
vfio_bind. A change is a tuple ``(host_path, before_text, after_text)``; an ``after`` of
None removes the file.

Within one module call (one :class:`Host`), a file planned by an earlier step (an earlier PF
of sriov_vfs' ``pfs``) is read as planned, not as it is on disk: a real run writes it after each
step, and check mode, which writes nothing, must show the same end state (every PF in
``/etc/gpuvirt/sriov.json``, not only the last)."""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore


__metaclass__ = type


class BootFiles:
    """``host``: anything with ``path(host_path)`` (a :class:`Host`); each method that plans
    returns a list of changes, :meth:`apply` makes them."""

    def __init__(self, host):
        self.host = host

    def read(self, host_path):
        """The text of a boot file as this call leaves it so far: as planned by an earlier step
        of the call, else as it is under the root (None: missing)."""
        planned = getattr(self.host, "planned_files", None)
        if planned is not None and host_path in planned:
            return planned[host_path]
        return self.host.read_text(host_path, "persist")

    def load_json(self, host_path, default):
        text = self.read(host_path)
        if not text:
            return default
        try:
            value = json.loads(text)
        except ValueError:
            return default
        return value if isinstance(value, dict) else default

    def change(self, host_path, after):
        before = self.read(host_path)
        if before == after:
            return []
        planned = getattr(self.host, "planned_files", None)
        if planned is not None:
            planned[host_path] = after
        return [(host_path, before, after)]

    def service_changes(self, unit, unit_text):
        changes = self.change(restore.SCRIPT_PATH, restore.SCRIPT)
        changes += self.change("%s/%s" % (restore.UNIT_DIR, unit), unit_text)
        return changes

    def wants_link_missing(self, unit):
        return not self.host.lexists("%s/%s" % (restore.WANTS_DIR, unit), "persist")

    def apply(self, changes, enable_unit=None):
        files = self.host.files
        for host_path, _before, after in changes:
            path = self.host.path(host_path, "persist", follow=after is not None)
            if after is None:
                files.remove(path)
                continue
            files.makedirs(os.path.dirname(path))
            files.write(path, after, mode=0o755 if host_path == restore.SCRIPT_PATH else 0o644)
        if enable_unit and self.wants_link_missing(enable_unit):
            link = self.host.path("%s/%s" % (restore.WANTS_DIR, enable_unit), "persist", follow=False)
            files.makedirs(os.path.dirname(link))
            files.symlink("%s/%s" % (restore.UNIT_DIR, enable_unit), link)


def add_diffs(diff, changes):
    """Each planned file change into the run's :class:`Diff`."""
    for host_path, before, after in changes:
        diff.add(host_path, before, after)
