# -*- coding: utf-8 -*-
"""HostIndex, the planner's index of the host model (placement/index.py), over the DGX
A100-class model built from real captures and small synthetic hosts."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import index as placement_index
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex, node_of, read_host_devices

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from fakes.kernel import nodeless_host  # pylint: disable=import-error
from placement_topologies import dgx_a100, grouped, synthetic  # pylint: disable=import-error

DGX = dgx_a100()


def test_dgx_nodes_cores_and_devices():
    index = HostIndex(DGX)
    assert index.nodes == sorted(node["id"] for node in DGX["numa_nodes"])
    online = [cpu["id"] for cpu in DGX["cpus"] if cpu.get("online", True)]
    assert index.online == set(online)
    for cpu in DGX["cpus"]:
        assert index.cpu_node[cpu["id"]] == cpu["numa_node"]
        assert index.core_of[cpu["id"]] == tuple(sorted(cpu["siblings"]))
    # every online CPU on exactly one node, every core on the node of its threads
    assert sorted(cpu for cpus in index.node_cpus.values() for cpu in cpus) == sorted(online)
    for node, cores in index.node_cores.items():
        assert all(index.cpu_node[cpu] == node for core in cores for cpu in core)
    assert index.gpus == sorted(gpu["address"] for gpu in DGX["gpus"])
    assert all(index.gpu_node[gpu["address"]] == gpu["numa_node"] for gpu in DGX["gpus"])
    assert sorted(index.vfs) == sorted(index.vf_pf)
    # a VF of unknown node (none read from sysfs nor from its PF) is kept apart, for split placements only
    assert all(vf in index.node_vfs[index.vf_node[vf]] for vf in index.vfs)
    assert set(index.node_vfs) == set(index.nodes) | {None}


def test_gpu_pool_and_vf_pfs_limit_the_pools():
    gpu = DGX["gpus"][0]["address"]
    pf = sorted(set(HostIndex(DGX).vf_pf.values()))[0]
    index = HostIndex(DGX, gpu_pool=[gpu], vf_pfs=[pf])
    assert index.gpus == [gpu]
    assert set(index.vf_pf.values()) == {pf}
    with pytest.raises(InputError, match="policy.gpus: 0000:ff:00.0 not GPUs of this host"):
        HostIndex(DGX, gpu_pool=["0000:ff:00.0"])
    with pytest.raises(InputError, match="policy.vf_pfs: 0000:ff:00.0 has no VFs"):
        HostIndex(DGX, vf_pfs=["0000:ff:00.0"])


def test_offline_thread_leaves_its_core():
    topology = synthetic(1, [2], 2, [0], [0], [0])
    cpus = [dict(cpu, online=cpu["id"] != 2) for cpu in topology["cpus"]]
    index = HostIndex(dict(topology, cpus=cpus))
    assert 2 not in index.online
    assert index.core_of[0] == (0,)
    assert index.node_cores[0] == [(0,), (1, 3)]


CPU_FIELDS = ("cpu_node", "core_of", "online", "cpu_bound", "node_cpus", "node_cores")


@pytest.mark.parametrize("shape", ["online key absent", "in reverse order", "ids as strings", "siblings as tuples"])
def test_cpus_read_in_one_pass_as_field_by_field(shape):
    # the usual shape (every CPU online, int ids and nodes, siblings in order) is read in one pass;
    # any other shape field by field: the same host in both reads the same
    shapes = {"online key absent": lambda cpu: {k: v for k, v in cpu.items() if k != "online"},
              "in reverse order": dict, "ids as strings": lambda cpu: dict(cpu, id=str(cpu["id"])),
              "siblings as tuples": lambda cpu: dict(cpu, siblings=tuple(cpu["siblings"]))}
    cpus = [shapes[shape](cpu) for cpu in DGX["cpus"]]
    if shape == "in reverse order":
        cpus.reverse()
    nodes = sorted(node["id"] for node in DGX["numa_nodes"])
    assert placement_index._plain_cpus(DGX["cpus"], nodes) is not None
    assert (placement_index._plain_cpus(cpus, nodes) is None) == (shape != "in reverse order")
    plain, other = HostIndex(DGX), HostIndex(dict(DGX, cpus=cpus))
    for field in CPU_FIELDS:
        assert getattr(plain, field) == getattr(other, field), field


def test_sockets_of_the_usual_shape_read_in_one_pass_as_cpu_by_cpu():
    # the CPUs of the usual shape have their packages read in one pass: the index's sockets are
    # those of the CPU by CPU read, with a CPU naming another package (its node's socket then
    # unknown), one naming none, and one that is a Mapping but no dict (not read as a CPU's package)
    node_cpus = dict((node["id"], list(node["cpus"])) for node in DGX["numa_nodes"])
    first = DGX["cpus"][0]
    node = first["numa_node"]
    variants = [DGX["cpus"],
                [dict(first, package_id=7)] + DGX["cpus"][1:],
                [dict((k, v) for k, v in first.items() if k != "package_id")] + DGX["cpus"][1:],
                [MappingProxyType(dict(first, package_id=7))] + DGX["cpus"][1:]]
    found = []
    for cpus in variants:
        index = HostIndex(dict(DGX, cpus=cpus))
        assert index.socket == placement_index.node_sockets(cpus, node_cpus)
        found.append(index.socket)
    assert found[0][node] is not None and found[1][node] is None
    assert found[2] == found[3] == found[0]
    assert len(set(found[0].values())) == 2  # the DGX model's two sockets


def test_cpus_of_an_odd_shape_are_read_field_by_field():
    # a core listed differently by its two threads, a thread on another node than its sibling,
    # a sibling that is not listed: not the usual shape, each read as before
    nodes = sorted(node["id"] for node in DGX["numa_nodes"])
    first, last = DGX["cpus"][0], DGX["cpus"][-1]
    second = DGX["cpus"][1]
    for cpus in ([dict(first, siblings=[first["id"]])] + DGX["cpus"][1:],
                 [dict(first, numa_node=last["numa_node"])] + DGX["cpus"][1:],
                 [dict(first, siblings=first["siblings"] + [999])] + DGX["cpus"][1:],
                 # a CPU whose siblings leave it out (another core's), its sibling then alone or not; a CPU listed twice
                 [dict(first, siblings=list(second["siblings"]))] + DGX["cpus"][1:],
                 [dict(first, siblings=list(second["siblings"]))] + [
                     dict(cpu, siblings=[cpu["id"]]) if cpu["id"] in first["siblings"] else cpu for cpu in DGX["cpus"][1:]],
                 DGX["cpus"] + [first]):
        assert placement_index._plain_cpus(cpus, nodes) is None
        index = HostIndex(dict(DGX, cpus=cpus))
        assert sorted(cpu for found in index.node_cpus.values() for cpu in found) == sorted(index.online)


def test_ranks_same_switch_and_other_node():
    topology = synthetic(2, [1, 1], 1, [1, 0], [1, 1], [0, 0])
    index = HostIndex(topology)
    gpu = index.gpus[0]
    near = [vf for vf in index.vfs if index.vf_node[vf] == 0]
    far = [vf for vf in index.vfs if index.vf_node[vf] == 1]
    assert index.nearest_ranks([gpu], near + far) == [1, 4]  # PXB, SYS


def _moved_vfs():
    """The DGX model with, on one PF, a VF its affinity row names itself (PIX) and a VF on another
    node of the same socket than its PF: the other VFs of that PF share the PF's rank, those two not."""
    index = HostIndex(DGX)
    gpu = index.gpus[0]
    pf = next(pf for pf, level in sorted(DGX["gpu_nic_affinity"][gpu].items()) if level == "SYS" and len(index.pf_vfs[pf]) > 2)
    named, moved = index.pf_vfs[pf][0], index.pf_vfs[pf][1]
    pf_node = index.vf_node[moved]
    mate = next(node for node in index.nodes if node != pf_node and index.same_socket(node, pf_node)
                and index.node_level(index.gpu_node[gpu], node) != index.node_level(index.gpu_node[gpu], pf_node))
    pci = dict(DGX["pci_devices"])
    pci[moved] = dict(pci[moved], numa_node=mate)
    affinity = dict(DGX["gpu_nic_affinity"])
    affinity[gpu] = dict(affinity[gpu], **{named: "PIX"})
    return dict(DGX, pci_devices=pci, gpu_nic_affinity=affinity), gpu, pf, named, moved


