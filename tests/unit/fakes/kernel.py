# -*- coding: utf-8 -*-
"""A stand-in for the kernel's side of the sysfs writes the SR-IOV and VFIO code makes,
over a :class:`FakeHost` tree: the ``kernel`` of a test :class:`Host`
(``Host(tree.root, kernel=FakeKernel(tree), ...)``), so ``host.kernel.write(path, value)``
lands here. It keeps state the way the kernel does:

- ``sriov_numvfs``: a new non-zero count while VFs exist fails with EBUSY; above
  ``sriov_totalvfs`` with ERANGE; 0 removes every VF; N creates VFs at the addresses
  ``sriov_offset``/``sriov_stride`` give, each in a new IOMMU group (or, for a PF marked
  ``no_acs``, in the PF's group), probed only when ``sriov_drivers_autoprobe`` is 1;
- ``driver_override``, ``driver/unbind``, ``drivers/<d>/unbind`` and ``drivers_probe``:
  probing binds the overriding driver when it is loaded, else the device's default driver;
  a device bound to vfio-pci has ``/dev/vfio/<group>``.

It is a stand-in: tests using it say so, and the lab proves the real kernel agrees.
"""

from __future__ import annotations

import errno
import os
import re
import shutil

from fakes.host_tree import FakeHost  # pylint: disable=import-error

DEV = "/sys/bus/pci/devices/"


