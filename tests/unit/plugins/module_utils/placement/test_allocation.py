# -*- coding: utf-8 -*-
"""The planner's allocation (placement/allocation.py): cores and whole IOMMU groups chosen, and
what is taken kept per node by State."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import Planner
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.allocation import State, choose_cores, pick_units

from placement_topologies import synthetic  # pylint: disable=import-error


def test_choose_cores_the_fewest_in_order():
    cores = [(0, 4), (1, 5), (2, 6)]
    assert choose_cores(cores, 3) == [(0, 4), (1, 5)]
    assert choose_cores(cores, 6) == cores
    assert choose_cores(cores, 7) is None
    assert choose_cores([], 1) is None


def test_choose_cores_odd_tenant_takes_a_one_thread_core():
    # SMT threads offline: cores of one and of two online threads
    cores = [(0, 4), (1,), (2, 6), (3,)]
    assert choose_cores(cores, 3) == [(0, 4), (1,)]
    assert choose_cores(cores, 4) == [(0, 4), (2, 6)]
    assert choose_cores(cores, 6) == [(0, 4), (1,), (2, 6), (3,)]
    assert choose_cores(cores, 7) is None


def test_pick_units_whole_groups_larger_first():
    units = {"a": ("a", "b"), "b": ("a", "b")}
    assert pick_units(["c", "a", "b", "d"], 2, units) == ["a", "b"]
    assert pick_units(["c", "a", "b", "d"], 1, units) == ["c"]
    assert pick_units(["c", "a", "b", "d"], 3, units) == ["a", "b", "c"]
    assert pick_units(["a", "b"], 1, units) is None


def test_state_take_and_copy():
    planner = Planner(synthetic(2, [2, 2], 2, [1, 1], [2, 2], [512, 512]))
    state = State(planner.host, planner.reserved)
    copy = state.copy()
    plan = planner.plan([{"name": "t", "vcpus": 1, "memory_mb": 512, "gpus": 1, "vfs": 1}])
    placement = plan["placements"]["t"]
    state.take("t", placement)
    node = placement["numa_node"]
    assert all(state.cpu_owner[cpu] == "t" for cpu in placement["cpus"])
    assert state.gpu_owner == dict.fromkeys(placement["gpus"], "t")
    assert not set(placement["gpus"]) & set(state.free_gpus[node])
    assert not set(placement["vfs"]) & set(state.free_vfs[node])
    assert all(set(core).isdisjoint(placement["cpus"]) for core in state.free_cores[node])
    assert state.hugepages_used[node] == {"2M": 256}
    # the copy is not changed by what the state takes
    assert copy.cpu_owner == {} and copy.gpu_owner == {} and copy.hugepages_used[node] == {}
    assert sum(map(len, copy.free_cores.values())) == 4
