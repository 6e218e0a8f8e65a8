# -*- coding: utf-8 -*-
"""The plan_tenants filter: the planner behind a Jinja filter, bad input as a filter error."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.placement import FilterModule

from placement_topologies import LAB_EDU, lab  # pylint: disable=import-error

PLAN = FilterModule().filters()["plan_tenants"]


def test_filter_plans():
    plan = PLAN(lab(pages_2m=(0, 64)), [{"name": "a", "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64}], {"reserved_cpus": "0"})
    assert plan["placements"]["a"]["gpus"] == [LAB_EDU]
    assert plan["placements"]["a"]["numa_node"] == 1


def test_filter_policy_defaults():
    plan = PLAN(lab(pages_2m=(0, 64)), [{"name": "a", "vcpus": 1, "memory_mb": 64}])
    assert plan["placements"]["a"]["numa_node"] == 1


@pytest.mark.parametrize("tenants, policy, message", [
    ([{"name": "a", "vcpus": 1, "memory_mb": 64}], {"numa": "maybe"}, "gpuvirt.tenancy.plan_tenants: policy.numa"),
    ([{"name": "a", "memory_mb": 64}], {}, "vcpus is required"),
])
def test_filter_errors(tenants, policy, message):
    with pytest.raises(AnsibleFilterError, match=message):
        PLAN(lab(), tenants, policy)
