# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's domain definition built new, or an existing one brought to the tenant's options:
only the managed elements (size, devices, QoS, hugepage backing, the OVMF aperture) are
touched, every other element is kept as libvirt returned it. Pure XML, no libvirt; the options
themselves are checked in tenant_spec, whose ``TenantSpec`` is a ``DomainBuilder``."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_cells import sync_cells
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_switch import sync_switches
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_elements, source_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import PinRequest, apply_pinning
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import (
    MMIO64_FW_CFG, firmware_of, mmio_fw_cfg_args, mmio_window_of, read_pinning, vcpu_counts)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import (
    CPU_QOS, IOTUNE_KEYS, QEMU_ARG, QEMU_COMMANDLINE, address_attributes, find_or_add, to_kib)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import name_of_kb

__metaclass__ = type


class DomainBuilder:
    """Builds and updates a definition from the checked options of a ``TenantSpec`` (its
    attributes: name, domain_type, sizes, qos, devices, interfaces, disks, firmware, ...)."""

    def build(self):
        """A new domain definition."""
        self.phys_bits = None
        root = ET.Element("domain", {"type": self.domain_type})
        ET.SubElement(root, "name").text = self.name
        ET.SubElement(root, "memory", {"unit": "KiB"}).text = str(self.memory_kib)
        ET.SubElement(root, "currentMemory", {"unit": "KiB"}).text = str(self.memory_kib)
        if self.hugepage_kib:
            backing = ET.SubElement(root, "memoryBacking")
            hugepages = ET.SubElement(backing, "hugepages")
            ET.SubElement(hugepages, "page", {"size": str(self.hugepage_kib), "unit": "KiB"})
        vcpu = ET.SubElement(root, "vcpu", {"placement": "static"})
        vcpu.text = str(self.max_vcpus)
        if self.max_vcpus > self.vcpus:
            vcpu.set("current", str(self.vcpus))
        if self.qos is not None:
            self._sync_cputune(root)
        self._sync_mmio_window(root, new=True)
        os_el = ET.SubElement(root, "os")
        type_attrs = {"arch": self.arch}
        if self.machine:
            type_attrs["machine"] = self.machine
        if self.firmware == "efi":
            # libvirt picks OVMF from the firmware descriptors (/usr/share/qemu/firmware) and
            # makes the tenant its own NVRAM; no Secure Boot, so that the guest's NVIDIA driver
            # (a module built by DKMS, unsigned) loads
            os_el.set("firmware", "efi")
        ET.SubElement(os_el, "type", type_attrs).text = "hvm"
        if self.firmware == "efi":
            ET.SubElement(ET.SubElement(os_el, "firmware"), "feature", {"enabled": "no", "name": "secure-boot"})
        ET.SubElement(os_el, "boot", {"dev": "hd"})
        features = ET.SubElement(root, "features")
        ET.SubElement(features, "acpi")
        ET.SubElement(features, "apic")
        if self.domain_type == "kvm":
            cpu = ET.SubElement(root, "cpu", {"mode": "host-passthrough", "check": "none"})
            # the host's physical address width (QEMU host-phys-bits=on): OVMF places the 64-bit
            # aperture above guest RAM, which must stay addressable by the guest and by EPT/NPT
            self._add_phys_bits(cpu)
        ET.SubElement(root, "clock", {"offset": "utc"})
        ET.SubElement(root, "on_poweroff").text = "destroy"
        ET.SubElement(root, "on_reboot").text = "restart"
        ET.SubElement(root, "on_crash").text = "destroy"
        devices = ET.SubElement(root, "devices")
        self._sync_devices(devices)
        serial = ET.SubElement(devices, "serial", {"type": "pty"})
        if self.console_log:
            ET.SubElement(serial, "log", {"file": self.console_log, "append": "on"})
        ET.SubElement(devices, "console", {"type": "pty"})
        ET.SubElement(devices, "memballoon", {"model": "none"})
        if self.cells:
            sync_cells(root, self.cells, self.hugepage_kib, device_elements(root), self.switches, self.memory_mode)
        elif self.switches:
            sync_switches(root, self.switches, device_elements(root))
        return root

    @staticmethod
    def _hostdev(addr):
        element = ET.Element("hostdev", {"mode": "subsystem", "type": "pci", "managed": "no"})
        source = ET.SubElement(element, "source")
        ET.SubElement(source, "address", address_attributes(addr, "hostdev"))
        return element

    def _interface(self, addr):
        """A network VF: libvirt sets its MAC and VLAN on the PF when the domain starts (and puts
        the old ones back when it stops); ``managed='no'`` as for every hostdev, the VF stays on
        vfio-pci as the VFIO stage bound it."""
        wanted = self.interfaces[addr]
        element = ET.Element("interface", {"type": "hostdev", "managed": "no"})
        ET.SubElement(element, "mac", {"address": wanted["mac"]})
        source = ET.SubElement(element, "source")
        ET.SubElement(source, "address", dict(address_attributes(addr, "interface"), type="pci"))
        if wanted["vlan"] is not None:
            vlan = ET.SubElement(element, "vlan")
            ET.SubElement(vlan, "tag", {"id": str(wanted["vlan"])})
        return element

    def _sync_mmio_window(self, root, new=False):
        """The fw_cfg file that sizes OVMF's 64-bit PCI aperture, as ``mmio_window_mb`` says
        (removed when None; other QEMU arguments kept); -> True when changed.

        Passed as QEMU ``-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=N`` through
        ``<qemu:commandline>`` (libvirt then marks the domain tainted, custom-argv): libvirt's
        own ``<sysinfo type='fwcfg'>`` refuses every name under ``opt/ovmf/`` ("That firmware
        name is reserved", qemuValidateDomainDefSysinfo), and ``<pcihole64>`` sizes QEMU's ACPI
        hole only, which OVMF does not read."""
        if not new and not self.qemu_args_kept and root.find(QEMU_COMMANDLINE) is None:
            return False
        if mmio_window_of(root) == self.mmio_window_mb and len(mmio_fw_cfg_args(root)) <= 1:
            return False
        commandline = root.find(QEMU_COMMANDLINE)
        for flag, value in mmio_fw_cfg_args(root):
            commandline.remove(flag)
            commandline.remove(value)
        if self.mmio_window_mb is not None:
            if commandline is None:
                # libvirt keeps <qemu:commandline> as the domain's last element
                commandline = ET.SubElement(root, QEMU_COMMANDLINE)
            ET.SubElement(commandline, QEMU_ARG, {"value": "-fw_cfg"})
            ET.SubElement(commandline, QEMU_ARG, {"value": "name=%s,string=%d" % (MMIO64_FW_CFG, int(self.mmio_window_mb))})
        if commandline is not None and len(commandline) == 0:
            root.remove(commandline)
        return True

    def _sync_phys_bits(self, root):
        """``<maxphysaddr mode='passthrough'/>`` on a host-passthrough CPU that lacks one, for a
        domain that asks for a 64-bit window; -> True when changed."""
        cpu = root.find("cpu")
        if self.mmio_window_mb is None or cpu is None or cpu.get("mode") != "host-passthrough" or cpu.find("maxphysaddr") is not None:
            return False
        return self._add_phys_bits(cpu)

    def _add_phys_bits(self, cpu):
        """``<maxphysaddr mode='passthrough'/>`` into ``cpu`` unless the host's libvirt predates it
        (``maxphysaddr`` False); ``phys_bits`` says which, for the call's one warning (-> True
        when written)."""
        if self.maxphysaddr is False:
            self.phys_bits = "left out"
            return False
        ET.SubElement(cpu, "maxphysaddr", {"mode": "passthrough"})
        self.phys_bits = "written"
        return True

    def _disk(self, disk):
        element = ET.Element("disk", {"type": "file", "device": "disk"})
        ET.SubElement(element, "driver", {"name": "qemu", "type": disk["format"], "io": "threads", "cache": "none"})
        ET.SubElement(element, "source", {"file": disk["path"]})
        ET.SubElement(element, "target", {"dev": disk["target"], "bus": "virtio"})
        if self.qos is not None:
            self._sync_iotune(element)
        return element

    def _sync_cputune(self, root):
        """cputune shares/period/quota as the QoS says (absent keys removed); -> True when changed."""
        changed = False
        cputune = root.find("cputune")
        for key, tag, _param in CPU_QOS:
            want = self.qos[key]
            element = cputune.find(tag) if cputune is not None else None
            have = int(element.text) if element is not None and (element.text or "").strip() else None
            if have == want:
                continue
            changed = True
            if want is None:
                cputune.remove(element)
                continue
            if cputune is None:
                cputune = find_or_add(root, "cputune", after=("vcpu", "vcpus", "iothreads", "iothreadids"))
            if element is None:
                element = ET.Element(tag)
                # libvirt's order: shares, period, quota, then the pins
                position = len([c for c in cputune if c.tag in [t for _k, t, _p in CPU_QOS]])
                cputune.insert(position, element)
            element.text = str(want)
        if cputune is not None and len(cputune) == 0:
            root.remove(cputune)
        return changed

    def _sync_iotune(self, disk):
        """The disk's iotune IOPS/bytes limits as the QoS says (other iotune keys kept); -> True when changed."""
        iotune = disk.find("iotune")
        have = {}
        if iotune is not None:
            for key in IOTUNE_KEYS:
                element = iotune.find(key)
                if element is not None and (element.text or "").strip() and int(element.text):
                    have[key] = int(element.text)
        want = self.qos["iotune"]
        if have == want:
            return False
        if iotune is None:
            iotune = ET.SubElement(disk, "iotune")
        for key in IOTUNE_KEYS:
            element = iotune.find(key)
            if element is not None:
                iotune.remove(element)
        for key in IOTUNE_KEYS:
            if key in want:
                ET.SubElement(iotune, key).text = str(want[key])
        if len(iotune) == 0:
            disk.remove(iotune)
        return True

    def _sync_devices(self, devices):
        """Make the PCI hostdevs, hostdev interfaces and file disks of ``devices`` the wanted ones,
        keeping the elements (and the libvirt-assigned guest addresses) of those already right."""
        changed = False
        want_plain = [a for a in self.gpus + self.vfs if a not in self.network_vfs]
        have = {}
        for element in devices.findall("hostdev"):
            if element.get("type") == "pci":
                have[source_address(element)] = element
        for addr, element in list(have.items()):
            if addr not in want_plain:
                devices.remove(element)
                changed = True
        for addr in want_plain:
            if addr not in have:
                devices.append(self._hostdev(addr))
                changed = True
        nets = {}
        for element in devices.findall("interface"):
            if element.get("type") == "hostdev":
                nets[source_address(element)] = element
        for addr, element in list(nets.items()):
            if addr not in self.interfaces or not self._interface_matches(element):
                devices.remove(element)
                del nets[addr]
                changed = True
        for addr in self.network_vfs:
            if addr not in nets:
                devices.append(self._interface(addr))
                changed = True
        disks = {}
        for element in devices.findall("disk"):
            source = element.find("source")
            if element.get("device") == "disk" and element.get("type") == "file" and source is not None:
                disks[source.get("file")] = element
        wanted_paths = [d["path"] for d in self.disks]
        for path, element in list(disks.items()):
            if path not in wanted_paths:
                devices.remove(element)
                changed = True
        for disk in self.disks:
            element = disks.get(disk["path"])
            if element is not None:
                driver = element.find("driver")
                target = element.find("target")
                if (driver is not None and driver.get("io") == "threads" and driver.get("type") == disk["format"]
                        and target is not None and target.get("dev") == disk["target"] and target.get("bus") == "virtio"):
                    if self.qos is not None and self._sync_iotune(element):
                        changed = True
                    continue
                devices.remove(element)
            devices.insert(0, self._disk(disk))
            changed = True
        if self._sync_guest_devices(devices):
            changed = True
        return changed

    def _sync_guest_devices(self, devices):
        """The seed as a read-only cdrom (SATA on q35, IDE otherwise), the management NIC and the
        data NIC (virtio, on a libvirt network or a host bridge, with its MAC; the data NIC with its
        VLAN), when the guest options ask for them; other cdroms and interfaces are left as they
        are. -> True when changed."""
        changed = False
        if self.seed_cdrom:
            cdroms = [d for d in devices.findall("disk") if d.get("device") == "cdrom"
                      and d.find("source") is not None and d.find("source").get("file") == self.seed_cdrom]
            if not any(d.find("readonly") is not None for d in cdroms):
                for element in cdroms:
                    devices.remove(element)
                q35 = "q35" in (self.machine or "")
                element = ET.Element("disk", {"type": "file", "device": "cdrom"})
                ET.SubElement(element, "driver", {"name": "qemu", "type": "raw"})
                ET.SubElement(element, "source", {"file": self.seed_cdrom})
                ET.SubElement(element, "target", {"dev": "sda" if q35 else "hdc", "bus": "sata" if q35 else "ide"})
                ET.SubElement(element, "readonly")
                devices.insert(len(devices.findall("disk")), element)
                changed = True
        for nic in (self.management, self.data_nic):
            if nic and self._sync_nic(devices, nic):
                changed = True
        return changed

    @staticmethod
    def _sync_nic(devices, nic):
        """One virtio NIC (the management or the data NIC: {network or bridge, mac, vlan}) on its
        libvirt network or host bridge, found by its MAC; a NIC with that MAC elsewhere is replaced.
        -> True when changed."""
        kind = "network" if nic.get("network") else "bridge"
        name = nic.get(kind)
        tags = [str(nic["vlan"])] if nic.get("vlan") is not None else []
        found = [i for i in devices.findall("interface") if i.get("type") in ("network", "bridge")
                 and i.find("mac") is not None and i.find("mac").get("address", "").lower() == nic["mac"]]
        right = [i for i in found if i.get("type") == kind and i.find("source") is not None
                 and i.find("source").get(kind) == name and i.find("model") is not None
                 and i.find("model").get("type") == "virtio" and [t.get("id") for t in i.findall("vlan/tag")] == tags]
        if right:
            return False
        for element in found:
            devices.remove(element)
        element = ET.SubElement(devices, "interface", {"type": kind})
        ET.SubElement(element, "mac", {"address": nic["mac"]})
        ET.SubElement(element, "source", {kind: name})
        if tags:
            ET.SubElement(ET.SubElement(element, "vlan"), "tag", {"id": tags[0]})
        ET.SubElement(element, "model", {"type": "virtio"})
        return True

    def _interface_matches(self, element):
        wanted = self.interfaces[source_address(element)]
        mac = element.find("mac")
        if mac is None or mac.get("address", "").lower() != wanted["mac"]:
            return False
        tags = [t.get("id") for t in element.findall("vlan/tag")]
        return tags == ([str(wanted["vlan"])] if wanted["vlan"] is not None else [])

    def update(self, root):
        """Bring an existing definition to the spec; -> True when anything changed."""
        self.phys_bits = None
        changed = False
        if root.get("type") != self.domain_type:
            root.set("type", self.domain_type)
            changed = True
        for tag in ("memory", "currentMemory"):
            element = root.find(tag)
            value = to_kib(element.text, element.get("unit", "KiB")) if element is not None else None
            if value != self.memory_kib:
                element = find_or_add(root, tag, after=("name", "uuid", "memory"))
                element.attrib.clear()
                element.set("unit", "KiB")
                element.text = str(self.memory_kib)
                changed = True
        vcpu = root.find("vcpu")
        if vcpu is None or vcpu_counts(root) != (self.vcpus, self.max_vcpus):
            vcpu = find_or_add(root, "vcpu", after=("memoryBacking", "currentMemory", "memory"))
            vcpu.text = str(self.max_vcpus)
            vcpu.attrib.pop("current", None)
            if self.max_vcpus > self.vcpus:
                vcpu.set("current", str(self.vcpus))
            vcpu.set("placement", vcpu.get("placement", "static"))
            # libvirt rebuilds the per-vCPU hotplug list from the new counts
            vcpus_list = root.find("vcpus")
            if vcpus_list is not None:
                root.remove(vcpus_list)
            changed = True
        if self.qos is not None and self._sync_cputune(root):
            changed = True
        if self.hugepage_kib:
            pages = read_pinning(root)["hugepages"]
            if not pages or [p["size_kb"] for p in pages] != [self.hugepage_kib]:
                apply_pinning(root, PinRequest(hugepages={"size": name_of_kb(self.hugepage_kib)}))
                changed = True
        devices = find_or_add(root, "devices")
        if self._sync_devices(devices):
            changed = True
        if self._sync_mmio_window(root):
            changed = True
        if self._sync_phys_bits(root):
            changed = True
        if sync_cells(root, self.cells, self.hugepage_kib, device_elements(root), self.switches, self.memory_mode):
            changed = True
        if not self.cells and sync_switches(root, self.switches, device_elements(root)):
            changed = True
        current = firmware_of(root)
        if current != self.firmware:
            # a guest installed for one firmware does not boot from the other
            self.notes.append("domain %s keeps its %s firmware: firmware is chosen when a tenant's domain is created "
                              "(remove and re-create the tenant to change it)" % (self.name, current))
        return changed