class FakeKernel:
    def __init__(self, host, default_drivers=None, vf_spec=None):
        self.host = host
        self.default_drivers = dict(default_drivers or {})
        self.vf_spec = dict(vf_spec or {})
        self.writes = []
        self.fail = {}  # host_path -> errno to raise once

    # -- helpers ---------------------------------------------------------------
    def p(self, host_path):
        return self.host.p(host_path)

    def read(self, host_path):
        try:
            with open(self.p(host_path), encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError:
            return None

    def driver(self, address):
        try:
            return os.path.basename(os.readlink(self.p(DEV + address + "/driver")))
        except OSError:
            return None

    def group(self, address):
        try:
            return os.path.basename(os.readlink(self.p(DEV + address + "/iommu_group")))
        except OSError:
            return None

    def next_group(self):
        groups = [int(g) for g in os.listdir(self.p("/sys/kernel/iommu_groups")) if g.isdigit()]
        return max(groups + [0]) + 1

    # -- binding ---------------------------------------------------------------
    def bind(self, address, driver):
        if not os.path.isdir(self.p("/sys/bus/pci/drivers/" + driver)):
            return
        self.host.bind(address, driver)
        if driver == "vfio-pci" and self.group(address):
            self.host.write("/dev/vfio/" + self.group(address), "")

    def unbind(self, address):
        if self.driver(address) == "vfio-pci" and self.group(address):
            path = self.p("/dev/vfio/" + self.group(address))
            if os.path.exists(path):
                os.unlink(path)
        link = self.p(DEV + address + "/driver")
        if os.path.lexists(link):
            os.unlink(link)

    def probe(self, address):
        if self.driver(address):
            return
        override = self.read(DEV + address + "/driver_override")
        if override and override != "(null)":
            self.bind(address, override)
        elif self.default_drivers.get(address):
            self.bind(address, self.default_drivers[address])

    # -- SR-IOV ----------------------------------------------------------------
    def remove_vfs(self, pf):
        base = self.host.pci_paths[pf]
        for entry in sorted(os.listdir(self.p(base))):
            if not re.match(r"^virtfn\d+$", entry):
                continue
            vf = os.path.basename(os.readlink(self.p(base + "/" + entry)))
            self.unbind(vf)
            group = self.group(vf)
            if group:
                os.unlink(self.p("/sys/kernel/iommu_groups/%s/devices/%s" % (group, vf)))
                if not os.listdir(self.p("/sys/kernel/iommu_groups/%s/devices" % group)):
                    shutil.rmtree(self.p("/sys/kernel/iommu_groups/" + group))
            shutil.rmtree(self.p(self.host.pci_paths.pop(vf)))
            os.unlink(self.p(DEV + vf))
            os.unlink(self.p(base + "/" + entry))
        self.host.write(base + "/sriov_numvfs", "0")

    def create_vfs(self, pf, count):
        base = self.host.pci_paths[pf]
        spec = self.vf_spec[pf]
        offset = int(self.read(base + "/sriov_offset"))
        stride = int(self.read(base + "/sriov_stride"))
        domain, bus, rest = pf.split(":")
        slot, function = rest.split(".")
        rid = int(bus, 16) << 8 | int(slot, 16) << 3 | int(function)
        addresses = []
        for index in range(count):
            vrid = rid + offset + index * stride
            addresses.append("%s:%02x:%02x.%x" % (domain, vrid >> 8, (vrid >> 3) & 0x1f, vrid & 7))
        if spec.get("no_acs"):
            groups = [int(self.group(pf))] * count
        else:
            first = self.next_group()
            groups = list(range(first, first + count))
        self.host.add_vfs(pf, addresses, spec["vendor"], spec["device"], spec["class"],
                          numa_node=spec.get("numa_node", -1), groups=groups)
        for vf in addresses:
            if spec.get("vf_driver"):
                self.default_drivers[vf] = spec["vf_driver"]
            if self.read(base + "/sriov_drivers_autoprobe") == "1":
                self.probe(vf)

    # -- the writer interface --------------------------------------------------
    def write(self, host_path, value):
        self.writes.append((host_path, value))
        if host_path in self.fail:
            raise OSError(self.fail.pop(host_path), os.strerror(errno.EIO))
        if host_path == "/sys/bus/pci/drivers_probe":
            self.probe(value.strip())
            return
        match = re.match(r"^/sys/bus/pci/drivers/[^/]+/unbind$", host_path)
        if match:
            self.unbind(value.strip())
            return
        match = re.match(r"^/sys/bus/pci/devices/([^/]+)/(.+)$", host_path)
        if not match:
            raise OSError(errno.ENOENT, "no such attribute: " + host_path)
        address, attribute = match.groups()
        base = DEV + address
        if attribute == "driver/unbind":
            if not self.driver(address):
                raise OSError(errno.ENOENT, "not bound")
            self.unbind(address)
        elif attribute == "driver_override":
            value = value.strip()
            self.host.write(base + "/driver_override", value or "(null)")
        elif attribute == "sriov_drivers_autoprobe":
            self.host.write(base + "/sriov_drivers_autoprobe", value.strip())
        elif attribute == "sriov_numvfs":
            want = int(value)
            current = int(self.read(base + "/sriov_numvfs"))
            total = int(self.read(base + "/sriov_totalvfs"))
            if want > total:
                raise OSError(errno.ERANGE, os.strerror(errno.ERANGE))
            if want and current:
                raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
            if want == 0:
                self.remove_vfs(address)
            else:
                self.create_vfs(address, want)
        else:
            raise OSError(errno.EACCES, "read-only attribute " + attribute)


# ---------------------------------------------------------------------------- tenants
def domain_xml(name, address, interface=True):
    """A libvirt domain definition holding the PCI function ``address``, shaped as
    tenant_domain writes one: a VF as ``<interface type='hostdev'>`` with its MAC and VLAN
    (``interface``), else a ``<hostdev type='pci'>``."""
    domain, bus, rest = address.split(":")
    slot, function = rest.split(".")
    source = ("<source><address type='pci' domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/></source>"
              % (domain, bus, slot, function))
    if interface:
        device = ("<interface type='hostdev' managed='no'><mac address='52:54:00:a0:00:01'/>%s"
                  "<vlan><tag id='101'/></vlan></interface>" % source)
    else:
        device = "<hostdev mode='subsystem' type='pci' managed='no'>%s</hostdev>" % source
    return "<domain type='kvm'><name>%s</name><devices>%s</devices></domain>" % (name, device)


# ---------------------------------------------------------------------------- trees
def lab_host(root, ssh_local=None):
    """The lab VM's devices as DESIGN.md lists them (QEMU q35, pxb-pcie bus 0x80 on NUMA
    node 1): management NIC e1000e at 0000:00:05.0 (netdev eth0, default route), virtio-blk
    at 0000:00:06.0 (vda, root filesystem), the NVMe SR-IOV PF 1b36:0010 at 0000:81:00.0
    (4 VFs, no netdev), edu 1234:11e8 at 0000:82:00.0 on pci-stub, e1000e at 0000:83:00.0.
    procfs route/mount tables are the real captures in tests/fixtures/host_usage. With
    ``ssh_local``, the SSH session of this run is in this process' environ in the tree, its local
    end that address (the management NIC's, 192.0.2.2), as vfio_bind's host-usage checks read it."""
    host = FakeHost(root)
    host.set_cpuinfo("GenuineIntel")
    host.add_numa_node(0, [0, 1])
    host.add_numa_node(1, [2, 3])
    host.add_pci("0000:00:00.0", "0x8086", "0x29c0", "0x060000", iommu_group=0)
    host.add_pci("0000:00:05.0", "0x8086", "0x10d3", "0x020000", driver="e1000e", iommu_group=1, numa_node=-1)
    host.add_pci("0000:00:06.0", "0x1af4", "0x1001", "0x010000", driver="virtio-pci", iommu_group=2)
    host.add_pci("0000:80:00.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1,
                 driver="pcieport", iommu_group=3)
    host.add_pci("0000:80:01.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1,
                 driver="pcieport", iommu_group=4)
    host.add_pci("0000:80:02.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1,
                 driver="pcieport", iommu_group=5)
    pf_path = host.add_pci("0000:81:00.0", "0x1b36", "0x0010", "0x010802", parent="0000:80:00.0", numa_node=1,
                           driver="nvme", iommu_group=6, sriov_totalvfs=4)
    host.write(pf_path + "/sriov_offset", "1")
    host.write(pf_path + "/sriov_stride", "1")
    host.add_pci("0000:82:00.0", "0x1234", "0x11e8", "0x00ff00", parent="0000:80:01.0", numa_node=1,
                 driver="pci-stub", iommu_group=7)
    host.add_pci("0000:83:00.0", "0x8086", "0x10d3", "0x020000", parent="0000:80:02.0", numa_node=1,
                 driver="e1000e", iommu_group=8, netdevs=("enp131s0",))
    os.makedirs(host.p("/sys/bus/pci/drivers/vfio-pci"), exist_ok=True)
    # Management NIC and disk, laid out like virtio/e1000e devices are in sysfs.
    host.add_netdev("0000:00:05.0", "eth0")
    disk = host.pci_paths["0000:00:06.0"] + "/virtio1/block/vda"
    host.write(disk + "/dev", "254:0")
    host.link("/sys/class/block/vda", disk)
    host.link("/sys/dev/block/254:0", disk)
    fixtures = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "host_usage")
    for name, target in (("proc-net-route_debian12_virtio-eth0_default-route.txt", "/proc/net/route"),
                         ("proc-net-ipv6_route_debian12_virtio-eth0_default-route.txt", "/proc/net/ipv6_route"),
                         ("proc-net-if_inet6_debian12_virtio-eth0.txt", "/proc/net/if_inet6"),
                         ("proc-self-mountinfo_debian12_root-on-virtio-vda.txt", "/proc/self/mountinfo"),
                         ("proc-swaps_debian12_no-swap.txt", "/proc/swaps")):
        with open(os.path.join(fixtures, name), encoding="utf-8") as handle:
            host.write(target, handle.read())
    kernel = FakeKernel(host, default_drivers={"0000:82:00.0": "pci-stub"},
                        vf_spec={"0000:81:00.0": {"vendor": "0x1b36", "device": "0x0010", "class": "0x010802",
                                                  "numa_node": 1, "vf_driver": "nvme"}})
    if ssh_local:
        host.write("/proc/%d/environ" % os.getpid(), "SSH_CONNECTION=192.0.2.1 51000 %s 22\0" % ssh_local)
    return host, kernel


