# -*- coding: utf-8 -*-
"""The planner's allocation (placement/allocation.py): cores and whole IOMMU groups chosen, and
what is taken kept per node by State."""

from __future__ import annotations

import random

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import Planner
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.allocation import State, choose_cores, cores_short, pin_keys, pick_units
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records

from placement_topologies import synthetic  # pylint: disable=import-error


def test_pin_keys_are_the_vcpu_numbers_as_text_whatever_was_asked_before():
    # the keys of vcpu_pins are made once and shared: a long list asked first, a short one then, and a longer one
    assert pin_keys(12) == [str(number) for number in range(12)]
    assert pin_keys(3) == ["0", "1", "2"]
    assert pin_keys(0) == []
    assert pin_keys(40) == [str(number) for number in range(40)]
    first, second = pin_keys(5), pin_keys(5)
    first.append("5")  # a plan's list is its own
    assert second == ["0", "1", "2", "3", "4"] and pin_keys(5) == second


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


def test_choose_cores_finds_none_only_where_the_cores_are_short():
    # cores_short is the one rule of whether choose_cores finds cores (the reasons' CPU check asks it
    # alone): wherever it says they are there, the cores chosen are distinct cores of the list that
    # hold the threads asked for; generated lists of cores of 1 to 3 threads (1 and 2 together: SMT
    # threads offline), every count up to more than they hold
    rng = random.Random(7)
    found = short = 0
    for _case in range(3000):
        sizes = [rng.choice(rng.choice([(1, 2), (2,), (1,), (1, 2, 3)])) for _core in range(rng.randint(0, 9))]
        free, cpu = [], 0
        for size in sizes:
            free.append(tuple(range(cpu, cpu + size)))
            cpu += size
        threads = sum(sizes)
        for needed in range(threads + 3):
            chosen = choose_cores(free, needed)
            assert (chosen is None) == cores_short(free, threads, needed), (free, needed)
            if chosen is None:
                short += 1
                continue
            found += 1
            assert len(set(chosen)) == len(chosen) and set(chosen) <= set(free), (free, needed, chosen)
            assert sum(map(len, chosen)) >= needed, (free, needed, chosen)
    assert found > 10000 and short > 5000


def test_the_cpus_only_checked_say_what_the_cpus_built_say():
    # _alloc_cpus without build answers from the count alone: None exactly where the CPUs are built,
    # else the shortage they give; random tenants taking their place on small hosts, both SMT policies
    rng = random.Random(11)
    compared = short = 0
    for _host in range(30):
        nodes = rng.randint(1, 3)
        topology = synthetic(nodes, [rng.randint(1, 6) for _n in range(nodes)], rng.choice([1, 2]), [0] * nodes, [0] * nodes,
                             [1024] * nodes)
        planner = Planner(topology, {"smt": rng.choice(["whole_cores", "threads"])})
        state = State(planner.host, planner.reserved)
        for index in range(8):
            tenant = {"name": "t%d" % index, "vcpus": rng.randint(1, 6), "emulator": rng.choice(["isolate", "vcpus", "reserved"])}
            for node in planner.host.nodes:
                built = planner._alloc_cpus(state, node, tenant)  # pylint: disable=protected-access
                checked = planner._alloc_cpus(state, node, tenant, build=False)  # pylint: disable=protected-access
                assert checked == (built if isinstance(built, str) else None)
                compared += 1
                short += isinstance(built, str)
            node = rng.choice(planner.host.nodes)
            built = planner._alloc_cpus(state, node, tenant)  # pylint: disable=protected-access
            if not isinstance(built, str):
                state.take(tenant["name"], {"cpus": built[2], "gpus": [], "vfs": []})
    assert short > 50 and compared - short > 50


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


def _fresh_reason(planner, state, tenant):
    """The reason on a copy of ``state`` (a copy starts with no checks): nothing asked before."""
    return planner._place(state.copy(), tenant)  # pylint: disable=protected-access


