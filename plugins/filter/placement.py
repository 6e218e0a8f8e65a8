# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuvirt.tenancy.plan_tenants``: the placement planner for playbooks."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import PlacementInputError, plan_tenants


def _plan_tenants(topology, tenants, policy=None):
    try:
        return plan_tenants(topology, tenants, policy or {})
    except PlacementInputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.plan_tenants: %s" % exc) from exc


class FilterModule:
    """Placement planner filters."""

    def filters(self):
        return {"plan_tenants": _plan_tenants}
