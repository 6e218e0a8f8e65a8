# -*- coding: utf-8 -*-
"""tests/tools/hgx_tree.py: the HGX H100 host the preview tests read holds what the real captures it cites
show: the ConnectX-7s at the buses (and with the RDMA names) of an H100 node's ibdev2netdev, the CPUs of an
8x H100 node's nvidia-smi topo -m on its two nodes, each GPU PIX to one NIC, NODE to its socket's others and
SYS to the other socket's, as another H100 node's topo -m prints them; SNC-2 splits each socket in two."""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import read_cpulist

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")


def load_tool():
    spec = importlib.util.spec_from_file_location("hgx_tree", os.path.join(REPO_ROOT, "tests", "tools", "hgx_tree.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture(path):
    with open(os.path.join(FIXTURES, path), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture(name="hgx", scope="module")
def fixture_hgx(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hgx") / "root")
    _host, gpus, nics, pfs = load_tool().write_tree(root)
    return read_topology(root, ["10de:2330"]), gpus, nics, pfs


def test_the_connectx7s_are_the_h100_nodes_infiniband_ports(hgx):
    topo, _gpus, _nics, _pfs = hgx
    # "mlx5_0 port 1 ==> ibp26s0 (Down) # CX-7 1/8 infiniband": the poster's comments name the CX-7s
    rows = re.findall(r"^(mlx5_\d+)\s+port\s+1\s+==>\s+ibp(\d+)s0\s.*# CX-7", fixture(
        "rdma/ibdev2netdev_h100-node_8xcx7-ib_2xcx6-eth_annotated.txt"), flags=re.M)
    assert len(rows) == 8
    pci = topo["pci_devices"]
    cx7 = dict((a, d) for a, d in pci.items() if d["device_id"] == "0x1021")
    assert sorted(cx7) == sorted("0000:%02x:00.0" % int(bus) for _rdma, bus in rows)
    for rdma, bus in rows:
        dev = pci["0000:%02x:00.0" % int(bus)]
        assert dev["rdma_devices"] == [rdma] and dev["netdevs"] == ["ibp%ss0" % bus]
        assert dev["class"] == "0x020700" and dev["link_layers"] == {rdma: {"1": "InfiniBand"}}


def test_the_cpus_and_gpu_nodes_are_the_h100_nodes(hgx):
    topo, gpus, _nics, _pfs = hgx
    # "GPU0 ... 0-51,104-155 0": each GPU row's CPU and NUMA affinity
    rows = re.findall(r"^GPU(\d)\s.*\s(\S+)\s+(\d)\s*$", fixture("topo/topo-m_8xh100-nv18_gpu-only_2numa_208cpus.txt"), flags=re.M)
    assert len(rows) == 8
    nodes = dict((n["id"], n["cpus"]) for n in topo["numa_nodes"])
    for index, cpus, node in rows:
        assert nodes[int(node)] == read_cpulist(cpus)
        assert [g["numa_node"] for g in topo["gpus"] if g["address"] == gpus["GPU%s" % index]] == [int(node)]


def test_each_gpu_is_pix_to_its_own_nic_node_to_its_sockets_and_sys_to_the_other(hgx):
    """As NVIDIA/nccl#1453's topo -m: per GPU one PIX NIC, three NODE, four SYS among the ConnectX-7s."""
    topo, gpus, nics, _pfs = hgx
    matrix = fixture("topo/topo-m_8xh100-nv18_9nics_tabs_partial.txt")
    real = [sorted(row.split("\t")[10:18]) for row in matrix.splitlines() if row.startswith("GPU")]
    affinity = topo["gpu_nic_affinity"]
    for index in range(8):
        levels = affinity[gpus["GPU%d" % index]]
        assert levels[nics["CX7-%d" % index]] == "PIX"
        assert sorted(levels[nics["CX7-%d" % other]] for other in range(8)) == real[index]


def test_snc2_splits_each_socket_in_two_nodes(tmp_path):
    root = str(tmp_path / "root")
    _host, gpus, _nics, pfs = load_tool().write_tree(root, snc=2)
    topo = read_topology(root, ["10de:2330"])
    nodes = dict((n["id"], n["cpus"]) for n in topo["numa_nodes"])
    assert sorted(nodes) == [0, 1, 2, 3]
    assert nodes[0] == list(range(0, 26)) + list(range(104, 130)) and nodes[3] == list(range(78, 104)) + list(range(182, 208))
    by_node = {}
    for gpu in topo["gpus"]:
        by_node.setdefault(gpu["numa_node"], []).append(gpu["address"])
    assert sorted(len(v) for v in by_node.values()) == [2, 2, 2, 2]
    assert sorted(topo["pci_devices"][pf]["numa_node"] for pf in pfs) == [0, 0, 2, 2]
    with pytest.raises(ValueError):
        load_tool().write_tree(str(tmp_path / "bad"), snc=3)


def test_the_bluefield_ports_place_their_vfs_as_a_connectx_card(hgx):
    topo, _gpus, _nics, pfs = hgx
    pci = topo["pci_devices"]
    assert [(pci[pf]["sriov_totalvfs"], pci[pf]["sriov_offset"], pci[pf]["sriov_stride"]) for pf in pfs] == [(16, 2, 1), (16, 17, 1)] * 2
    assert all(pci[pf]["model"] == "BlueField-3 integrated ConnectX-7" for pf in pfs)


def test_the_gpu_module_ids_follow_the_published_hgx_hosts_bus_order(hgx):
    """The module IDs the preview gives (policy.gpu_modules) are those of OpenNebula's HGX host in the order of
    its GPUs' buses, put on this tree's GPUs in theirs: modules 5-8 on socket 0 (node 0), 1-4 on socket 1."""
    text = fixture("fabricmanager/onefabric_nvswitch-partition_module-id-to-pci_hgx-8480c_FRAGMENT.txt")
    published = {}
    for addresses, ids in re.findall(r'PARTITION_GPU_ADDR="([^"]+)",\s+PARTITION_GPU_IDS="([^"]+)"', text):
        published.update(zip(addresses.split(), map(int, ids.split())))
    in_bus_order = [published[address] for address in sorted(published)]
    topology, gpus, _nics, _pfs = hgx
    modules = load_tool().gpu_modules(gpus)
    assert [modules[address] for address in sorted(modules)] == in_bus_order
    node = dict((gpu["address"], gpu["numa_node"]) for gpu in topology["gpus"])
    assert sorted(m for a, m in modules.items() if node[a] == 0) == [5, 6, 7, 8]
    assert sorted(m for a, m in modules.items() if node[a] == 1) == [1, 2, 3, 4]
