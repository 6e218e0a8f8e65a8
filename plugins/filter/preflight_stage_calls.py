# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``preflight_stage_calls``: the host stages' calls the preflight gate checks in its one call. A
stage takes the gate's check as its call's result through the action ``gate_check``."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError


__metaclass__ = type


def preflight_stage_calls(calls):
    """The host stages' calls the preflight gate checks: each stage's call that asks something
    (an empty call asks nothing). A preview's too: each stage then shows the gate's check of its
    call, differences included, as its own result."""
    if not isinstance(calls, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.preflight_stage_calls: expected a dict stage -> the options of its call, got %s"
                                 % type(calls).__name__)
    return dict((stage, call) for stage, call in calls.items() if call)


class FilterModule:
    """Stage call filters."""

    def filters(self):
        return {"preflight_stage_calls": preflight_stage_calls}