def nodeless_host(root, nodes):
    """A host whose firmware gives its PCIe roots no NUMA node (no ACPI _PXM), so that sysfs
    ``numa_node`` reads -1 for every PCI function, as on many one-socket boards: ``nodes`` NUMA
    nodes of two CPUs each, QEMU's edu device (1234:11e8, the lab's GPU) at 0000:01:00.0 and a
    ConnectX-5 PF (15b3:1017, netdev ens2) at 0000:02:00.0 with two VFs, each in its own IOMMU group."""
    host = FakeHost(root)
    host.set_cpuinfo("AuthenticAMD")
    for node in range(nodes):
        host.add_numa_node(node, [2 * node, 2 * node + 1])
    host.add_pci("0000:01:00.0", "0x1234", "0x11e8", "0x00ff00", driver="vfio-pci", iommu_group=1)
    host.add_pci("0000:02:00.0", "0x15b3", "0x1017", "0x020000", driver="mlx5_core", iommu_group=2, sriov_totalvfs=8,
                 netdevs=("ens2",))
    host.add_vfs("0000:02:00.0", ["0000:02:00.1", "0000:02:00.2"], "0x15b3", "0x1018", "0x020000", groups=[3, 4])
    return host, FakeKernel(host)


def lab_host_with_vfs(root, num_vfs=4, autoprobe=False, ssh_local="192.0.2.2"):
    """lab_host (with the SSH session of ``ssh_local``) and ``num_vfs`` VFs made on its PF
    (0000:81:00.0) through the FakeKernel, the kernel's record of writes cleared afterwards."""
    host, kernel = lab_host(root, ssh_local)
    kernel.write("/sys/bus/pci/devices/0000:81:00.0/sriov_drivers_autoprobe", "1" if autoprobe else "0")
    kernel.write("/sys/bus/pci/devices/0000:81:00.0/sriov_numvfs", str(num_vfs))
    kernel.writes.clear()
    return host, kernel


