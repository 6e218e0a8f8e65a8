# -*- coding: utf-8 -*-
"""Locality on hosts with more NUMA nodes than sockets (SNC-2, NPS4-like): the socket as a level
between NODE and SYS, numa: required_vf_socket, the refusal of numa: required on a node without a
VF-capable PF, never a farther VF while a nearer one is free, and each tenant's vf_locality. On the
HGX H100 capture of tests/tools/hgx_tree.py (SNC-2: GPU0-1/4-5 and the BlueField-3 on each socket's
first node, GPU2-3/6-7 on its second) and on generated families checked against the CP-SAT reference."""

from __future__ import annotations

import os
import random
import sys

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants

import placement_cpsat  # pylint: disable=import-error
import placement_families as families  # pylint: disable=import-error
from placement_checks import assert_exclusive  # pylint: disable=import-error

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "tools"))
import hgx_tree  # noqa: E402  pylint: disable=import-error,wrong-import-position

RESERVED = "0-1,104-105"


def vf_addresses(pf, count):
    """The first ``count`` VFs of a BlueField-3 port as its SR-IOV capability lays them out
    (hgx_tree: First VF Offset 2 - f + f * 16, stride 1, from the PF's routing ID)."""
    _domain, bus, devfn = pf.split(":")
    device, function = devfn.split(".")
    rid = int(bus, 16) << 8 | int(device, 16) << 3 | int(function)
    first = rid + 2 - int(function) + int(function) * hgx_tree.BF3_TOTALVFS
    return ["0000:%02x:%02x.%d" % (r >> 8, (r >> 3) & 31, r & 7) for r in range(first, first + count)]


def hgx(tmp_path, snc, vfs=2):
    """The HGX H100 tree with ``vfs`` VFs made on each BlueField-3 port (as the kernel shows them
    after sriov_numvfs), read back -> (topology, {GPUn: address}, [PFs])."""
    root = str(tmp_path / ("snc%d" % snc))
    host, gpus, _nics, pfs = hgx_tree.write_tree(root, snc)
    group = 200
    for pf in pfs:
        with open(host.p("/sys/bus/pci/devices/%s/numa_node" % pf), encoding="utf-8") as handle:
            node = int(handle.read())
        host.add_vfs(pf, vf_addresses(pf, vfs), "0x15b3", "0x101e", "0x020000", numa_node=node,
                     groups=list(range(group, group + vfs)))
        group += vfs
    return read_topology(root, ["10de:2330"]), gpus, pfs


def one_gpu_tenants(count, **extra):
    return [dict({"name": "t%d" % i, "gpus": 1, "vfs": 1, "vcpus": 8, "memory_mb": 8192, "hugepage_size": "none"}, **extra)
            for i in range(count)]


def node_of(topology, address):
    return topology["pci_devices"][address]["numa_node"]


def test_each_node_has_the_socket_of_its_cpus(tmp_path):
    """SNC-2: nodes 0-1 on package 0, 2-3 on package 1 (physical_package_id of their CPUs); SNC off:
    a node a socket; a node without CPUs (memory only) has no socket."""
    snc2, _gpus, _pfs = hgx(tmp_path, 2)
    assert HostIndex(snc2).socket == {0: 0, 1: 0, 2: 1, 3: 1}
    off, _gpus, _pfs = hgx(tmp_path, 1)
    assert HostIndex(off).socket == {0: 0, 1: 1}
    memory_only = dict(snc2, numa_nodes=snc2["numa_nodes"] + [{"id": 4, "cpus": [], "memory_mb": 1024, "hugepages": {}, "distances": []}])
    index = HostIndex(memory_only)
    assert index.socket[4] is None and index.node_level(0, 4) == index.node_level(0, 2)
    assert [index.node_level(0, n) for n in (0, 1, 2)] == [3, 4, 5]  # NODE, SOCKET, SYS


