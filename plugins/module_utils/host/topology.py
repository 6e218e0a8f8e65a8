# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host model: NUMA nodes, CPUs, the PCI tree, IOMMU groups, SR-IOV, GPUs and NICs.

This is the one place that discovers a host's sysfs/procfs state; modules build on
:func:`read_topology` instead of walking sysfs themselves. Everything is read under a root
directory, so a captured tree (an unpacked sosreport, a test fixture) reads like a host.
Missing files, ``numa_node`` -1, driverless devices, an absent IOMMU and devices that
vanish while being read give ``None``/empty values, never an exception.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_config
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.captured_programs import hypervisor_versions
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import split_cmdline
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpu_vendor import IOMMU_TABLES, vendor_of_cpuinfo, virtual_machine
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import MAX_CPUS, read_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZE_NAMES, SYSFS_NAMES
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import is_address, nearest_shared_bridge, upstream_bridges
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

__metaclass__ = type

PCI_DEVICES = "/sys/bus/pci/devices"
NODE_DIR = "/sys/devices/system/node"
CPU_DIR = "/sys/devices/system/cpu"
# the sizes the collection manages are reported even where the kernel lacks them
HUGEPAGE_SIZES = tuple(SYSFS_NAMES[name] for name in SIZE_NAMES)


class TopologyReader:
    """Reads the host model under ``root``. ``gpu_ids``/``nic_ids`` are extra
    ``vendor:device`` pairs to classify as GPUs or NICs (stand-ins, new models)."""

    def __init__(self, root="/", gpu_ids=(), nic_ids=(), fs=None):
        self.fs = fs if fs is not None else Sysfs(root)
        self.extra_gpu_ids = {pci_ids.parse_vendor_device(pair) for pair in gpu_ids or ()}
        self.extra_nic_ids = {pci_ids.parse_vendor_device(pair) for pair in nic_ids or ()}

    # ------------------------------------------------------------------ whole model
    def read(self):
        return self.classified(self.read_unclassified())

    def classified(self, model):
        """``model`` (from :meth:`read_unclassified`, changed in place) with its GPUs, NICs and
        their affinity, as this reader's ``gpu_ids``/``nic_ids`` classify them."""
        gpus, nics = self.classify(model["pci_devices"])
        model.update(gpus=gpus, nics=nics, gpu_nic_affinity=self.affinity_matrix(model["pci_devices"], gpus, nics))
        return model

    def read_unclassified(self):
        """The host model but its ``gpus``, ``nics`` and ``gpu_nic_affinity``: what the host
        shows whatever ids a caller classifies by (:meth:`Host.topology` keeps it per run)."""
        pci = self.read_pci_devices()
        groups = self.read_iommu_groups()
        cpus = self.read_cpus()
        nodes = self.read_numa_nodes(cpus)
        node_of_cpu = {cpu: node["id"] for node in nodes for cpu in node["cpus"]}
        for cpu in cpus:
            cpu["numa_node"] = node_of_cpu.get(cpu["id"])
        cpuinfo = self.fs.read_keys("/proc/cpuinfo", ("vendor_id", "flags"))
        return {
            "root": self.fs.root,
            "kernel_release": self.fs.read("/proc/sys/kernel/osrelease"),
            "boot_id": self.fs.read("/proc/sys/kernel/random/boot_id"),
            "cpu_vendor": vendor_of_cpuinfo(cpuinfo),
            # a VM's IOMMU is its hypervisor's to give (preflight's advice), not a BIOS setting
            "virtual_machine": virtual_machine(cpuinfo, self.fs.read("/sys/class/dmi/id/sys_vendor")),
            "cmdline": split_cmdline(self.fs.read("/proc/cmdline", "")),
            "numa_nodes": nodes,
            "cpus": cpus,
            "pci_devices": pci,
            "gpus": None,
            "nics": None,
            "gpu_nic_affinity": None,
            "iommu": {
                "enabled": bool(groups),
                "units": self.fs.listdir("/sys/class/iommu"),
                "firmware_table": next((t for t, _vendor in IOMMU_TABLES
                                        if self.fs.exists("/sys/firmware/acpi/tables/" + t)), None),
                "groups": groups,
            },
            "netdevs": self.read_netdevs(),
            # libvirt's and QEMU's versions as a capture holds them (captured_programs; all None
            # on the running host, whose programs a caller asks itself)
            "hypervisor": hypervisor_versions(self.fs),
        }

    # ------------------------------------------------------------------ CPUs / NUMA
    def read_cpus(self):
        online_text = self.fs.read(CPU_DIR + "/online")
        online = set(read_cpulist(online_text)) if online_text else None
        cpus = []
        for entry in self.fs.listdir(CPU_DIR):
            match = re.match(r"^cpu(\d+)$", entry)
            if not match:
                continue
            cpu = int(match.group(1))
            base = "%s/%s/topology" % (CPU_DIR, entry)
            siblings = read_cpulist(self.fs.read(base + "/thread_siblings_list")) or [cpu]
            cpus.append({
                "id": cpu,
                "core_id": self.fs.read_int(base + "/core_id"),
                "package_id": self.fs.read_int(base + "/physical_package_id"),
                "numa_node": None,
                "siblings": siblings,
                "online": True if online is None else cpu in online,
            })
        cpus.sort(key=lambda c: c["id"])
        return cpus

    def read_numa_nodes(self, cpus):
        # a node's cpulist is bounded by the CPUs the host has before it is expanded
        bound = max(c["id"] for c in cpus) + 1 if cpus else MAX_CPUS
        nodes = []
        for entry in self.fs.listdir(NODE_DIR):
            match = re.match(r"^node(\d+)$", entry)
            if not match:
                continue
            base = "%s/%s" % (NODE_DIR, entry)
            node = int(match.group(1))
            distances = [int(d) for d in (self.fs.read(base + "/distance") or "").split() if d.isdigit()]
            nodes.append({
                "id": node,
                "cpus": read_cpulist(self.fs.read(base + "/cpulist"), bound=bound),
                "memory_mb": self._node_memory_mb(base + "/meminfo"),
                "hugepages": self._hugepages(base + "/hugepages"),
                "distances": distances,
            })
        if not nodes:
            # No NUMA support in the kernel: one node holding everything.
            nodes.append({
                "id": 0,
                "cpus": [c["id"] for c in cpus],
                "memory_mb": self._node_memory_mb("/proc/meminfo"),
                "hugepages": self._hugepages("/sys/kernel/mm/hugepages"),
                "distances": [10],
            })
        nodes.sort(key=lambda n: n["id"])
        return nodes

    def _node_memory_mb(self, path):
        for line in self.fs.read_keys(path, ("MemTotal",)).splitlines():
            match = re.search(r"MemTotal:\s+(\d+)\s*kB", line)
            if match:
                return int(match.group(1)) // 1024
        return None

    def _hugepages(self, base):
        sizes = {}
        names = set(HUGEPAGE_SIZES) | {e[len("hugepages-"):] for e in self.fs.listdir(base) if e.startswith("hugepages-")}
        for size in sorted(names, key=lambda s: int(re.sub(r"\D", "", s) or 0)):
            total = self.fs.read_int("%s/hugepages-%s/nr_hugepages" % (base, size))
            free = self.fs.read_int("%s/hugepages-%s/free_hugepages" % (base, size))
            if total is None and size not in HUGEPAGE_SIZES:
                continue
            sizes[size] = {"total": total or 0, "free": free or 0, "supported": total is not None}
        return sizes

    # ------------------------------------------------------------------ PCI
    def read_pci_devices(self):
        devices = {}
        for address in self.fs.listdir(PCI_DEVICES):
            if not is_address(address):
                continue
            device = self.read_pci_device(address)
            if device is not None:
                devices[address] = device
        for address, device in devices.items():
            if device["physfn"] and device["physfn"] in devices:
                pf_vfs = devices[device["physfn"]]["virtfns"]
                device["vf_index"] = pf_vfs.index(address) if address in pf_vfs else None
        return devices

    def read_pci_device(self, address):
        base = "%s/%s" % (PCI_DEVICES, address)
        vendor = pci_ids.normalize_id(self.fs.read(base + "/vendor"))
        if vendor is None:
            return None  # vanished while being read, or not a real device directory
        device_id = pci_ids.normalize_id(self.fs.read(base + "/device"))
        pci_class = self.fs.read(base + "/class")
        class_value = int(pci_class, 16) if pci_class and re.match(r"^0x[0-9a-fA-F]+$", pci_class) else None
        real = self.fs.realpath(base) or ""
        parts = [p for p in real.split("/") if p]
        root_bus = next((p for p in parts if p.startswith("pci") and ":" in p), None)
        upstream = upstream_bridges(real, address)
        numa = self.fs.read_int(base + "/numa_node")
        group = self.fs.readlink_name(base + "/iommu_group")
        override = self.fs.read(base + "/driver_override")
        autoprobe = self.fs.read_int(base + "/sriov_drivers_autoprobe")
        virtfns = []
        for entry in self.fs.listdir(base):
            match = re.match(r"^virtfn(\d+)$", entry)
            if match:
                target = self.fs.readlink_name(base + "/" + entry)
                if target:
                    virtfns.append((int(match.group(1)), target))
        totalvfs = self.fs.read_int(base + "/sriov_totalvfs")
        layout = self.read_vf_layout(base) if totalvfs is not None else (None, None)
        return {
            "address": address,
            "vendor_id": vendor,
            "device_id": device_id,
            "class": ("0x%06x" % class_value) if class_value is not None else None,
            "driver": self.fs.readlink_name(base + "/driver"),
            "driver_override": None if override in (None, "", "(null)") else override,
            "numa_node": None if numa is None or numa < 0 else numa,
            "iommu_group": int(group) if group and group.isdigit() else None,
            "sriov_totalvfs": totalvfs,
            "sriov_numvfs": self.fs.read_int(base + "/sriov_numvfs"),
            "sriov_drivers_autoprobe": None if autoprobe is None else bool(autoprobe),
            # the routing-ID offset and stride of VF 0 and the next ones (PCIe SR-IOV capability)
            "sriov_offset": layout[0],
            "sriov_stride": layout[1],
            "physfn": self.fs.readlink_name(base + "/physfn"),
            "virtfns": [target for _index, target in sorted(virtfns)],
            "vf_index": None,
            "netdevs": self.fs.listdir(base + "/net"),
            "rdma_devices": self.fs.listdir(base + "/infiniband"),
            "link_layers": self.read_link_layers(base),
            "upstream": upstream,
            "root_bus": root_bus,
            "is_bridge": class_value is not None and (class_value >> 8) == pci_ids.CLASS_BRIDGE_PCI,
            # the link the device can train to, as the kernel prints it ("16.0 GT/s PCIe", "16 GT/s" before 5.7;
            # None where a capture lacks it): what NCCL reads for its topology (guest.nccl_topo)
            "max_link_speed": self.fs.read(base + "/max_link_speed") or None,
            "max_link_width": self.fs.read_int(base + "/max_link_width"),
            "model": pci_ids.gpu_model(vendor, device_id) or pci_ids.nic_model(vendor, device_id),
        }

    def read_vf_layout(self, base):
        """(First VF Offset, VF Stride) of an SR-IOV PF: sysfs ``sriov_offset``/``sriov_stride``,
        else the SR-IOV capability in its ``config`` (a kernel without those attributes)."""
        offset, stride = self.fs.read_int(base + "/sriov_offset"), self.fs.read_int(base + "/sriov_stride")
        if offset is not None and stride is not None:
            return offset, stride
        capability = pci_config.sriov_capability(self.fs.read_bytes(base + "/config"))
        if capability is None:
            return offset, stride
        return capability["offset"], capability["stride"]

    def read_link_layers(self, base):
        """{RDMA device: {port: link layer}} of a PCI function (``infiniband/<dev>/ports/<n>/link_layer``:
        InfiniBand or Ethernet, as the RDMA core writes it): a port's mode where no netdev says it."""
        layers = {}
        for rdma in self.fs.listdir(base + "/infiniband"):
            ports = {}
            for port in self.fs.listdir("%s/infiniband/%s/ports" % (base, rdma)):
                text = (self.fs.read("%s/infiniband/%s/ports/%s/link_layer" % (base, rdma, port)) or "").strip()
                if text:
                    ports[port] = text
            if ports:
                layers[rdma] = ports
        return layers

    def read_iommu_groups(self):
        groups = {}
        for entry in self.fs.listdir("/sys/kernel/iommu_groups"):
            if entry.isdigit():
                groups[entry] = self.fs.listdir("/sys/kernel/iommu_groups/%s/devices" % entry)
        return dict(sorted(groups.items(), key=lambda item: int(item[0])))

    def classify(self, pci):
        gpus, nics = [], []
        for address in sorted(pci):
            dev = pci[address]
            key = (dev["vendor_id"], dev["device_id"])
            base_class = int(dev["class"], 16) >> 16 if dev["class"] else None
            is_gpu = key in self.extra_gpu_ids or (
                dev["vendor_id"] == pci_ids.NVIDIA and base_class == pci_ids.CLASS_DISPLAY)
            is_nic = not is_gpu and (key in self.extra_nic_ids or base_class == pci_ids.CLASS_NETWORK)
            common = {
                "address": address,
                "model": dev["model"],
                "vendor_id": dev["vendor_id"],
                "device_id": dev["device_id"],
                "numa_node": dev["numa_node"],
                "iommu_group": dev["iommu_group"],
                "driver": dev["driver"],
            }
            if is_gpu:
                gpus.append(common)
            elif is_nic:
                common.update({
                    "netdevs": dev["netdevs"],
                    "rdma_devices": dev["rdma_devices"],
                    "sriov_totalvfs": dev["sriov_totalvfs"],
                    "sriov_numvfs": dev["sriov_numvfs"],
                    "is_vf": dev["physfn"] is not None,
                })
                nics.append(common)
        return gpus, nics

    # ------------------------------------------------------------------ affinity
    @staticmethod
    def affinity(pci, first, second):
        """The level ``nvidia-smi topo -m`` prints between two devices, from the PCI tree
        and NUMA nodes alone: PIX (at most one PCIe switch between them), PXB (several
        bridges, no host bridge), PHB (through their shared host bridge), NODE (different
        host bridges of one NUMA node), SYS (across NUMA nodes)."""
        dev_a, dev_b = pci[first], pci[second]
        chain_a = [first] + dev_a["upstream"]
        chain_b = [second] + dev_b["upstream"]
        common = nearest_shared_bridge(chain_a, chain_b)
        if common is not None:
            # Bridges strictly between each device and the shared one: a switch shows as
            # its downstream port under its upstream port, so one switch leaves one.
            between = max(chain_a.index(common), chain_b.index(common)) - 1
            return "PIX" if between <= 1 else "PXB"
        if dev_a["root_bus"] is not None and dev_a["root_bus"] == dev_b["root_bus"]:
            return "PHB"
        node_a, node_b = dev_a["numa_node"], dev_b["numa_node"]
        if node_a == node_b:
            return "NODE"
        return "SYS"

    def affinity_matrix(self, pci, gpus, nics):
        matrix = {}
        for gpu in gpus:
            matrix[gpu["address"]] = {
                nic["address"]: self.affinity(pci, gpu["address"], nic["address"]) for nic in nics
            }
        return matrix

    # ------------------------------------------------------------------ netdevs
    def read_netdevs(self):
        netdevs = {}
        for name in self.fs.listdir("/sys/class/net"):
            base = "/sys/class/net/" + name
            device = self.fs.realpath(base + "/device")
            address = device.rsplit("/", 1)[-1] if device else None
            netdevs[name] = {
                "pci_address": address if is_address(address) else None,
                "mac": self.fs.read(base + "/address"),
                "operstate": self.fs.read(base + "/operstate"),
                # ARPHRD_*: 1 Ethernet, 32 InfiniBand (IPoIB): a VPI port's link type (port_modes)
                "type": self.fs.read_int(base + "/type"),
            }
        return netdevs


def read_topology(root="/", gpu_ids=(), nic_ids=()):
    """The host model as a dict (see docs/CONTRACTS.md)."""
    return TopologyReader(root, gpu_ids=gpu_ids, nic_ids=nic_ids).read()


def topology_info(params, host, run):  # pylint: disable=unused-argument
    """The host_topology_info module: the host model under the host's root."""
    try:
        return {"topology": host.topology(params["gpu_ids"], params["nic_ids"])}
    except ValueError as exc:
        raise InputError("gpu_ids/nic_ids: %s" % exc)
