# -*- coding: utf-8 -*-
"""Tenants spanning NUMA nodes (``numa: spread``, placement/spread.py): on the DGX A100-class
host (NPS4: 8 nodes of 16 cores, 2 GPUs on each GPU node) a 4-GPU tenant, or one of 2 GPUs
with more vCPUs than a node has, is placed over the fewest nodes, one guest cell per node, each
GPU and VF on its own node's cell; the closest nodes first by the host's NUMA distances."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.spread import balanced_split
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_cells import check_cells
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning.tenant_plan import numa_cells

from placement_checks import assert_exclusive  # pylint: disable=import-error
from placement_topologies import dgx_a100, drawn_synthetic, synthetic, tenant  # pylint: disable=import-error

DGX = dgx_a100()
GPU_NODE = dict((g["address"], g["numa_node"]) for g in DGX["gpus"])
GPU_NODES = sorted(set(GPU_NODE.values()))
DGX_CPU_NODE = dict((cpu["id"], cpu["numa_node"]) for cpu in DGX["cpus"])


@pytest.mark.parametrize("total, caps, parts", [
    (32, [32, 32], [16, 16]),
    (33, [32, 32], [17, 16]),
    (32, [10, 32], [10, 22]),
    (5, [1, 1, 10], [1, 1, 3]),
    (3, [1, 1, 1], [1, 1, 1]),
])
def test_balanced_split(total, caps, parts):
    assert balanced_split(total, caps) == parts


@pytest.mark.parametrize("total, caps", [(65, [32, 32]), (1, [5, 5]), (4, [0, 8])])
def test_balanced_split_refuses_what_does_not_fit(total, caps):
    """More than the caps hold, fewer than one each, or a part with no room: None."""
    assert balanced_split(total, caps) is None


def test_four_gpu_tenant_spans_two_gpu_nodes_under_spread():
    """NPS4: no node has 4 GPUs. Under numa required the tenant is refused; under spread it gets
    two cells, on two GPU nodes, 2 GPUs and 2 VFs each on its own cell, vCPUs and hugepages
    split evenly; the other tenants keep their one node."""
    tenants = [tenant("big", vcpus=32, memory_mb=131072, gpus=4, vfs=2, hugepage_size="1G"),
               tenant("a", vcpus=8, gpus=1, vfs=1), tenant("b", vcpus=8, gpus=1, vfs=1)]
    required = plan_tenants(DGX, tenants)
    assert "big" in required["unplaced"] and "no NUMA node can hold tenant big (numa: required)" in required["unplaced"]["big"]
    policy = {"numa": "spread"}
    plan = plan_tenants(DGX, tenants, policy)
    assert_exclusive(DGX, plan, policy)
    big = plan["placements"]["big"]
    assert len(big["cells"]) == 2 and set(big["numa_nodes"]) <= set(GPU_NODES)
    assert [len(cell["gpus"]) for cell in big["cells"]] == [2, 2]
    assert [len(cell["vfs"]) for cell in big["cells"]] == [1, 1]
    assert [len(cell["vcpus"]) for cell in big["cells"]] == [16, 16]
    assert [cell["hugepages"] for cell in big["cells"]] == [64, 64]
    assert big["hugepages"]["count"] == 128 and big["hugepages"]["node"] is None
    assert plan["placements"]["a"]["cells"] is None and plan["placements"]["b"]["cells"] is None
    # what it says of the proof: every tenant placed, so no plan places more
    assert plan["search"]["spread"] == ["big"] and plan["search"]["proven"] and plan["search"]["not_proven"] == []


def test_spread_tenant_that_fits_one_node_stays_on_one():
    """As few nodes as hold it: one, when one does."""
    plan = plan_tenants(DGX, [tenant("a", vcpus=8, gpus=2, numa="spread")])
    place = plan["placements"]["a"]
    assert place["cells"] is None and place["numa_node"] in GPU_NODES and place["numa_nodes"] == [place["numa_node"]]
    assert plan["search"]["proven"] and "spread" not in plan["search"]


def test_tenant_numa_spread_under_policy_required():
    """A tenant's own ``numa: spread``; the others still under the policy's required."""
    tenants = [tenant("wide", vcpus=40, memory_mb=65536, gpus=2, numa="spread"), tenant("wide2", vcpus=40, memory_mb=65536)]
    plan = plan_tenants(DGX, tenants)
    assert_exclusive(DGX, plan)
    wide = plan["placements"]["wide"]
    assert len(wide["cells"]) == 2 and [len(c["vcpus"]) for c in wide["cells"]] == [20, 20]
    # its 2 GPUs on one of its cells' nodes (a GPU node holds both)
    assert sorted(len(c["gpus"]) for c in wide["cells"]) == [0, 2]
    assert "wide2" in plan["unplaced"] and "(numa: required)" in plan["unplaced"]["wide2"]
    assert wide["memory_mb"] * 1024 == sum(cell["memory_kib"] for cell in wide["cells"])


def test_bad_tenant_numa_is_named():
    with pytest.raises(InputError, match=r"tenants\[0\] \(a\): numa 'wide' is not one of required, required_vf_socket, preferred, spread"):
        plan_tenants(DGX, [tenant("a", numa="wide")])


def test_closest_nodes_first_by_distance():
    """Four nodes with two GPUs each; nodes 0 and 2 are close (11), every other pair far (30):
    a 4-GPU tenant goes on 0 and 2, not on the lowest-numbered pair 0 and 1."""
    host = synthetic(4, [4, 4, 4, 4], 2, [2, 2, 2, 2], [0, 0, 0, 0], [512] * 4)
    far = 30
    rows = {0: [10, far, 11, far], 1: [far, 10, far, far], 2: [11, far, 10, far], 3: [far, far, far, 10]}
    for node in host["numa_nodes"]:
        node["distances"] = rows[node["id"]]
    plan = plan_tenants(host, [tenant("big", vcpus=10, memory_mb=1024, gpus=4, numa="spread")])
    assert_exclusive(host, plan, {"numa": "spread"})
    assert plan["placements"]["big"]["numa_nodes"] == [0, 2]
    # without distances (the kernel's 10/20 defaults) the lowest-numbered set
    for node in host["numa_nodes"]:
        node["distances"] = []
    assert plan_tenants(host, [tenant("big", vcpus=10, memory_mb=1024, gpus=4, numa="spread")])["placements"]["big"]["numa_nodes"] == [0, 1]


def test_fewest_nodes_before_closest():
    """Three nodes hold it only when two do not: a tenant of 5 GPUs on a host of 2 GPUs a node."""
    host = synthetic(4, [4, 4, 4, 4], 1, [2, 2, 2, 2], [0, 0, 0, 0], [512] * 4)
    plan = plan_tenants(host, [tenant("big", vcpus=4, memory_mb=512, gpus=5, numa="spread", emulator="vcpus")])
    assert_exclusive(host, plan, {"numa": "spread", "emulator": "vcpus"})
    assert len(plan["placements"]["big"]["cells"]) == 3


def test_spread_placement_kept_as_existing():
    """Stable: a spread placement given back as existing is kept as it is, whatever comes after."""
    policy = {"numa": "spread"}
    tenants = [tenant("big", vcpus=32, memory_mb=65536, gpus=4, vfs=2)]
    first = plan_tenants(DGX, tenants, policy)["placements"]
    again = plan_tenants(DGX, tenants + [tenant("c", vcpus=4, gpus=1)], dict(policy, existing=copy.deepcopy(first)))
    kept = again["placements"]["big"]
    assert kept["kept"] and kept["cells"] == first["big"]["cells"] and kept["vcpu_pins"] == first["big"]["vcpu_pins"]
    assert_exclusive(DGX, again, policy)


@pytest.mark.parametrize("change, why", [
    (lambda t: t.update(vcpus=30), "spans NUMA nodes with 32 vCPUs, the tenant asks for 30"),
    (lambda t: t.update(numa="required"), "spans NUMA nodes and numa is required"),
    (lambda t: t.update(memory_mb=32768), "existing cells hold"),
])
def test_spread_existing_replanned_with_reason(change, why):
    policy = {"numa": "spread"}
    big = tenant("big", vcpus=32, memory_mb=65536, gpus=4, vfs=2)
    first = plan_tenants(DGX, [big], policy)["placements"]
    changed = dict(big)
    change(changed)
    again = plan_tenants(DGX, [changed], dict(policy, existing=copy.deepcopy(first)))
    assert why in again["notes"]["big"]


@pytest.mark.parametrize("form", ["memory only", "hot-plug vCPUs only"])
def test_spread_existing_with_a_cell_without_vcpus_is_replanned(form):
    """An existing spanning domain one of whose cells has no placed vCPU (a memory-only cell, which
    libvirt takes, or one holding only the vCPUs above the current count) is re-planned, with the
    reason, into cells that each have vCPUs and memory: what the domain code then takes
    (domain_cells.check_cells), instead of the whole call failing on it."""
    policy = {"numa": "spread"}
    big = tenant("big", vcpus=32, memory_mb=65536, gpus=4, vfs=2)
    first = copy.deepcopy(plan_tenants(DGX, [big], policy)["placements"]["big"])
    cells = first["cells"]
    # every vCPU in the first cell (pinned on its node), the second keeps only memory
    pins = sorted(cpu for cpu, node in DGX_CPU_NODE.items() if node == cells[0]["node"])[:32]
    first["emulator_cpus"] = [cells[1]["cpus"][0]]
    first["vcpu_pins"] = dict((str(v), str(cpu)) for v, cpu in enumerate(pins))
    cells[0]["vcpus"] = list(range(32))
    cells[1]["vcpus"] = [] if form == "memory only" else [32, 33]
    plan = plan_tenants(DGX, [big], dict(policy, existing={"big": first}))
    assert plan["notes"]["big"] == ("re-planned: existing cell(s) 1 hold no vCPUs of the 32 placed, or no memory: "
                                    "each cell needs both")
    placed = plan["placements"]["big"]
    assert not placed["kept"] and all(cell["vcpus"] and cell["memory_kib"] > 0 for cell in placed["cells"])
    devices = placed["gpus"] + placed["vfs"]
    assert check_cells(numa_cells(placed), placed["max_vcpus"], placed["memory_mb"] * 1024, devices, "q35")
    assert_exclusive(DGX, plan, policy)


def test_spread_reason_when_no_set_holds_it():
    """More GPUs than the host has: the one-node reasons and the spread's, together."""
    plan = plan_tenants(DGX, [tenant("huge", vcpus=8, gpus=9, numa="spread")])
    assert ("across NUMA nodes (numa: spread): the 8 of 8 nodes with CPUs and memory free do not hold 8 vCPUs + 1 emulator, "
            "2048 2M hugepages, 9 GPUs and 0 VFs together") in plan["unplaced"]["huge"]


