# -*- coding: utf-8 -*-
"""The planner's previous assignments (placement/existing.py): the CPUs their pins name, and a
previous node and CPUs preferred when a tenant is re-planned."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import Planner
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.allocation import State
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.existing import GROW_LATER, pinned_cpus

from placement_topologies import synthetic  # pylint: disable=import-error


def test_pinned_cpus_dict_or_list():
    assert pinned_cpus({"vcpu_pins": {"0": "3", "1": "5"}}, 8) == [3, 5]
    assert pinned_cpus({"vcpu_pins": ["1", "2-3"]}, 8) == [1, 2, 3]
    assert pinned_cpus({}, 8) == []


def test_growth_waits_and_prefer_reads_the_old_assignment():
    planner = Planner(synthetic(2, [4, 4], 1, [0, 0], [0, 0], [512, 512]), {"smt": "threads"})
    placement = planner.plan([{"name": "t", "vcpus": 2, "memory_mb": 512}])["placements"]["t"]
    tenant = planner._tenants([{"name": "t", "vcpus": 3, "memory_mb": 512}])[0]
    state = State(planner.host, planner.reserved)
    assert planner._existing(state, tenant, placement) == (None, GROW_LATER)
    grown, why = planner._existing(state, tenant, placement, grow=True)
    assert why is None and grown["resized_from"] == 2 and grown["numa_node"] == placement["numa_node"]
    assert [grown["vcpu_pins"][v] for v in ("0", "1")] == [placement["vcpu_pins"][v] for v in ("0", "1")]
    assert planner._prefer(placement) == {"node": placement["numa_node"], "cpus": set(placement["vcpu_pins"].values())}
    assert planner._prefer("not a dict") == {}
