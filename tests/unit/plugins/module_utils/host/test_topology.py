# -*- coding: utf-8 -*-
"""The host model over fake roots shaped after real GPU servers.

Each server tree is laid out so that it reproduces a real ``nvidia-smi topo -m`` output
kept in tests/fixtures/topo (with its source), and the tests assert what that real output
shows: GPU count, each GPU's NUMA node and CPU affinity, and every GPU/NIC (or GPU/GPU)
affinity level, computed here from the PCI tree alone.
"""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import read_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import TopologyReader, read_topology

from fakes.host_tree import FakeHost  # pylint: disable=import-error
from fakes.servers import Switch, add_cpus, build_dgx_a100_class  # pylint: disable=import-error

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures")


def parse_topo_matrix(path):
    """Parse ``nvidia-smi topo -m`` (tab- or space-separated) into
    ``(names, levels, cpu_affinity, numa_affinity)``."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    header = lines[0].split()
    names = [h for h in header if re.match(r"^(GPU|NIC)\d+$", h)]
    levels, cpus, numa = {}, {}, {}
    for line in lines[1:]:
        tokens = line.split()
        if not tokens or tokens[0] not in names:
            continue
        row = tokens[0]
        values = tokens[1:1 + len(names)]
        levels[row] = dict(zip(names, values))
        rest = tokens[1 + len(names):]
        if rest:
            cpus[row] = read_cpulist(rest[0])
            numa[row] = int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None
    return names, levels, cpus, numa


def build_pcie_8gpu_2socket(root):
    """8 PCIe GPUs, 2 sockets x 14 cores with HT, after
    topo/topo-m_8gpu-pcie-only_no-nic_2x14core.txt: pairs behind one switch (PIX), two
    switches per host bridge (PHB), one host bridge per socket (SYS across)."""
    host = FakeHost(root)
    host.set_cpuinfo("GenuineIntel")
    nodes = {0: list(range(0, 14)) + list(range(28, 42)), 1: list(range(14, 28)) + list(range(42, 56))}
    for node, cpus in nodes.items():
        host.add_numa_node(node, cpus)
    add_cpus(host, nodes, threads_per_core=2, cores_per_socket=14)
    gpus = {}
    for node in (0, 1):
        bus = 0x00 if node == 0 else 0x80
        for pair in range(2):
            rp = "0000:%02x:%02x.0" % (bus, 1 + pair)
            host.add_pci(rp, "0x8086", "0x2030", "0x060400", root_bus="pci0000:%02x" % bus, numa_node=node)
            switch = Switch(host, "0000:%02x:00.0" % (bus + 0x10 + 0x10 * pair), rp, node)
            for slot in range(2):
                dsp = switch.port()
                address = "0000:%02x:00.0" % (switch.bus + 1 + slot)
                index = 4 * node + 2 * pair + slot
                host.add_pci(address, "0x10de", "0x2331", "0x030200", parent=dsp, numa_node=node,
                             iommu_group=100 + index)
                gpus["GPU%d" % index] = address
    return host, gpus


def test_dgx_a100_class_matches_real_topo_matrix(tmp_path):
    _host, gpus, nics = build_dgx_a100_class(tmp_path)
    names, levels, cpu_affinity, numa = parse_topo_matrix(
        os.path.join(FIXTURES, "topo", "topo-m_8xa100-sxm4-40gb_10xmlx5_epyc7742-nps4_driver525.txt"))
    topo = read_topology(str(tmp_path))

    assert len(topo["gpus"]) == 8 == len([n for n in names if n.startswith("GPU")])
    assert {g["model"] for g in topo["gpus"]} == {"A100 SXM4 40GB"}
    assert len(topo["numa_nodes"]) == 8
    node_cpus = {n["id"]: set(n["cpus"]) for n in topo["numa_nodes"]}
    by_address = {g["address"]: g for g in topo["gpus"]}
    for name, address in gpus.items():
        assert by_address[address]["numa_node"] == numa[name], name
        assert node_cpus[numa[name]] == set(cpu_affinity[name]), name
    compared = 0
    for gname, gaddr in gpus.items():
        for nname, naddr in nics.items():
            assert topo["gpu_nic_affinity"][gaddr][naddr] == levels[gname][nname], (gname, nname)
            compared += 1
    assert compared == 80
    # NIC/NIC levels from the same real matrix (PXB inside a complex, PIX for a dual-port card).
    pci = topo["pci_devices"]
    for first, faddr in nics.items():
        for second, saddr in nics.items():
            if first != second:
                assert TopologyReader.affinity(pci, faddr, saddr) == levels[first][second], (first, second)


def test_dgx_a100_class_iommu_and_sriov(tmp_path):
    _host, gpus, nics = build_dgx_a100_class(tmp_path)
    topo = read_topology(str(tmp_path))
    assert topo["iommu"]["enabled"] is True
    groups = {g["address"]: g["iommu_group"] for g in topo["gpus"] + topo["nics"]}
    assert len(set(groups.values())) == len(groups) == 18  # every endpoint isolated (ACS)
    for address in list(gpus.values()) + list(nics.values()):
        assert topo["iommu"]["groups"][str(groups[address])] == [address]
    nic0 = next(n for n in topo["nics"] if n["address"] == nics["NIC0"])
    assert nic0["model"] == "ConnectX-5" and nic0["sriov_totalvfs"] == 8 and nic0["rdma_devices"] == ["mlx5_0"]
    gpu0 = topo["pci_devices"][gpus["GPU0"]]
    assert len(gpu0["upstream"]) == 5 and topo["pci_devices"][gpu0["upstream"][-1]]["is_bridge"]
    assert gpu0["root_bus"] == "pci0000:10"


def test_dgx_a100_class_cpus_and_smt(tmp_path):
    build_dgx_a100_class(tmp_path)
    topo = read_topology(str(tmp_path))
    cpus = {c["id"]: c for c in topo["cpus"]}
    assert len(cpus) == 256
    assert cpus[0]["siblings"] == [0, 128] and cpus[128]["siblings"] == [0, 128]
    assert cpus[48]["numa_node"] == 3 and cpus[176]["numa_node"] == 3
    assert cpus[64]["package_id"] == 1 and cpus[63]["package_id"] == 0
    assert topo["cpu_vendor"] == "amd" and topo["virtual_machine"] is None


def test_pcie_only_server_gpu_levels_match_real_matrix(tmp_path):
    _host, gpus = build_pcie_8gpu_2socket(tmp_path)
    _names, levels, cpu_affinity, numa = parse_topo_matrix(
        os.path.join(FIXTURES, "topo", "topo-m_8gpu-pcie-only_no-nic_2x14core.txt"))
    topo = read_topology(str(tmp_path))
    assert len(topo["gpus"]) == 8
    nodes = {n["id"]: set(n["cpus"]) for n in topo["numa_nodes"]}
    for name, address in gpus.items():
        assert topo["pci_devices"][address]["numa_node"] == numa[name]
        assert nodes[numa[name]] == set(cpu_affinity[name])
        for other, other_address in gpus.items():
            if other != name:
                level = TopologyReader.affinity(topo["pci_devices"], address, other_address)
                assert level == levels[name][other], (name, other)
    assert topo["gpu_nic_affinity"] == {g: {} for g in gpus.values()}


@pytest.mark.parametrize("numa_file,expected", [("-1", None), ("1", 1), ("", None), (None, None)])
def test_numa_node_unknown_values(tmp_path, numa_file, expected):
    host = FakeHost(tmp_path)
    path = host.add_pci("0000:81:00.0", "0x1234", "0x11e8", "0x00ff00", root_bus="pci0000:80")
    if numa_file is None:
        os.unlink(host.p(path + "/numa_node"))
    else:
        host.write(path + "/numa_node", numa_file)
    dev = read_topology(str(tmp_path))["pci_devices"]["0000:81:00.0"]
    assert dev["numa_node"] == expected
    assert dev["driver"] is None and dev["iommu_group"] is None and dev["sriov_totalvfs"] is None


def test_no_iommu_no_numa_dirs_and_extra_ids(tmp_path):
    host = FakeHost(tmp_path)
    host.write("/proc/meminfo", "MemTotal:        4026532 kB\n")
    host.write("/sys/devices/system/cpu/cpu0/topology/core_id", "0")
    host.add_pci("0000:00:05.0", "0x1234", "0x11e8", "0x00ff00")
    host.add_pci("0000:00:06.0", "0x1b36", "0x0010", "0x010802", sriov_totalvfs=4)
    topo = read_topology(str(tmp_path), gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])
    assert topo["iommu"] == {"enabled": False, "units": [], "firmware_table": None, "groups": {}}
    assert topo["numa_nodes"][0]["id"] == 0 and topo["numa_nodes"][0]["memory_mb"] == 3932
    assert [g["address"] for g in topo["gpus"]] == ["0000:00:05.0"]
    assert [n["address"] for n in topo["nics"]] == ["0000:00:06.0"]
    assert topo["gpu_nic_affinity"]["0000:00:05.0"]["0000:00:06.0"] == "PHB"


def test_vanished_device_is_skipped(tmp_path):
    host = FakeHost(tmp_path)
    host.add_pci("0000:81:00.0", "0x15b3", "0x1017", "0x020000", root_bus="pci0000:80")
    path = host.add_pci("0000:81:00.1", "0x15b3", "0x1017", "0x020000", root_bus="pci0000:80")
    os.unlink(host.p(path + "/vendor"))  # removed between listing and reading
    topo = read_topology(str(tmp_path))
    assert list(topo["pci_devices"]) == ["0000:81:00.0"]


def test_sriov_vfs_and_indexes(tmp_path):
    host = FakeHost(tmp_path)
    host.add_pci("0000:80:00.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1)
    host.add_pci("0000:81:00.0", "0x15b3", "0x101d", "0x020000", parent="0000:80:00.0", numa_node=1,
                 driver="mlx5_core", sriov_totalvfs=8, netdevs=["ens1f0np0"])
    vfs = ["0000:81:00.%d" % i for i in range(2, 6)]
    host.add_vfs("0000:81:00.0", vfs, "0x15b3", "0x101e", "0x020000", numa_node=1, groups=[40, 41, 42, 43])
    topo = read_topology(str(tmp_path))
    pf = topo["pci_devices"]["0000:81:00.0"]
    assert pf["sriov_numvfs"] == 4 and pf["virtfns"] == vfs and pf["netdevs"] == ["ens1f0np0"]
    for index, vf in enumerate(vfs):
        dev = topo["pci_devices"][vf]
        assert dev["physfn"] == "0000:81:00.0" and dev["vf_index"] == index
        assert dev["upstream"] == ["0000:80:00.0"] and dev["model"] == "ConnectX Family mlx5Gen Virtual Function"
    assert [n["is_vf"] for n in topo["nics"]] == [False, True, True, True, True]
    assert topo["netdevs"]["ens1f0np0"]["pci_address"] == "0000:81:00.0"


def test_bad_extra_ids_raise(tmp_path):
    with pytest.raises(ValueError, match="10de-20b5"):
        TopologyReader(str(tmp_path), gpu_ids=["10de-20b5"])


def test_a_device_whose_sysfs_link_leaves_the_root_is_not_reported(tmp_path):
    """A capture whose /sys/bus/pci/devices links are absolute would name the devices of the
    machine reading it: such a device is left out, the ones inside the tree are read."""
    tree = FakeHost(tmp_path / "root")
    tree.add_pci("0000:17:00.0", "0x10de", "0x20b0", "0x030200", numa_node=0)
    outside = tmp_path / "outside" / "0000:81:00.0"
    outside.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", "0x20b0"), ("class", "0x030200"), ("numa_node", "1")):
        (outside / name).write_text(value + "\n")
    os.symlink(str(outside), tree.p("/sys/bus/pci/devices/0000:81:00.0"))
    model = read_topology(str(tmp_path / "root"))
    assert sorted(model["pci_devices"]) == ["0000:17:00.0"]
    assert [gpu["address"] for gpu in model["gpus"]] == ["0000:17:00.0"]