def test_numa_required_refuses_naming_the_node_without_a_vf_capable_pf(tmp_path):
    """SNC-2: the GPUs of nodes 1 and 3 have no NIC with VFs on their node. numa: required places the
    four tenants the NIC nodes hold and refuses the others saying why and what to set."""
    topology, _gpus, _pfs = hgx(tmp_path, 2)
    plan = plan_tenants(topology, one_gpu_tenants(8), {"numa": "required", "reserved_cpus": RESERVED})
    assert len(plan["placements"]) == 4
    assert sorted(p["numa_node"] for p in plan["placements"].values()) == [0, 0, 2, 2]
    for reason in plan["unplaced"].values():
        assert ("VFs short on node 1: 1 needed, the node has no VF-capable PF (no SR-IOV NIC on it); the VFs of its socket 0 "
                "are on node 0: numa: required_vf_socket gives a tenant VFs of another node of its socket, its GPUs, vCPUs "
                "and memory staying on node 1") in reason
        assert "VFs short on node 3: 1 needed, the node has no VF-capable PF" in reason


def test_required_vf_socket_places_every_gpu_with_a_vf_of_its_socket(tmp_path):
    """The same eight tenants under numa: required_vf_socket: all placed, each GPU, vCPU and page on the
    tenant's node, each VF on its socket; those on nodes 1 and 3 say SOCKET and why."""
    topology, _gpus, _pfs = hgx(tmp_path, 2)
    policy = {"numa": "required_vf_socket", "reserved_cpus": RESERVED}
    plan = plan_tenants(topology, one_gpu_tenants(8), policy)
    assert not plan["unplaced"] and len(plan["placements"]) == 8
    assert plan["search"]["proven"], plan["search"]
    assert_exclusive(topology, plan, policy)
    cpu_node = dict((c["id"], c["numa_node"]) for c in topology["cpus"])
    for place in plan["placements"].values():
        node = place["numa_node"]
        assert all(cpu_node[cpu] == node for cpu in place["cpus"])
        assert [node_of(topology, g) for g in place["gpus"]] == [node]
        vf_node = node_of(topology, place["vfs"][0])
        assert vf_node // 2 == node // 2
        where = place["vf_locality"]
        if vf_node == node:
            assert where["level"] in ("PHB", "NODE") and place["pcie_affinity"] == where["level"]
        else:
            assert where["level"] == place["pcie_affinity"] == "SOCKET" and not place["local"]
            assert where["why"] == ("VF %s on node %d, another NUMA node of the socket of its GPU %s (node %d): no VF of the "
                                    "pool is nearer; node %d has no VF-capable PF" % (place["vfs"][0], vf_node, place["gpus"][0], node, node))


def test_required_vf_socket_takes_the_own_node_vf_first_and_says_who_holds_the_nearer(tmp_path):
    """One VF a port: socket 0 has two. Three tenants on socket 0's GPUs (explicit): the two on node 0
    take node 0's VFs, the one on node 1 has none left on its socket and is refused naming the socket."""
    topology, gpus, _pfs = hgx(tmp_path, 2, vfs=1)
    tenants = [dict(t, gpus=[gpus[name]]) for t, name in zip(one_gpu_tenants(3), ("GPU0", "GPU1", "GPU2"))]
    plan = plan_tenants(topology, tenants, {"numa": "required_vf_socket", "reserved_cpus": RESERVED})
    assert sorted(plan["placements"]) == ["t0", "t1"]
    assert all(node_of(topology, p["vfs"][0]) == 0 for p in plan["placements"].values())
    assert "VFs short on socket 0 (nodes 1,0, numa: required_vf_socket): 0 free, 1 needed" in plan["unplaced"]["t2"]
    # only GPU2 asks: it gets a VF of node 0, SOCKET, and no VF of the pool is nearer
    alone = plan_tenants(topology, tenants[2:], {"numa": "required_vf_socket", "reserved_cpus": RESERVED})
    assert alone["placements"]["t2"]["vf_locality"]["level"] == "SOCKET"
    # with t0 and t1 on GPU4/GPU5 (socket 1) the two nearer (NODE) VFs of socket 1 are theirs
    others = [dict(t, gpus=[gpus[name]]) for t, name in zip(one_gpu_tenants(3), ("GPU4", "GPU5", "GPU6"))]
    shared = plan_tenants(topology, others[:2] + [dict(others[2], name="late", vfs=1)],
                          {"numa": "preferred", "reserved_cpus": RESERVED})
    late = shared["placements"]["late"]
    assert late["vf_locality"]["level"] == "SYS"
    assert "the nearer VFs are held by t0, t1" in late["vf_locality"]["why"]


