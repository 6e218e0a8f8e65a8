#!/usr/bin/env python
"""Write an HGX H100 8-GPU host on Sapphire Rapids (Ubuntu 24.04) to a directory, as a capture by
playbooks/files/capture_host.py reads: the preview's test host for real shapes, with Sub-NUMA
Clustering off (2 NUMA nodes) or SNC-2 (4).

usage: hgx_tree.py [--snc 1|2] [--vars FILE] OUT_DIR   (--vars: write the preview's desired state there, JSON)

Each part and where it comes from (fixtures under tests/fixtures, each with its .source.txt):
  CPUs, NUMA      2 sockets x 52 cores x 2 threads, node 0 CPUs 0-51,104-155 and node 1 52-103,156-207,
                  GPU0-3 on node 0, GPU4-7 on node 1: the 8x H100 NV18 node of
                  topo/topo-m_8xh100-nv18_gpu-only_2numa_208cpus.txt (stas00/ml-engineering); SMT
                  siblings n and n + 104 (fakes.servers.add_cpus, as Linux numbers Xeon threads).
  SNC-2           each socket split in two nodes of consecutive cores with their siblings (node 0:
                  0-25,104-129; node 1: 26-51,130-155; ...), as Sapphire Rapids' sub-NUMA clusters
                  show in numactl -H (oneapi-src/unified-memory-framework#1289: SNC-4, 12 cores a
                  node, node 0 cpus 0-11 96-107) and lstopo (gramineproject/gramine#530). Which cluster
                  a PCIe root port reports (its _PXM) is the platform's and no public capture of an
                  HGX H100 with SNC-2 says it: assumed here GPU0-1/4-5 (and their NICs) on each
                  socket's first cluster, GPU2-3/6-7 on its second, a BlueField-3 on each first.
  memory          2 TiB in all, split evenly over the nodes (DGX H100: 2 TB system memory).
  GPUs            8x H100 SXM5 80GB, 10de:2330, class 0x030200 (pci/lspci-nn_hgx-h100-8gpu-4nvswitch_
                  tdx-guest_10de-2330_22a3.txt), on nvidia; BARs as the 80 GB GH100 shows them (pci/
                  lspci-vvv_h100-pcie_10de-2331_iommu-group64_partial.txt: Region 0 16M, Region 2 128G,
                  Region 4 32M, each 64-bit prefetchable).
  NVSwitches      4x 10de:22a3, class 0x068000 (the same lspci -nn), on nvidia, under a switch of
                  their own on socket 0 (their place in the host's tree: assumed).
  GPU module IDs  (the Fabric Manager's physicalId; not in sysfs: the preview's policy.gpu_modules) in
                  bus order 8, 5, 7, 6, 4, 1, 3, 2, as OpenNebula's Fabric Manager probe maps them on an HGX
                  host with 10de:22a3 NVSwitches and Xeon Platinum 8480C CPUs (fabricmanager/onefabric_
                  nvswitch-partition_module-id-to-pci_hgx-8480c_FRAGMENT.txt: modules 1-4 at buses c3, df,
                  d1, 9d, 5-8 at 43, 61, 52, 1b), applied to this tree's GPUs in their bus order (that the
                  board keeps the order across hosts: assumed). Modules 5-8 are then GPU0-3 (socket 0) and
                  1-4 GPU4-7 (socket 1), as the published host has 1-4 on its higher buses.
  PCIe            each GPU and its ConnectX-7 under one Broadcom PEX890xx Gen5 switch (1000:c030,
                  pci.ids "PEX890xx PCIe Gen 5 Switch") on a root port of its socket: the GPU and its
                  NIC PIX, other NICs of the socket NODE, the other socket's SYS, as
                  topo/topo-m_8xh100-nv18_9nics_tabs_partial.txt (NVIDIA/nccl#1453) prints them.
  ConnectX-7      8x 15b3:1021 in InfiniBand mode (class 0x020700), single-function, at the buses
                  of rdma/ibdev2netdev_h100-node_8xcx7-ib_2xcx6-eth_annotated.txt
                  (imbue-ai/cluster-health#4: ibp26s0, ibp60s0, ibp77s0, ibp94s0, ibp156s0, ibp188s0,
                  ibp204s0, ibp220s0, RDMA devices mlx5_0/3/4/5/6/9/10/11), IPoIB netdevs (type 32),
                  each port's link_layer InfiniBand; SR-IOV off in their firmware (no sriov_*): the
                  compute fabric, not the tenants'.
  BlueField-3     2x dual-port 15b3:a2dc (BlueField-3 integrated ConnectX-7), Ethernet (the B3220's
                  default mode, NVIDIA BlueField DPU BSP "Supported Platforms"; one host PCIe function
                  per port), in NIC mode, at the buses where the imbue node has its two dual-port
                  Ethernet cards (enp27s0f0np0/f1np1: mlx5_1/2, enp157s0f0np0/f1np1: mlx5_7/8), on
                  a root port of their own; SR-IOV on with 16 VFs a port, VFs laid out as ConnectX
                  cards lay them out (sriov_offset 2 and 17, stride 1: projection.connectx_vf_layout).
  /etc/default/grub  Ubuntu's packaging template of tests/fixtures/boot rendered as tests/tools/dgx_tree.py
                  renders it (noble's grub2 2.12 keeps the template: assumed, not captured)
  /etc/os-release Ubuntu 24.04 LTS (noble); /proc/sys/kernel/osrelease its GA kernel 6.8.0-31-generic.
Needs the collection on the Python path (source scripts/env.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "unit"))

import dgx_tree  # noqa: E402  pylint: disable=import-error,wrong-import-position
from fakes.host_tree import BAR_MEM64_PREFETCH, FakeHost, write_resource  # noqa: E402  pylint: disable=import-error,wrong-import-position
from fakes.servers import add_cpus  # noqa: E402  pylint: disable=import-error,wrong-import-position

OS_RELEASE = ('PRETTY_NAME="Ubuntu 24.04 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION="24.04 LTS (Noble Numbat)"\n'
              'VERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\nUBUNTU_CODENAME=noble\n')
KERNEL = "6.8.0-31-generic"
CORES_PER_SOCKET = 52
THREADS = 2 * 2 * CORES_PER_SOCKET
MEMORY_MB = 2 * 1024 * 1024
# The ConnectX-7s' buses and RDMA device names (imbue-ai/cluster-health#4), GPU0..GPU7's NIC in bus order.
CX7 = ((0x1a, 0), (0x3c, 3), (0x4d, 4), (0x5e, 5), (0x9c, 6), (0xbc, 9), (0xcc, 10), (0xdc, 11))
# The dual-port Ethernet cards' buses and RDMA device names there, one per socket.
BF3 = ((0x1b, (1, 2)), (0x9d, (7, 8)))
BF3_TOTALVFS = 16
SWITCH = ("0x1000", "0xc030")
ROOT_PORT = ("0x8086", "0x352c")
# GPU0..GPU7's module IDs (the docstring's GPU module IDs)
MODULE_IDS = (8, 5, 7, 6, 4, 1, 3, 2)
H100_BARS = {0: (16 << 20, BAR_MEM64_PREFETCH), 2: (128 << 30, BAR_MEM64_PREFETCH), 4: (32 << 20, BAR_MEM64_PREFETCH)}


def nodes_of(snc):
    """{node: [cpus]} of SNC-``snc`` (1: off, 2: SNC-2)."""
    nodes = {}
    per = CORES_PER_SOCKET // snc
    for socket in range(2):
        for cluster in range(snc):
            first = socket * CORES_PER_SOCKET + cluster * per
            cores = list(range(first, first + per))
            nodes[socket * snc + cluster] = cores + [c + 2 * CORES_PER_SOCKET for c in cores]
    return nodes


def gpu_node(index, snc):
    """GPU ``index``'s node: its socket's (GPU0-3 socket 0), under SNC-2 the first cluster for the
    first two GPUs of the socket (assumed, see the docstring)."""
    socket = index // 4
    return socket * snc + ((index % 4) // 2 if snc == 2 else 0)


class Tree:
    def __init__(self, out, snc):
        self.host = FakeHost(out)
        self.snc = snc
        self.group = 20
        self.gpus, self.nics, self.tenant_pfs = {}, {}, []

    def next_group(self):
        self.group += 1
        return self.group

    def switch_ports(self, root_bus, numa, ports):
        """A root port on ``root_bus`` with a PEX890xx below it: -> its downstream ports' addresses."""
        rp = "0000:%02x:01.0" % root_bus
        self.host.add_pci(rp, ROOT_PORT[0], ROOT_PORT[1], "0x060400", root_bus="pci0000:%02x" % root_bus, numa_node=numa)
        usp = "0000:%02x:00.0" % (root_bus + 1)
        self.host.add_pci(usp, SWITCH[0], SWITCH[1], "0x060400", parent=rp, numa_node=numa)
        dsps = []
        for slot in range(ports):
            dsp = "0000:%02x:%02x.0" % (root_bus + 2, slot)
            self.host.add_pci(dsp, SWITCH[0], SWITCH[1], "0x060400", parent=usp, numa_node=numa)
            dsps.append(dsp)
        return dsps

    def gpu_and_cx7(self, index, bus, rdma):
        numa = gpu_node(index, self.snc)
        gpu_dsp, nic_dsp = self.switch_ports(bus - 4, numa, 2)
        gpu = "0000:%02x:00.0" % (bus - 1)
        self.host.add_pci(gpu, "0x10de", "0x2330", "0x030200", parent=gpu_dsp, numa_node=numa, driver="nvidia",
                          iommu_group=self.next_group())
        write_resource(self.host, gpu, dict((i, (0x200000000000 + index * (256 << 30) + (i << 30), size, flags))
                                            for i, (size, flags) in H100_BARS.items()))
        nic = "0000:%02x:00.0" % bus
        netdev = "ibp%ds0" % bus
        path = self.host.add_pci(nic, "0x15b3", "0x1021", "0x020700", parent=nic_dsp, numa_node=numa, driver="mlx5_core",
                                 iommu_group=self.next_group(), netdevs=[netdev], rdma_devices=["mlx5_%d" % rdma])
        self.host.write(path + "/net/%s/type" % netdev, "32\n")
        self.host.write(path + "/infiniband/mlx5_%d/ports/1/link_layer" % rdma, "InfiniBand\n")
        self.gpus["GPU%d" % index] = gpu
        self.nics["CX7-%d" % index] = nic

    def bluefield(self, socket, bus, rdmas):
        numa = socket * self.snc
        root_bus = CX7[4 * socket][0] - 4
        rp = "0000:%02x:03.0" % root_bus
        self.host.add_pci(rp, ROOT_PORT[0], ROOT_PORT[1], "0x060400", root_bus="pci0000:%02x" % root_bus, numa_node=numa)
        for function, rdma in enumerate(rdmas):
            address = "0000:%02x:00.%d" % (bus, function)
            netdev = "enp%ds0f%dnp%d" % (bus, function, function)
            path = self.host.add_pci(address, "0x15b3", "0xa2dc", "0x020000", parent=rp, numa_node=numa, driver="mlx5_core",
                                     iommu_group=self.next_group(), sriov_totalvfs=BF3_TOTALVFS, netdevs=[netdev],
                                     rdma_devices=["mlx5_%d" % rdma])
            self.host.write(path + "/net/%s/type" % netdev, "1\n")
            self.host.write(path + "/infiniband/mlx5_%d/ports/1/link_layer" % rdma, "Ethernet\n")
            # the ConnectX layout of a two-function card (projection.connectx_vf_layout): 2 - f + f * TotalVFs, stride 1
            self.host.write(path + "/sriov_offset", "%d" % (2 - function + function * BF3_TOTALVFS))
            self.host.write(path + "/sriov_stride", "1")
            self.nics["BF3-%d-p%d" % (socket, function)] = address
            self.tenant_pfs.append(address)

    def nvswitches(self):
        for index, dsp in enumerate(self.switch_ports(0x6a, 0, 4)):
            address = "0000:%02x:00.0" % (0x6d + index)
            self.host.add_pci(address, "0x10de", "0x22a3", "0x068000", parent=dsp, numa_node=0, driver="nvidia",
                              iommu_group=self.next_group())


