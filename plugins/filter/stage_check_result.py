# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``stage_check_result``: the preflight gate's check of a host stage, when it answers exactly the
call the stage would make now. The logic lives in module_utils ``stage_checks``."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean


__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.


def stage_check_result(check, options):
    """The gate's check result for ``options`` ({} when it does not answer them: no check, other
    options, an error, or something to change)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils import stage_checks  # pylint: disable=import-outside-toplevel
    if check is not None and not isinstance(check, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.stage_check_result: expected one stage of preflight_info's stage_checks "
                                 "(or {}), got %s" % type(check).__name__)
    if not isinstance(options, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.stage_check_result: expected the dict of the stage call's options, got %s"
                                 % type(options).__name__)
    return stage_checks.check_result(check or {}, options)


def preflight_stage_calls(calls, preview=False):
    """The host stages' calls the preflight gate checks: none in a preview (each stage shows its
    own diff there), else each stage's call that asks something (an empty call asks nothing)."""
    if not isinstance(calls, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.preflight_stage_calls: expected a dict stage -> the options of its call, got %s"
                                 % type(calls).__name__)
    if boolean(preview, strict=False):
        return {}
    return dict((stage, call) for stage, call in calls.items() if call)


def vfio_stage_call(options):
    """The SR-IOV/VFIO stage's vfio_bind call: its options, or {} when they name no PF, GPU or
    device (the inventory asks nothing of the stage)."""
    if not isinstance(options, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.vfio_stage_call: expected the dict of vfio_bind's options, got %s"
                                 % type(options).__name__)
    return options if any(options.get(key) for key in ("sriov_pfs", "gpus", "devices")) else {}


class FilterModule:
    """Stage check filters."""

    def filters(self):
        return {"stage_check_result": stage_check_result, "preflight_stage_calls": preflight_stage_calls,
                "vfio_stage_call": vfio_stage_call}
