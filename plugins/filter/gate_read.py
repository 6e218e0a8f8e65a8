# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gate_read``: what the preflight gate read for a later stage (its libvirt read, or its check of
the stage's call), while nothing has changed the host since; an empty dict once a stage did, so
that the later stage reads and calls on its own. (What a stage publishes from the result it takes
is the action stage_result's.)"""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

__metaclass__ = type


def _flag(value, name, filter_name="gate_read"):
    """A flag as Jinja hands it over (a bool, or its text); unset (none, "") is false."""
    try:
        return boolean(value, strict=True) if value is not None and value != "" else False
    except TypeError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.%s: %s: %s" % (filter_name, name, exc))


def gate_read(read, key=None, changed=None):
    """``read`` (``preflight_libvirt_read`` or ``preflight_stage_checks_read``), or its ``key``
    (a stage's check), unless one of ``changed`` (the earlier stages' "changed the host" flags)
    is true: then {}."""
    if read is None:
        return {}
    if not isinstance(read, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.gate_read: expected what the preflight gate read (a dict), got %s"
                                 % type(read).__name__)
    if not isinstance(changed, (list, tuple)) and changed is not None:
        raise AnsibleFilterError("gpuvirt.tenancy.gate_read: changed is a list of the earlier stages' flags, got %r"
                                 % (changed,))
    if any(_flag(flag, "changed", "gate_read") for flag in changed or []):
        return {}
    part = read.get(key) if key else read
    return part if isinstance(part, dict) else {}


class FilterModule:
    """The gate's reads for the later stages."""

    def filters(self):
        return {"gate_read": gate_read}