def test_a_tenant_left_out_has_the_reasons_of_its_own_shape_and_name_until_the_state_changes():
    # 2 nodes of 2 cores x 2 threads, a GPU and 2 VFs each, 512 pages of 2M each
    planner = Planner(synthetic(2, [2, 2], 2, [1, 1], [2, 2], [512, 512]))
    shape = {"vcpus": 4, "memory_mb": 512, "gpus": 1, "vfs": 2}
    first, second, third = (planner._tenant(record) for record in  # pylint: disable=protected-access
                            tenant_records([dict(shape, name=name) for name in ("a", "b", "c")]))
    small = planner._tenant(tenant_records([{"name": "s", "vcpus": 1, "memory_mb": 512, "vfs": 1}])[0])  # pylint: disable=protected-access
    state = State(planner.host, planner.reserved)
    assert _fresh_reason(planner, state, first)[0] is None  # 4 vCPUs and an emulator thread: 5 of the 4 threads a node has
    placement, why = planner._place(state, first)  # pylint: disable=protected-access
    assert placement is None and why.startswith("no NUMA node can hold tenant a (numa: required): ") and "CPUs short on node 0" in why
    # the same shape: the same reasons, under its own name, as if asked for the first time
    assert planner._place(state, second) == (None, why.replace("tenant a ", "tenant b "))  # pylint: disable=protected-access
    assert planner._place(state, second) == _fresh_reason(planner, state, second)  # pylint: disable=protected-access
    # the state changes (a tenant takes a core and a VF of node 0): the reasons are asked again
    taken, _score = planner._candidate(state, small, 0, True, {})  # pylint: disable=protected-access
    state.take("s", taken)
    again = planner._place(state, third)  # pylint: disable=protected-access
    assert again == _fresh_reason(planner, state, third) and again[1] != why.replace("tenant a ", "tenant c ")
    assert "VFs" in again[1] or "free in whole cores" in again[1]


def test_a_candidate_read_from_the_checks_is_the_one_asked_afresh():
    # The state's checks keep what a candidate found per node and amount (a shortage of GPUs or
    # VFs whether the devices were to be picked or only counted): every candidate on every node,
    # asked in turn on one state, must be what a copy of the state (no checks) gives, under each
    # pcie_affinity and numa (a policy's or some tenants' own: VFs of the socket's nodes under
    # required_vf_socket), with tenants taking their place between the asks
    rng = random.Random(16)
    compared = short = 0
    for _host in range(60):
        nodes = rng.randint(2, 3)
        topology = synthetic(nodes, [rng.randint(2, 8) for _n in range(nodes)], rng.choice([1, 2]),
                             [rng.randint(1, 2) for _n in range(nodes)], [rng.randint(1, 4) for _n in range(nodes)],
                             [rng.choice([0, 128, 1024]) for _n in range(nodes)],
                             levels={(0, 0): "PIX", (1, 0): "SYS", (1, 1): "PHB"})
        policy = {"pcie_affinity": rng.choice(["prefer", "require", "ignore"]),
                  "numa": rng.choice(["required", "preferred", "required_vf_socket"])}
        planner = Planner(topology, policy)
        records = tenant_records([{"name": "t%d" % i, "vcpus": rng.randint(1, 4), "memory_mb": rng.choice([64, 128, 256]),
                                   "gpus": rng.choice([0, 0, 1, 2]), "vfs": rng.choice([0, 1, 1, 3]),
                                   "numa": rng.choice([None, None, "required_vf_socket"])} for i in range(8)])
        # (a tenant larger than the host is refused before any candidate)
        tenants = [t for t in map(planner._tenant, records) if not t.get("refused")]  # pylint: disable=protected-access
        state = State(planner.host, planner.reserved)
        for tenant in tenants:
            for local_only in (True, False):
                for node in planner.host.nodes:
                    # the keys the tenant asks made by the caller (as _place makes them once for all nodes) or here
                    asks = planner._asks(tenant, local_only) if node % 2 else None  # pylint: disable=protected-access
                    asked = planner._candidate(state, tenant, node, local_only, {}, asks=asks)  # pylint: disable=protected-access
                    assert asked == planner._candidate(state.copy(), tenant, node, local_only, {})  # pylint: disable=protected-access
                    compared += 1
                    short += isinstance(asked, str)
            placement, _why = planner._place(state, tenant)  # pylint: disable=protected-access
            if placement is not None:
                state.take(tenant["name"], placement)
    # both kinds were compared, many times
    assert short > 300 and compared - short > 300