NIC_PF = "0000:84:00.0"
GPU_AUDIO = "0000:82:00.1"


def lab_host_with_nic(root, ssh_local="192.0.2.2"):
    """lab_host (with the SSH session of ``ssh_local``) and what the SR-IOV/VFIO stage of the
    current lab meets besides: an igb SR-IOV PF (8086:10c9, netdev ens12, up, 7 VFs offered at
    routing offset 128 and stride 2, so its VFs land at 0000:84:10.0, .2, .4 ... as on the lab VM,
    each in an IOMMU group of its own, igbvf their driver), and an audio function of the edu
    GPU (0000:82:00.1, class 0x0403, on snd_hda_intel) in the GPU's IOMMU group 7, which goes to
    the tenant with the GPU. The ``ip`` stand-in sets VF settings through the netdev."""
    host, kernel = lab_host(root, ssh_local)
    host.add_pci("0000:80:03.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1,
                 driver="pcieport", iommu_group=9)
    path = host.add_pci(NIC_PF, "0x8086", "0x10c9", "0x020000", parent="0000:80:03.0", numa_node=1, driver="igb",
                        iommu_group=10, sriov_totalvfs=7, netdevs=("ens12",))
    host.write(path + "/sriov_offset", "128")
    host.write(path + "/sriov_stride", "2")
    host.write("/sys/class/net/ens12/flags", "0x1003")
    host.add_pci(GPU_AUDIO, "0x1234", "0x11e9", "0x040300", parent="0000:80:01.0", numa_node=1, driver="snd_hda_intel",
                 iommu_group=7)
    kernel.default_drivers[GPU_AUDIO] = "snd_hda_intel"
    kernel.vf_spec[NIC_PF] = {"vendor": "0x8086", "device": "0x10ca", "class": "0x020000", "numa_node": 1, "vf_driver": "igbvf"}
    return host, kernel


LSPCI_LINE = re.compile(r"^(?:IOMMU Group (\d+)\s+)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) [^\[]*\[([0-9a-f]{4})\]: .*"
                        r"\[([0-9a-f]{4}):([0-9a-f]{4})\]")