def test_preferred_never_takes_a_vf_of_the_other_socket_while_one_of_its_own_is_free(tmp_path):
    """numa: preferred, eight tenants: the four no node holds whole are split (GPU on node 1 or 3, VF
    elsewhere); each gets a VF of its GPU's socket (SOCKET), not of the other socket (SYS)."""
    topology, _gpus, _pfs = hgx(tmp_path, 2, vfs=4)
    plan = plan_tenants(topology, one_gpu_tenants(8), {"numa": "preferred", "reserved_cpus": RESERVED})
    assert len(plan["placements"]) == 8
    levels = []
    for place in plan["placements"].values():
        gpu_node, vf_node = node_of(topology, place["gpus"][0]), node_of(topology, place["vfs"][0])
        assert gpu_node // 2 == vf_node // 2, place
        levels.append(place["vf_locality"]["level"])
    assert sorted(levels).count("SOCKET") == 4 and "SYS" not in levels


def test_an_existing_vf_of_the_socket_is_kept_under_required_vf_socket(tmp_path):
    topology, _gpus, _pfs = hgx(tmp_path, 2)
    policy = {"numa": "required_vf_socket", "reserved_cpus": RESERVED}
    first = plan_tenants(topology, one_gpu_tenants(8), policy)
    again = plan_tenants(topology, list(reversed(one_gpu_tenants(8))), dict(policy, existing=first["placements"]))
    assert all(p["kept"] for p in again["placements"].values())
    assert dict((n, p["vfs"]) for n, p in again["placements"].items()) == dict((n, p["vfs"]) for n, p in first["placements"].items())
    # under numa: required the same assignment is not NUMA-local: re-planned, said so
    required = plan_tenants(topology, one_gpu_tenants(8), {"numa": "required", "reserved_cpus": RESERVED, "existing": first["placements"]})
    off_node = [n for n, p in first["placements"].items() if p["vf_locality"]["level"] == "SOCKET"]
    assert off_node and all(required["notes"][n] == "re-planned: existing assignment is not NUMA-local and numa is required" for n in off_node)


# ---------------------------------------------------------------------------- families against the exact reference
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SOCKET", "SYS")


def reference_level(topology, gpus, vf):
    """The level of ``vf`` to the nearest of ``gpus``, worked out here: the affinity matrix's level of
    its PF (SYS across nodes, as nvidia-smi prints it), SOCKET where both nodes are on one package."""
    package = dict((c["numa_node"], c.get("package_id")) for c in topology["cpus"])
    pf = topology["pci_devices"][vf]["physfn"]
    vf_node = topology["pci_devices"][vf]["numa_node"]
    best = None
    for gpu in gpus:
        level = topology["gpu_nic_affinity"][gpu][pf]
        gpu_node = topology["pci_devices"][gpu]["numa_node"]
        if level == "SYS" and gpu_node != vf_node and package[gpu_node] == package[vf_node]:
            level = "SOCKET"
        best = level if best is None or LEVELS.index(level) < LEVELS.index(best) else best
    return best