def write_tree(out, snc=1):
    """The HGX H100 tree under ``out`` -> (FakeHost, {GPUn: address}, {name: NIC address}, [tenant PFs])."""
    if snc not in (1, 2):
        raise ValueError("snc: 1 (off) or 2, not %r" % (snc,))
    tree = Tree(out, snc)
    host = tree.host
    host.set_cpuinfo("GenuineIntel")
    nodes = nodes_of(snc)
    for node, cpus in nodes.items():
        host.add_numa_node(node, cpus, memory_mb=MEMORY_MB // len(nodes))
    add_cpus(host, nodes, threads_per_core=2, cores_per_socket=CORES_PER_SOCKET)
    for index, (bus, rdma) in enumerate(CX7):
        tree.gpu_and_cx7(index, bus, rdma)
    for socket, (bus, rdmas) in enumerate(BF3):
        tree.bluefield(socket, bus, rdmas)
    tree.nvswitches()
    host.write("/etc/default/grub", dgx_tree.rendered_grub())
    host.write("/etc/os-release", OS_RELEASE)
    host.write("/proc/sys/kernel/osrelease", KERNEL + "\n")
    for path in ("/etc/modprobe.d", "/etc/libvirt/qemu", "/etc/default/grub.d", "/etc/systemd/system"):
        os.makedirs(host.p(path), exist_ok=True)
    return host, tree.gpus, tree.nics, tree.tenant_pfs


def gpu_modules(gpus):
    """{GPU address: module ID} of the tree's ``gpus`` ({GPUn: address})."""
    return dict((gpus["GPU%d" % index], module) for index, module in enumerate(MODULE_IDS))


TENANTS = ("[{name: h-a, gpus: 1, vfs: 1, vcpus: 16, memory_mb: 65536, hugepage_size: 1G, vlan: 301, state: running}, "
           "{name: h-b, gpus: 1, vfs: 1, vcpus: 16, memory_mb: 65536, hugepage_size: 1G, vlan: 302, state: running}, "
           "{name: h-c, gpus: 1, vfs: 1, vcpus: 16, memory_mb: 65536, hugepage_size: 1G, vlan: 303, state: running}, "
           "{name: h-d, gpus: 1, vfs: 1, vcpus: 16, memory_mb: 65536, hugepage_size: 1G, vlan: 304, state: running}]")
# with Sub-NUMA Clustering off: a tenant of two GPUs too (an NVSwitch partition of 2 lies within a socket;
# under SNC-2 the tree puts the two GPUs of each such partition in different clusters)
PAIR = "{name: h-e, gpus: 2, vfs: 1, vcpus: 16, memory_mb: 65536, hugepage_size: 1G, vlan: 305, state: running}"


def preview_vars(gpus, pfs, snc):
    """The desired state a preview of the tree takes as extra vars (over the example inventory's): its GPUs, 4
    VFs on each BlueField-3 port, 200 1G pages on every node, the example's policy with the host's first cores
    kept and the GPUs' module IDs, four 1-GPU tenants with a VF and a VLAN each (and a 2-GPU one with SNC off)."""
    return {"gpuvirt_gpu_pci_ids": ["10de:2330"], "gpuvirt_gpus": sorted(gpus.values()),
            "gpuvirt_sriov_pfs": [{"pf": pf, "num_vfs": 4} for pf in pfs],
            "gpuvirt_hugepages": [{"size": "1G", "count": 200, "node": node} for node in range(2 * snc)],
            "gpuvirt_tenant_policy": {"numa": "required", "reserved_cpus": "0-1,104-105", "smt": "whole_cores",
                                      "emulator": "isolate", "pcie_affinity": "prefer", "gpu_modules": gpu_modules(gpus)},
            "gpuvirt_survey_tenants": TENANTS if snc != 1 else TENANTS[:-1] + ", " + PAIR + "]"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--snc", type=int, choices=(1, 2), default=1, help="sub-NUMA clusters a socket (1: off)")
    parser.add_argument("--vars", help="write the preview's desired state (extra vars, JSON) to this file")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    if os.path.exists(args.out) and os.listdir(args.out):
        print("hgx_tree: %s exists and is not empty: give a new directory" % args.out, file=sys.stderr)
        return 2
    _host, gpus, _nics, pfs = write_tree(args.out, args.snc)
    if args.vars:
        with open(args.vars, "w", encoding="utf-8") as handle:
            json.dump(preview_vars(gpus, pfs, args.snc), handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
