# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A JSON report file on the controller (the preflight's report), written atomically and only when
its content differs, by this action itself: ansible.builtin.copy would run two modules (stat, copy)
per host, about as much CPU as the whole gate's call of a preview host. A report is not a change
to the host: the result is never ``changed``. The action takes the report as data and writes its
JSON itself: a template that renders JSON text is turned back into a dict by older ansible-core
(2.16), so the text would not be what the file gets."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase


def report_text(data):
    """The report as the file holds it: JSON, two-space indented, keys sorted, a final newline (as
    ansible.builtin.to_nice_json(indent=2) writes it)."""
    return json.dumps(data, indent=2, sort_keys=True, separators=(",", ": "), default=str) + "\n"


def write_report(path, content, mode=0o644):
    """Write ``content`` (text) to ``path`` atomically, creating its directory; (written, error)."""
    data = to_bytes(content)
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False, None
    except (FileNotFoundError, NotADirectoryError):
        pass  # no report yet (or no directory): the write below makes it, or names why not
    except OSError as exc:
        return False, "dest: %s cannot be read (%s): give a writable report directory" % (path, exc.strerror)
    folder = os.path.dirname(path) or "."
    temp = None
    try:
        os.makedirs(folder, mode=0o755, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
        return True, None
    except OSError as exc:
        if temp and os.path.exists(temp):
            os.unlink(temp)
        return False, "dest: %s cannot be written (%s): give a writable report directory" % (path, exc.strerror)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("data", "dest"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        data, dest = self._task.args.get("data"), self._task.args.get("dest")
        if not isinstance(dest, str) or not os.path.isabs(dest):
            return dict(result, failed=True, changed=False,
                        msg="dest: give the report file's absolute path on the controller; got %r" % (dest,))
        if not isinstance(data, dict):
            return dict(result, failed=True, changed=False,
                        msg="data: give the report (a dict); got %s" % type(data).__name__)
        written, error = write_report(dest, report_text(data))
        if error:
            return dict(result, failed=True, changed=False, msg=error)
        return dict(result, changed=False, written=written, dest=to_text(dest))
