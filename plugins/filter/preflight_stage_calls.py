# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``preflight_stage_calls``: the host stages' calls the preflight gate checks in its one call;
``vfio_stage_call``: the SR-IOV/VFIO stage's call, or none. A stage takes the gate's check as its
call's result through the action ``gate_check``."""

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


def vfio_stage_call(options):
    """The SR-IOV/VFIO stage's vfio_bind call: its options, or {} when they name no PF, GPU or
    device (the inventory asks nothing of the stage)."""
    if not isinstance(options, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.vfio_stage_call: expected the dict of vfio_bind's options, got %s"
                                 % type(options).__name__)
    return options if any(options.get(key) for key in ("sriov_pfs", "gpus", "devices")) else {}


class FilterModule:
    """Stage call filters."""

    def filters(self):
        return {"preflight_stage_calls": preflight_stage_calls, "vfio_stage_call": vfio_stage_call}