def test_rank_rows_the_same_in_any_order_asked():
    # a row fills the VFs of one PF and node at once: each VF's rank is its own, whichever VF was asked first
    topology, gpu, pf, named, moved = _moved_vfs()
    rows = []
    for order in (1, -1):
        index = HostIndex(topology)
        rows.append([(gpu_, vf, index.rank_row(gpu_)[vf]) for gpu_ in index.gpus for vf in index.vfs[::order]])
    assert sorted(rows[0]) == sorted(rows[1])
    index = HostIndex(topology)
    row = index.rank_row(gpu)
    others = [vf for vf in index.pf_vfs[pf] if vf not in (named, moved)]
    # the PF's SYS: SOCKET or SYS by the nodes' sockets
    assert row[others[0]] == index.node_level(index.gpu_node[gpu], index.vf_node[others[0]])
    assert all(row[vf] == row[others[0]] for vf in others)
    assert row[named] == placement_index.level_rank("PIX")
    # on another node than its PF's other VFs: a rank of its own (asked first above, or after them)
    assert row[moved] != row[others[0]]


def test_group_with_host_function_is_left_out():
    topology = synthetic(1, [2], 1, [2], [0], [0])
    gpu_a, gpu_b = sorted(gpu["address"] for gpu in topology["gpus"])
    host_nic = "0000:30:00.0"
    topology = grouped(topology, {1: [gpu_a, host_nic], 2: [gpu_b, "0000:10:00.1"]},
                       extra={host_nic: {"class": "0x020000"}, "0000:10:00.1": {"class": "0x040300"}})
    index = HostIndex(topology)
    assert index.gpus == [gpu_b]
    assert "its IOMMU group 1 also holds 0000:30:00.0" in index.left_out[gpu_a]
    assert index.companions == {gpu_b: ("0000:10:00.1",)}


