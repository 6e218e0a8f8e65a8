# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gate_plan``: the plan the preflight gate's check of the tenants stage made on the host, where
it is the plan of the host as the host stages will leave it, so that the preflight report does not
plan the same tenants again on the controller."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError


__metaclass__ = type


def gate_plan(stage_checks):
    """The tenants check's plan, or {} when it is not the plan of the host as the stages leave
    it: no tenants check, an error, no plan in its result, or (outside a preview, whose check
    plans on the host as the stages leave it) an earlier stage's check that errs or would
    change the host (the check then planned on the host as it is)."""
    if stage_checks is None:
        return {}
    if not isinstance(stage_checks, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.gate_plan: expected preflight_info's stage_checks (a dict), got %s"
                                 % type(stage_checks).__name__)
    tenants = stage_checks.get("tenants") or {}
    plan = (tenants.get("result") or {}).get("plan") if not tenants.get("error") else None
    if not isinstance(plan, dict):
        return {}
    if (tenants.get("options") or {}).get("preview") is None:
        for stage in ("boot", "sriov_vfio"):
            check = stage_checks.get(stage)
            if check and (check.get("error") or check.get("changed") is not False):
                return {}
    return plan


class FilterModule:
    """Gate plan filter."""

    def filters(self):
        return {"gate_plan": gate_plan}