def assert_nearest_free(topology, tenants, plan, policy):
    """No tenant keeps a VF while a VF nearer to its GPUs (to its node without GPUs), one its numa
    allows, stays free; each vf_locality level is the reference's."""
    package = dict((c["numa_node"], c.get("package_id")) for c in topology["cpus"])
    pci = topology["pci_devices"]
    taken = set(vf for p in plan["placements"].values() for vf in p["vfs"])
    free = [a for a, d in pci.items() if d.get("physfn") and a not in taken]
    numa_of = dict((t["name"], t.get("numa", policy.get("numa", "required"))) for t in tenants)
    for name, place in plan["placements"].items():
        if not place["vfs"]:
            assert place["vf_locality"] is None
            continue
        node = place["numa_node"]
        allowed = [vf for vf in free if pci[vf]["numa_node"] == node or (
            numa_of[name] == "required_vf_socket" and package[pci[vf]["numa_node"]] == package[node])]
        if place["gpus"]:
            def rank(vf):
                return LEVELS.index(reference_level(topology, place["gpus"], vf))
        else:
            def rank(vf):
                other = pci[vf]["numa_node"]
                return 3 if other == node else 4 if package[other] == package[node] else 5
        mine = [rank(vf) for vf in place["vfs"]]
        assert all(rank(vf) >= max(mine) for vf in allowed), (name, place["vfs"], allowed)
        assert place["vf_locality"]["level"] == LEVELS[max(mine)]


SOCKET_INSTANCES = 20


@pytest.mark.parametrize("per_socket,seed", [(per, seed) for per in (2, 4) for seed in range(SOCKET_INSTANCES)])
def test_the_planner_places_the_cp_sat_optimum_on_socket_families(per_socket, seed):
    """2 sockets x 2 (SNC-2) or 4 (NPS4-like) nodes, NICs on some nodes only, tenants under numa
    required or required_vf_socket: the count and online count of the exact reference whenever the
    plan says proven (on every SNC-2 instance), never more; the rules and nearest-free VFs always."""
    topology, tenants, policy = families.socket_mix(random.Random(11 + 1000 * seed + per_socket), per_socket)
    plan = plan_tenants(topology, tenants, policy)
    placed = plan["placements"].values()
    value = (len(placed), sum(1 for p in placed if p["priority"] == "online"))
    best = placement_cpsat.optimum(topology, tenants, policy)
    assert value <= best
    if per_socket == 2:
        assert plan["search"]["proven"], plan["search"]
    if plan["search"]["proven"]:
        assert value == best, plan["search"]
    else:
        assert plan["search"]["not_proven"]
    assert_exclusive(topology, plan, dict(policy, numa="any"))
    numa_of = dict((t["name"], t.get("numa", policy["numa"])) for t in tenants)
    package = dict((c["numa_node"], c.get("package_id")) for c in topology["cpus"])
    for name, place in plan["placements"].items():
        node = place["numa_node"]
        assert all(node_of(topology, g) == node for g in place["gpus"])
        vf_nodes = set(node_of(topology, vf) for vf in place["vfs"])
        if numa_of[name] == "required":
            assert vf_nodes <= {node} and place["local"]
        else:
            assert all(package[n] == package[node] for n in vf_nodes)
    assert_nearest_free(topology, tenants, plan, policy)


def test_a_node_whose_sriov_pfs_have_no_vfs_yet_says_so(tmp_path):
    """The BlueField-3 ports with SR-IOV on and no VF made: node 0's reason names its PFs and the fix;
    node 1's says it has no VF-capable PF, with no socket hint (its socket has no VF either)."""
    topology, _gpus, pfs = hgx(tmp_path, 2, vfs=0)
    plan = plan_tenants(topology, one_gpu_tenants(1), {"numa": "required", "reserved_cpus": RESERVED})
    reason = plan["unplaced"]["t0"]
    assert ("VFs short on node 0: 1 needed, none in the pool: its SR-IOV PFs %s, %s give none (create the VFs: gpuvirt_sriov_pfs, "
            "or list the PF in policy.vf_pfs)" % (pfs[0], pfs[1])) in reason
    assert "VFs short on node 1: 1 needed, the node has no VF-capable PF (no SR-IOV NIC on it);" in reason
    assert "required_vf_socket" not in reason