TENANT = {"name": "t", "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none"}


def test_a_device_with_no_node_sits_on_the_one_node_of_a_one_node_host(tmp_path):
    """sysfs numa_node -1 on a one-node host: the device can only be on that node, and is planned there."""
    tree, _kernel = nodeless_host(tmp_path, 1)
    topology = read_topology(tree.root, gpu_ids=["1234:11e8"])
    assert topology["gpus"][0]["numa_node"] is None   # the host model says what sysfs says
    index = HostIndex(topology)
    assert index.gpu_node == {"0000:01:00.0": 0} and index.vf_node == {"0000:02:00.1": 0, "0000:02:00.2": 0}
    assert placement_index.lone_node(topology) == 0
    plan = plan_tenants(topology, [TENANT], {})
    assert plan["unplaced"] == {} and plan["placements"]["t"]["numa_node"] == 0
    assert plan["placements"]["t"]["gpus"] == ["0000:01:00.0"] and plan["placements"]["t"]["vfs"] == ["0000:02:00.1"]


def test_a_device_with_no_node_on_a_host_of_several_is_named_with_the_fix(tmp_path):
    """On a host of several nodes the node of a device reporting -1 is unknown: no node counts it, and the tenant's
    reason says which devices that is and what to do (numa: preferred, or firmware that reports _PXM)."""
    tree, _kernel = nodeless_host(tmp_path, 2)
    topology = read_topology(tree.root, gpu_ids=["1234:11e8"])
    index = HostIndex(topology)
    assert index.gpu_node == {"0000:01:00.0": None} and placement_index.lone_node(topology) is None
    plan = plan_tenants(topology, [TENANT], {})
    why = plan["unplaced"]["t"]
    assert "GPUs short on node 0: 0 free of 0" in why
    assert why.endswith("; GPU 0000:01:00.0 and 2 VFs of 0000:02:00.0 report no NUMA node (sysfs numa_node -1), so no node counts "
                        "them: give the tenant numa: preferred (placed split, they are usable), or have the firmware/BIOS report "
                        "the PCIe roots' NUMA node (ACPI _PXM)"), why
    split = plan_tenants(topology, [dict(TENANT, numa="preferred")], {})
    assert split["unplaced"] == {} and split["placements"]["t"]["gpus"] == ["0000:01:00.0"]


@pytest.mark.parametrize("value, expected", [(None, None), (True, None), (-1, None), ("2", 2), (0, 0), ("x", None)])
def test_node_of(value, expected):
    assert node_of(value) == expected


def test_read_host_devices():
    assert read_host_devices(None) == {}
    assert read_host_devices(["0000:30:00.0"]) == {"0000:30:00.0": "the host needs it"}
    assert read_host_devices({"0000:30:00.0": "boot NIC"}) == {"0000:30:00.0": "boot NIC"}
    with pytest.raises(InputError, match="not a PCI address"):
        read_host_devices(["eth0"])
    with pytest.raises(InputError, match="expected a list of PCI addresses"):
        read_host_devices("0000:30:00.0")