@st.composite
def spread_instances(draw):
    """Small random hosts (2-4 nodes) and tenants, some larger than any node."""
    host = drawn_synthetic(draw, 2, 4, 4)
    tenants = [tenant("t%d" % i, vcpus=draw(st.integers(1, 8)), memory_mb=draw(st.sampled_from([32, 64, 128, 256])),
                      gpus=draw(st.integers(0, 4)), vfs=draw(st.integers(0, 3))) for i in range(draw(st.integers(1, 5)))]
    return host, tenants, {"emulator": draw(st.sampled_from(["isolate", "vcpus"])), "smt": draw(st.sampled_from(["whole_cores", "threads"]))}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spread_instances())
def test_spread_keeps_the_one_node_plan_and_every_rule(instance):
    """Under spread the rules hold for every tenant (cells included), the plan places as many tenants
    and online ones as under required or more; unless a plan with tenants spanning first was kept
    (placement/spanning.py), the tenants placed on one node are placed exactly as under required
    and spread only adds tenants: those that no node held, each on two nodes or more."""
    host, tenants, policy = instance
    required = plan_tenants(host, tenants, policy)
    spread = plan_tenants(host, tenants, dict(policy, numa="spread"))
    assert_exclusive(host, spread, dict(policy, numa="spread"))

    def counts(plan):
        return len(plan["placements"]), sum(1 for p in plan["placements"].values() if p["priority"] == "online")
    assert counts(spread) >= counts(required)
    one_node = dict((name, place) for name, place in spread["placements"].items() if not place["cells"])
    assert set(spread["placements"]) - set(one_node) == set(spread["search"].get("spread", []))
    assert all(len(spread["placements"][name]["cells"]) > 1 for name in spread["search"].get("spread", []))
    if spread["search"]["kept"] != "spanning_first":
        assert one_node == required["placements"]
        assert set(spread["unplaced"]) <= set(required["unplaced"])