def parse_lspci_nn(text):
    """(group or None, address, class, vendor, device) for each ``lspci -nn``-style line."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        match = LSPCI_LINE.match(line)
        if match:
            group, address, pci_class, vendor, device = match.groups()
            rows.append((int(group) if group else None, "0000:" + address, "0x%s00" % pci_class,
                         "0x" + vendor, "0x" + device))
    return rows


def parse_group_script(text):
    """The per-group IOMMU listing ("IOMMU Group N:" then tab-indented lspci -nns lines)."""
    rows, group = [], None
    for line in text.splitlines():
        header = re.match(r"^IOMMU Group (\d+):", line)
        if header:
            group = int(header.group(1))
            continue
        for _g, address, pci_class, vendor, device in parse_lspci_nn(line):
            rows.append((group, address, pci_class, vendor, device))
    return rows


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def fixture_text(relpath):
    with open(os.path.join(FIXTURES, relpath), encoding="utf-8") as handle:
        return handle.read()


def cx4lx_no_acs_host(root):
    """The ConnectX-4 Lx host of iommu/iommu-groups_cx4lx-pf-and-vfs-all-in-group1_no-acs.txt:
    both PFs (15b3:1015) and the 4 VFs (15b3:1016) in IOMMU group 1, behind a CPU root port
    without ACS. The source does not say which PF owns the VFs: PF 0 (01:00.0) here, with
    VF routing offset 2 and stride 1 so the VFs land at 01:00.2-.5 as listed."""
    rows = parse_lspci_nn(fixture_text("iommu/iommu-groups_cx4lx-pf-and-vfs-all-in-group1_no-acs.txt"))
    host = FakeHost(root)
    host.set_cpuinfo("GenuineIntel")
    host.add_pci("0000:00:01.0", "0x8086", "0x1901", "0x060400", driver="pcieport")
    pfs = [r for r in rows if r[4] == "0x1015"]
    vfs = [r for r in rows if r[4] == "0x1016"]
    for number, (group, address, pci_class, vendor, device) in enumerate(pfs):
        path = host.add_pci(address, vendor, device, pci_class, parent="0000:00:01.0", numa_node=-1,
                            driver="mlx5_core", iommu_group=group, sriov_totalvfs=8,
                            netdevs=("enp1s0f%dnp%d" % (number, number),))
        host.write(path + "/sriov_offset", "2" if number == 0 else "1")
        host.write(path + "/sriov_stride", "1")
    pf = pfs[0][1]
    host.add_vfs(pf, [r[1] for r in vfs], vfs[0][3], vfs[0][4], vfs[0][2], groups=[r[0] for r in vfs])
    for row in vfs:
        host.bind(row[1], "mlx5_core")
    os.makedirs(host.p("/sys/bus/pci/drivers/vfio-pci"), exist_ok=True)
    kernel = FakeKernel(host, default_drivers={r[1]: "mlx5_core" for r in vfs},
                        vf_spec={pf: {"vendor": vfs[0][3], "device": vfs[0][4], "class": vfs[0][2],
                                      "no_acs": True, "vf_driver": "mlx5_core"}})
    return host, kernel


def v100_pairs_host(root, driver_on=None):
    """The 6x V100 host of pci/lspci-nnk_6x-v100-pcie-16gb_no-driver-bound_gpus-paired-in-iommu-groups.txt:
    no driver bound; as its source states, GPUs share IOMMU groups pairwise (27/28, 43/44,
    c3/c4: two GPUs behind each PCIe switch without ACS). ``driver_on``: {address: driver}
    to bind some GPUs to a host driver."""
    rows = parse_lspci_nn(fixture_text("pci/lspci-nnk_6x-v100-pcie-16gb_no-driver-bound_gpus-paired-in-iommu-groups.txt"))
    host = FakeHost(root)
    host.set_cpuinfo("GenuineIntel")
    os.makedirs(host.p("/sys/bus/pci/drivers/vfio-pci"), exist_ok=True)
    for index, (_group, address, pci_class, vendor, device) in enumerate(rows):
        group = 20 + index // 2
        switch = "0000:%02x:00.0" % (int(address[5:7], 16) - 1 - index % 2)
        if switch not in host.pci_paths:
            host.add_pci(switch, "0x10b5", "0x8747", "0x060400", driver="pcieport", iommu_group=group)
        host.add_pci(address, vendor, device, pci_class, parent=switch, iommu_group=group,
                     driver=(driver_on or {}).get(address))
    return host, FakeKernel(host, default_drivers=dict(driver_on or {}))


def rtx_group_host(root):
    """iommu/iommu-groups-script_desktop_rtx3070ti_gpu-shares-group-with-root-port_partial.txt:
    group 1 holds the CPU root port 00:01.0, the GPU 01:00.0 and its HDA function 01:00.1.
    The listing names no drivers: the audio function is given snd_hda_intel (the driver
    pci/lspci-nnk_quadro-p1000 lists for such a function), the GPU none."""
    rows = parse_group_script(fixture_text(
        "iommu/iommu-groups-script_desktop_rtx3070ti_gpu-shares-group-with-root-port_partial.txt"))
    host = FakeHost(root)
    host.set_cpuinfo("GenuineIntel")
    os.makedirs(host.p("/sys/bus/pci/drivers/vfio-pci"), exist_ok=True)
    parent = None
    for group, address, pci_class, vendor, device in rows:
        is_bridge = pci_class.startswith("0x0604")
        driver = "pcieport" if is_bridge else ("snd_hda_intel" if pci_class.startswith("0x0403") else None)
        if address.startswith("0000:01:"):
            host.add_pci(address, vendor, device, pci_class, parent=parent, iommu_group=group, driver=driver)
        else:
            host.add_pci(address, vendor, device, pci_class, root_bus="pci0000:00", iommu_group=group, driver=driver)
        if is_bridge:
            parent = address
    return host, FakeKernel(host, default_drivers={"0000:01:00.1": "snd_hda_intel"})
