# -*- coding: utf-8 -*-
"""Builds fake sysfs/procfs trees laid out like a real kernel's, for the host model.

The layout (links under /sys/bus/pci/devices into /sys/devices/pciDDDD:BB/..., driver and
iommu_group symlinks, virtfnN/physfn links, per-node hugepage directories) is the one a
real kernel presents; tests/fixtures/lab/*.tar hold real captures to compare against. What the
trees contain (which GPU sits where) comes from real public outputs, cited by each test.
"""

from __future__ import annotations

import os


def parse_cpulist(text):
    cpus = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def format_cpulist(cpus):
    cpus = sorted(set(cpus))
    ranges = []
    start = prev = None
    for cpu in cpus:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            ranges.append((start, prev))
            start = prev = cpu
    if start is not None:
        ranges.append((start, prev))
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


class FakeHost:
    """A fake root directory. All paths given are host paths (``/sys/...``)."""

    def __init__(self, root):
        self.root = str(root)
        self.pci_paths = {}  # address -> /sys/devices/... path
        self.write("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=0 ro quiet")
        self.write("/proc/sys/kernel/random/boot_id", "00000000-0000-0000-0000-000000000001")
        self.write("/proc/sys/kernel/osrelease", "6.1.0-fake")
        os.makedirs(self.p("/sys/bus/pci/devices"), exist_ok=True)
        os.makedirs(self.p("/sys/kernel/iommu_groups"), exist_ok=True)
        os.makedirs(self.p("/sys/class/net"), exist_ok=True)

    # -- plumbing ---------------------------------------------------------------
    def p(self, host_path):
        return os.path.join(self.root, host_path.lstrip("/"))

    def write(self, host_path, text):
        path = self.p(host_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")

    def link(self, host_path, target_host_path):
        """A relative symlink, as the kernel makes them."""
        path = self.p(host_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.makedirs(self.p(target_host_path), exist_ok=True)
        rel = os.path.relpath(self.p(target_host_path), os.path.dirname(path))
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(rel, path)

    # -- CPUs and NUMA -----------------------------------------------------------
    def set_cpuinfo(self, vendor="GenuineIntel"):
        self.write("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: %s\n" % vendor)

    def add_numa_node(self, node, cpus, memory_mb=65536, hugepages=None, distances=None):
        """``hugepages``: {"2048kB": (total, free), "1048576kB": (total, free)}"""
        base = "/sys/devices/system/node/node%d" % node
        self.write(base + "/cpulist", format_cpulist(cpus))
        self.write(base + "/meminfo",
                   "Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n"
                   % (node, memory_mb * 1024, node, memory_mb * 512))
        if distances is not None:
            self.write(base + "/distance", " ".join(str(d) for d in distances))
        pages = {"2048kB": (0, 0), "1048576kB": (0, 0)}
        pages.update(hugepages or {})
        for size, (total, free) in pages.items():
            self.write("%s/hugepages/hugepages-%s/nr_hugepages" % (base, size), str(total))
            self.write("%s/hugepages/hugepages-%s/free_hugepages" % (base, size), str(free))
            self.write("%s/hugepages/hugepages-%s/surplus_hugepages" % (base, size), "0")

    def add_cpu(self, cpu, core_id, package_id, siblings):
        base = "/sys/devices/system/cpu/cpu%d/topology" % cpu
        self.write(base + "/core_id", str(core_id))
        self.write(base + "/physical_package_id", str(package_id))
        self.write(base + "/thread_siblings_list", format_cpulist(siblings))

    def set_cpus_online(self, cpus):
        self.write("/sys/devices/system/cpu/online", format_cpulist(cpus))

    # -- PCI -----------------------------------------------------------------
    def add_pci(self, address, vendor, device, pci_class, parent=None, root_bus=None,
                numa_node=-1, driver=None, iommu_group=None, sriov_totalvfs=None,
                netdevs=(), rdma_devices=()):
        """Add a PCI function. ``parent`` is the address of the bridge above it; without
        one the device sits on root bus ``root_bus`` (default ``pci<domain>:<bus>``)."""
        if parent is not None:
            path = self.pci_paths[parent] + "/" + address
        else:
            root_bus = root_bus or "pci%s" % address[:7]
            path = "/sys/devices/%s/%s" % (root_bus, address)
        self.pci_paths[address] = path
        self.write(path + "/vendor", vendor)
        self.write(path + "/device", device)
        self.write(path + "/class", pci_class)
        self.write(path + "/numa_node", str(numa_node))
        self.write(path + "/driver_override", "(null)")
        self.link("/sys/bus/pci/devices/" + address, path)
        if driver:
            self.bind(address, driver)
        if iommu_group is not None:
            self.set_iommu_group(address, iommu_group)
        if sriov_totalvfs is not None:
            self.write(path + "/sriov_totalvfs", str(sriov_totalvfs))
            self.write(path + "/sriov_numvfs", "0")
            self.write(path + "/sriov_drivers_autoprobe", "1")
        for name in netdevs:
            self.add_netdev(address, name)
        for name in rdma_devices:
            os.makedirs(self.p(path + "/infiniband/" + name), exist_ok=True)
        return path

    def bind(self, address, driver):
        self.link(self.pci_paths[address] + "/driver", "/sys/bus/pci/drivers/" + driver)

    def set_iommu_group(self, address, group):
        gpath = "/sys/kernel/iommu_groups/%d" % group
        self.link(self.pci_paths[address] + "/iommu_group", gpath)
        self.link(gpath + "/devices/" + address, self.pci_paths[address])

    def add_netdev(self, address, name, mac="00:00:00:00:00:00", operstate="up"):
        dev = self.pci_paths[address] + "/net/" + name
        self.write(dev + "/address", mac)
        self.write(dev + "/operstate", operstate)
        self.link("/sys/class/net/" + name, dev)
        self.link(dev + "/device", self.pci_paths[address])

    def add_vfs(self, pf, vf_addresses, vendor, device, pci_class, numa_node=-1, groups=None):
        """Create VFs the way the kernel does after ``echo N > sriov_numvfs``."""
        pf_path = self.pci_paths[pf]
        parent = os.path.basename(os.path.dirname(pf_path))
        for index, vf in enumerate(vf_addresses):
            if parent.startswith("pci"):
                self.add_pci(vf, vendor, device, pci_class, root_bus=parent, numa_node=numa_node)
            else:
                self.add_pci(vf, vendor, device, pci_class, parent=parent, numa_node=numa_node)
            self.link(self.pci_paths[vf] + "/physfn", pf_path)
            self.link(pf_path + "/virtfn%d" % index, self.pci_paths[vf])
            if groups is not None:
                self.set_iommu_group(vf, groups[index])
        self.write(pf_path + "/sriov_numvfs", str(len(vf_addresses)))


class HugepageAllocator:
    """A stand-in for the kernel's hugepage allocator behind ``nr_hugepages`` writes (not a
    real one): a write gets at most ``capacity[(size, node)]`` pages, as a node with
    fragmented memory does, and that count is what ``nr_hugepages`` reads afterwards; with
    ``refuse`` (an errno) every write fails as the kernel's would. ``writes`` records each
    request as ``(size, node, count)``."""

    SIZES = {"2048kB": "2M", "1048576kB": "1G"}

    def __init__(self, host, capacity=None, refuse=None):
        self.host = host
        self.capacity = dict(capacity or {})
        self.refuse = refuse
        self.writes = []

    def write(self, host_path, value):
        # /sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages
        parts = host_path.split("/")
        size, node, count = self.SIZES[parts[7][len("hugepages-"):]], int(parts[5][len("node"):]), int(value)
        self.writes.append((size, node, count))
        if self.refuse:
            raise OSError(self.refuse, os.strerror(self.refuse))
        self.host.write(host_path, "%d" % min(count, self.capacity.get((size, node), count)))


# Resource flags as the kernel writes them in sysfs ``resource`` (include/linux/ioport.h
# IORESOURCE_* bits); the values are those of real captures of large-BAR NVIDIA GPUs (a
# 32-bit BAR0, 64-bit prefetchable BAR1/BAR3, an I/O BAR, the expansion ROM).
BAR_MEM32 = 0x0000000000040200
BAR_MEM64_PREFETCH = 0x000000000014220C
BAR_IO = 0x0000000000040101
BAR_ROM = 0x0000000000046200
# Lines in ``resource`` of a PCI endpoint: 6 BARs, the ROM, 6 SR-IOV BARs.
ENDPOINT_RESOURCES = 13


def write_resource(host, address, bars):
    """Write ``/sys/bus/pci/devices/<address>/resource`` of a device of ``host`` (a FakeHost)
    as drivers/pci/pci-sysfs.c resource_show does: one ``0x%016x 0x%016x 0x%016x`` line
    (start, end, flags) per resource, all zeros where unassigned. ``bars``: {index: (start,
    size, flags)}."""
    lines = []
    for index in range(ENDPOINT_RESOURCES):
        start, size, flags = bars.get(index, (0, 0, 0))
        end = start + size - 1 if size else 0
        lines.append("0x%016x 0x%016x 0x%016x" % (start, end, flags))
    host.write(host.pci_paths[address] + "/resource", "\n".join(lines))
