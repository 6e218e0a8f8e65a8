# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's libvirt domain definition, built and read: pure XML, no libvirt.

The definition is edited with ElementTree; only the elements a caller manages (a tenant's
size, devices, QoS and hugepage backing; the vCPU/emulator pins and the NUMA memory tuning)
are touched, every other element is kept as libvirt returned it. The live calls that read
and change a running domain are in ``libvirt_connection``; the module features that decide
and act with both are in ``libvirt_domain``.
"""

from __future__ import absolute_import, division, print_function

import io
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_devices import device_addresses, source_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_name import check_domain_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.hugepage_sizes import SIZES_KB, name_of_kb, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.mac_address import check_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.pci_address import address_parts, is_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_request import (
    check_arch, check_domain_type, check_firmware, check_machine, check_size, check_tenant_vlan)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vf_mac import tenant_vf_macs

__metaclass__ = type

MEMORY_MODES = ("strict", "preferred", "interleave", "restrictive")
# cputune children a tenant's QoS manages, and the domain scheduler parameters they are live.
CPU_QOS = (("cpu_shares", "shares", "cpu_shares"), ("cpu_period", "period", "vcpu_period"), ("cpu_quota", "quota", "vcpu_quota"))
IOTUNE_KEYS = ("total_bytes_sec", "read_bytes_sec", "write_bytes_sec", "total_iops_sec", "read_iops_sec", "write_iops_sec")
# a vcpu_quota at or above this (cgroup v2 "max") or below 1 is no cap
UNLIMITED_QUOTA = 17592186044415
# The fw_cfg file OVMF reads for the size of its 64-bit PCI aperture, in MiB (edk2
# OvmfPkg/Library/PlatformInitLib/MemDetect.c, PlatformGetFirstNonAddress).
MMIO64_FW_CFG = "opt/ovmf/X-PciMmio64Mb"
# libvirt's QEMU namespace: <qemu:commandline> passes arguments to QEMU as they are.
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)
QEMU_COMMANDLINE = "{%s}commandline" % QEMU_NS
QEMU_ARG = "{%s}arg" % QEMU_NS


# --------------------------------------------------------------------------- XML text and trees
def _namespaces(xml_text):
    """Register the document's namespace prefixes so serialising keeps them."""
    for _event, (prefix, uri) in ET.iterparse(io.StringIO(xml_text), events=("start-ns",)):
        if prefix:
            ET.register_namespace(prefix, uri)


def parse_xml(xml_text):
    _namespaces(xml_text)
    return ET.fromstring(xml_text)


def to_text(root):
    """Serialise with libvirt's two-space indentation (for diffs and for defineXML)."""
    root = copy_tree(root)
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def copy_tree(element):
    return ET.fromstring(ET.tostring(element))


def _child(parent, tag, after=()):
    """The first ``tag`` child of ``parent``, created after the last of ``after`` (or at the end)."""
    found = parent.find(tag)
    if found is not None:
        return found
    element = ET.Element(tag)
    position = len(parent)
    for index, child in enumerate(list(parent)):
        if child.tag in after:
            position = index + 1
    parent.insert(position, element)
    return element


def _insert_after(parent, element, after):
    """Insert ``element`` after the last child of ``parent`` whose tag is in ``after`` (first
    match in that order), else at the end."""
    children = list(parent)
    for tag in after:
        found = [index for index, child in enumerate(children) if child.tag == tag]
        if found:
            parent.insert(found[-1] + 1, element)
            return
    parent.append(element)


def to_kib(value, unit):
    """A libvirt memory size in ``unit`` as KiB."""
    value = int(value)
    unit = (unit or "KiB").lower()
    factors = {"b": 1.0 / 1024, "bytes": 1.0 / 1024, "k": 1, "kib": 1, "kb": 1000.0 / 1024, "m": 1024, "mib": 1024,
               "mb": 1000.0 * 1000 / 1024, "g": 1024 * 1024, "gib": 1024 * 1024}
    return int(value * factors.get(unit, 1))


def host_cpus(capabilities_xml, map_length):
    """{"cells": {id: [cpus]}, "cpus": [all], "page_sizes_kb": [..], "map_length": n} from libvirt's
    capabilities XML and the length of the host CPU map (which bounds the CPUs a pin can name)."""
    caps = ET.fromstring(capabilities_xml)
    cells = {}
    for cell in caps.findall("./host/topology/cells/cell"):
        cells[int(cell.get("id"))] = sorted(int(cpu.get("id")) for cpu in cell.findall("./cpus/cpu"))
    cpus = sorted(set(c for ids in cells.values() for c in ids if c < map_length)) or list(range(map_length))
    sizes = sorted(set(int(p.get("size")) for p in caps.findall("./host/cpu/pages") if p.get("size")))
    return {"cells": cells, "cpus": cpus, "page_sizes_kb": sizes, "map_length": map_length}


def host_cpus_from_topology(topology):
    """The same shape as :func:`host_cpus` from the host model (``host_topology_info``), for a
    captured host tree, where the libvirt at ``uri`` is not that host's."""
    cells = {}
    sizes = set()
    for node in topology.get("numa_nodes") or []:
        cells[int(node["id"])] = sorted(int(cpu) for cpu in node.get("cpus") or [])
        for name in node.get("hugepages") or {}:
            digits = re.match(r"^(\d+)kB$", str(name))
            if digits:
                sizes.add(int(digits.group(1)))
    cpus = sorted(set(cpu for ids in cells.values() for cpu in ids))
    return {"cells": cells, "cpus": cpus, "page_sizes_kb": sorted(sizes), "map_length": (cpus[-1] + 1) if cpus else 1}


def firmware_of(root):
    """``efi`` for a UEFI definition (firmware autoselection or a pflash loader), else ``bios``."""
    os_el = root.find("os")
    if os_el is None:
        return "bios"
    loader = os_el.find("loader")
    if os_el.get("firmware") == "efi" or (loader is not None and loader.get("type") == "pflash"):
        return "efi"
    return "bios"


def _mmio_fw_cfg_value(arg):
    """N of a ``-fw_cfg`` argument ``[name=]opt/ovmf/X-PciMmio64Mb,string=N``; None for
    another argument; -1 for that file with a value that is not a number."""
    fields = dict(part.split("=", 1) if "=" in part else ("name", part) for part in (arg or "").split(","))
    if fields.get("name") != MMIO64_FW_CFG:
        return None
    try:
        return int(fields.get("string", "").strip())
    except ValueError:
        return -1


def _mmio_fw_cfg_args(root):
    """The ``<qemu:arg>`` pairs (``-fw_cfg``, its value) that set the OVMF aperture."""
    pairs = []
    commandline = root.find(QEMU_COMMANDLINE)
    args = list(commandline.findall(QEMU_ARG)) if commandline is not None else []
    for flag, value in zip(args, args[1:]):
        if flag.get("value") == "-fw_cfg" and _mmio_fw_cfg_value(value.get("value")) is not None:
            pairs.append((flag, value))
    return pairs


def mmio_window_of(root):
    """The OVMF 64-bit aperture (MiB) a definition asks for through fw_cfg, or None."""
    for _flag, value in _mmio_fw_cfg_args(root):
        found = _mmio_fw_cfg_value(value.get("value"))
        return found if found >= 0 else None
    return None


def vcpu_counts(root):
    """(current, maximum) vCPUs of a domain definition."""
    vcpu = root.find("vcpu")
    if vcpu is None or not (vcpu.text or "").strip():
        return (1, 1)
    maximum = int(vcpu.text)
    return (int(vcpu.get("current") or maximum), maximum)


def disk_targets(root):
    """File disk path -> guest target device of a definition."""
    return dict((d.find("source").get("file"), d.find("target").get("dev")) for d in root.findall("devices/disk")
                if d.find("source") is not None and d.find("target") is not None and d.find("source").get("file"))


def network_nics(root):
    """The (type, source, MAC) of a definition's NICs on a libvirt network or a bridge."""
    out = []
    for nic in root.findall("devices/interface"):
        kind = nic.get("type")
        if kind in ("network", "bridge"):
            source, mac = nic.find("source"), nic.find("mac")
            out.append((kind, source.get(kind) if source is not None else None, mac.get("address") if mac is not None else None))
    return sorted(out, key=lambda nic: tuple(str(part) for part in nic))


def _cpuset(value, what="cpuset"):
    return parse_cpulist(value, what)


def check_page_size(host, size_kb, what):
    """Refuse hugepages of a size the host (:func:`host_cpus`) does not have."""
    if host["page_sizes_kb"] and size_kb not in host["page_sizes_kb"]:
        raise InputError("%s: %d KiB pages are not supported by this host (sizes %s KiB)"
                         % (what, size_kb, ", ".join(map(str, host["page_sizes_kb"]))))


# --------------------------------------------------------------------------- pinning
def read_pinning(root):
    """The managed pinning state of a domain XML tree."""
    pins = {}
    emulator = None
    cputune = root.find("cputune")
    if cputune is not None:
        for pin in cputune.findall("vcpupin"):
            pins[int(pin.get("vcpu"))] = _cpuset(pin.get("cpuset"))
        emu = cputune.find("emulatorpin")
        if emu is not None:
            emulator = _cpuset(emu.get("cpuset"))
    mode = nodeset = None
    memory = root.find("numatune/memory")
    if memory is not None:
        mode = memory.get("mode", "strict")
        nodeset = _cpuset(memory.get("nodeset")) if memory.get("nodeset") else None
    pages = None
    hugepages = root.find("memoryBacking/hugepages")
    if hugepages is not None:
        pages = []
        for page in hugepages.findall("page"):
            pages.append({"size_kb": to_kib(page.get("size"), page.get("unit", "KiB")),
                          "nodeset": _cpuset(page.get("nodeset")) if page.get("nodeset") else None})
        if not pages:
            pages = [{"size_kb": None, "nodeset": None}]
    return {"vcpu_pins": pins, "emulator_cpus": emulator, "memory_mode": mode, "nodeset": nodeset, "hugepages": pages}


def pinning_fields(state):
    """A pinning state (``read_pinning``) as module result fields: cpusets as text."""
    return {
        "vcpu_pins": dict((str(k), format_cpulist(v)) for k, v in sorted(state["vcpu_pins"].items())),
        "emulator_cpus": format_cpulist(state["emulator_cpus"]) if state["emulator_cpus"] is not None else None,
        "memory_mode": state["memory_mode"],
        "nodeset": format_cpulist(state["nodeset"]) if state["nodeset"] is not None else None,
    }


def virtio_disk_target(index):
    """The guest device name of the index-th virtio disk, as the kernel names them: vda .. vdz,
    vdaa .. vdaz, vdba, ... (bijective base 26, no limit)."""
    letters = ""
    number = index + 1
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return "vd" + letters


class PinRequest:
    """The normalised pinning options (``numa_pin``; ``tenant_domain``'s pins), validated against
    the host and the domain."""

    def __init__(self, vcpu_pins=None, emulator_cpus=None, memory_mode="strict", nodeset=None, hugepages=None):
        self.vcpu_pins = None
        if vcpu_pins is not None:
            if not isinstance(vcpu_pins, dict):
                raise InputError("vcpu_pins: expected a dict vCPU number -> cpuset, e.g. {0: '3', 1: '4-5'}")
            self.vcpu_pins = {}
            for vcpu, cpuset in vcpu_pins.items():
                try:
                    index = int(vcpu)
                except (TypeError, ValueError):
                    raise InputError("vcpu_pins: key %r is not a vCPU number" % (vcpu,))
                if index < 0:
                    raise InputError("vcpu_pins: vCPU %d is negative" % index)
                cpus = _cpuset(cpuset, "vcpu_pins[%d]" % index)
                if not cpus:
                    raise InputError("vcpu_pins[%d]: empty cpuset; give at least one host CPU" % index)
                self.vcpu_pins[index] = cpus
        self.emulator_cpus = None
        if emulator_cpus is not None and emulator_cpus != "":
            self.emulator_cpus = _cpuset(emulator_cpus, "emulator_cpus")
        if memory_mode not in MEMORY_MODES:
            raise InputError("memory_mode: %r is not one of %s" % (memory_mode, ", ".join(MEMORY_MODES)))
        self.memory_mode = memory_mode
        self.nodeset = _cpuset(nodeset, "nodeset") if nodeset not in (None, "") else None
        if nodeset not in (None, "") and not self.nodeset:
            raise InputError("nodeset: empty; give host NUMA node numbers such as '1'")
        self.hugepages = None
        if hugepages:
            if not isinstance(hugepages, dict) or "size" not in hugepages:
                raise InputError("hugepages: expected a dict with size (2M or 1G) and optional nodeset (guest NUMA cells)")
            name = size_name(hugepages.get("size"), "hugepages.size", allow_none=True)
            if name is None:
                raise InputError("hugepages.size: give 2M or 1G (leave hugepages out to keep the memory backing unchanged)")
            guest_nodes = hugepages.get("nodeset")
            self.hugepages = {"size_kb": SIZES_KB[name],
                              "nodeset": _cpuset(guest_nodes, "hugepages.nodeset") if guest_nodes not in (None, "") else None}

    @property
    def pins_anything(self):
        """Whether the request manages a pin or the NUMA nodeset (what can be applied live)."""
        return bool(self.vcpu_pins) or self.emulator_cpus is not None or self.nodeset is not None

    def validate(self, host, root, strict_vcpus=True):
        """-> warnings. ``host``: :func:`host_cpus`. With ``strict_vcpus`` false (check mode) pins
        of vCPUs the definition does not have yet are a warning: the tenant's new vCPU count is
        defined before it is pinned."""
        warnings = []
        known = set(host["cpus"])
        for index, cpus in sorted((self.vcpu_pins or {}).items()):
            outside = [c for c in cpus if c not in known]
            if outside:
                raise InputError("vcpu_pins[%d]: CPU(s) %s are not on this host (host CPUs %s)"
                                 % (index, format_cpulist(outside), format_cpulist(known)))
        if self.emulator_cpus is not None:
            outside = [c for c in self.emulator_cpus if c not in known]
            if outside:
                raise InputError("emulator_cpus: CPU(s) %s are not on this host (host CPUs %s)" % (format_cpulist(outside), format_cpulist(known)))
        if self.nodeset is not None:
            missing = [n for n in self.nodeset if n not in host["cells"]]
            if missing:
                raise InputError("nodeset: NUMA node(s) %s do not exist on this host (nodes %s)"
                                 % (format_cpulist(missing), format_cpulist(host["cells"]) or "none"))
        max_vcpus = vcpu_counts(root)[1]
        too_high = [i for i in (self.vcpu_pins or {}) if i >= max_vcpus]
        if too_high and not strict_vcpus:
            warnings.append("vCPU(s) %s are not in the definition yet (%d vCPU(s)); they are pinned once the domain is defined "
                            "with them (gpuvirt.tenancy.tenant_domain)" % (", ".join(map(str, too_high)), max_vcpus))
        elif too_high:
            raise InputError("vcpu_pins: vCPU(s) %s do not exist; the domain has %d vCPU(s) (0-%d)"
                             % (", ".join(map(str, too_high)), max_vcpus, max_vcpus - 1))
        if self.hugepages is not None:
            check_page_size(host, self.hugepages["size_kb"], "hugepages.size")
            if self.hugepages["nodeset"] is not None:
                cells = [int(c.get("id")) for c in root.findall("cpu/numa/cell") if c.get("id") is not None]
                missing = [n for n in self.hugepages["nodeset"] if n not in cells]
                if missing:
                    raise InputError("hugepages.nodeset: guest NUMA cell(s) %s are not defined in the domain (cells: %s); the "
                                     "host node is set with nodeset" % (format_cpulist(missing), format_cpulist(cells) or "none"))
        return warnings

    def desired(self, current):
        return {
            "vcpu_pins": self.vcpu_pins if self.vcpu_pins is not None else current["vcpu_pins"],
            "emulator_cpus": self.emulator_cpus if self.emulator_cpus is not None else current["emulator_cpus"],
            "memory_mode": self.memory_mode if self.nodeset is not None else current["memory_mode"],
            "nodeset": self.nodeset if self.nodeset is not None else current["nodeset"],
            "hugepages": [self.hugepages] if self.hugepages is not None else current["hugepages"],
        }


def apply_pinning(root, request):
    """Edit ``root`` (a domain XML tree) in place to carry ``request``; -> True when it changed."""
    current = read_pinning(root)
    if request.desired(current) == current:
        return False
    if request.vcpu_pins is not None or request.emulator_cpus is not None:
        cputune = _child(root, "cputune", after=("vcpu", "vcpus", "iothreads", "iothreadids"))
        if request.vcpu_pins is not None:
            old = cputune.findall("vcpupin")
            position = list(cputune).index(old[0]) if old else len(cputune)
            for pin in old:
                cputune.remove(pin)
            for offset, index in enumerate(sorted(request.vcpu_pins)):
                element = ET.Element("vcpupin", {"vcpu": str(index), "cpuset": format_cpulist(request.vcpu_pins[index])})
                cputune.insert(position + offset, element)
        if request.emulator_cpus is not None:
            emu = cputune.find("emulatorpin")
            if emu is None:
                pins = cputune.findall("vcpupin")
                position = list(cputune).index(pins[-1]) + 1 if pins else len(cputune)
                emu = ET.Element("emulatorpin")
                cputune.insert(position, emu)
            emu.set("cpuset", format_cpulist(request.emulator_cpus))
    if request.nodeset is not None:
        numatune = _child(root, "numatune", after=("cputune", "vcpu", "vcpus", "iothreads"))
        memory = numatune.find("memory")
        if memory is None:
            memory = ET.Element("memory")
            numatune.insert(0, memory)
        for key in list(memory.attrib):
            if key not in ("mode", "nodeset"):
                del memory.attrib[key]
        memory.set("mode", request.memory_mode)
        memory.set("nodeset", format_cpulist(request.nodeset))
    if request.hugepages is not None:
        backing = _child(root, "memoryBacking", after=("currentMemory", "memory", "maxMemory"))
        hugepages = backing.find("hugepages")
        if hugepages is None:
            hugepages = ET.Element("hugepages")
            backing.insert(0, hugepages)
        for page in list(hugepages):
            hugepages.remove(page)
        attrs = {"size": str(request.hugepages["size_kb"]), "unit": "KiB"}
        if request.hugepages["nodeset"] is not None:
            attrs["nodeset"] = format_cpulist(request.hugepages["nodeset"])
        hugepages.append(ET.Element("page", attrs))
    return True


# --------------------------------------------------------------------------- tenant domains
def _whole(value, what):
    if isinstance(value, bool):
        raise InputError("%s: %r is not a whole number" % (what, value))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError("%s: %r is not a whole number" % (what, value))


def _address_attributes(addr, what):
    """A PCI address as libvirt's ``<address domain= bus= slot= function=>`` attributes; only the
    full form (``0000:82:00.0``, any case) is taken."""
    text = str(addr or "").lower()
    if not is_address(text):
        raise InputError("%s: %r is not a PCI address like 0000:82:00.0" % (what, addr))
    domain, bus, slot, function = address_parts(text)
    return {"domain": "0x%04x" % domain, "bus": "0x%02x" % bus, "slot": "0x%02x" % slot, "function": "0x%x" % function}


class TenantSpec:
    """The ``tenant_domain`` options, validated; builds a new definition or brings one to them."""

    def __init__(self, params, limits=None):
        """``limits``: what the host has (tenant_request.limits_of_*), which bounds the size."""
        self.name = check_domain_name(params["name"], "name")
        self.domain_type = check_domain_type(params.get("domain_type")) or "kvm"
        self.vcpus, self.max_vcpus, memory_mb = check_size(params.get("vcpus"), params.get("memory_mb"), params.get("max_vcpus"),
                                                           limits)
        self.qos = self._qos(params.get("qos"))
        self.memory_kib = memory_mb * 1024
        self.hugepage_kib = None
        size = size_name(params.get("hugepage_size"), "hugepage_size", allow_none=True)
        if size:
            self.hugepage_kib = SIZES_KB[size]
            # guest memory is whole hugepages
            self.memory_kib = -(-self.memory_kib // self.hugepage_kib) * self.hugepage_kib
        self.gpus = [self._addr(a, "gpus") for a in params.get("gpus") or []]
        self.vfs = [self._addr(a, "vfs") for a in params.get("vfs") or []]
        all_devices = self.gpus + self.vfs
        if len(set(all_devices)) != len(all_devices):
            raise InputError("gpus/vfs: a PCI address is listed twice")
        self.mac = self._mac(params.get("mac"), "mac")
        self.vlan = check_tenant_vlan(params.get("vlan"), "vlan")
        self.interfaces = self._interfaces(params.get("network_vfs") or [])
        self.network_vfs = list(self.interfaces)
        self.firmware = check_firmware(params.get("firmware"))
        # the OVMF 64-bit aperture in MiB; None: no fw_cfg entry (OVMF's default window)
        self.mmio_window_mb = params.get("mmio_window_mb") or None
        # False on a libvirt driver that drops <qemu:commandline> (the test driver of a preview):
        # an existing definition is then not brought to the window it can never keep.
        self.qemu_args_kept = True
        self.notes = []
        self.disks = []
        targets = set()
        for index, disk in enumerate(params.get("disks") or []):
            path = disk.get("path")
            if not path:
                raise InputError("disks[%d]: path is required" % index)
            target = disk.get("target") or virtio_disk_target(len(self.disks))
            if target in targets:
                raise InputError("disks[%d]: target %s used twice" % (index, target))
            targets.add(target)
            self.disks.append({"path": path, "format": disk.get("format") or "qcow2", "target": target})
        self.machine = check_machine(params.get("machine"))
        self.arch = check_arch(params.get("arch")) or "x86_64"
        # set by tenant_domain from the guest options (guest_image): the cloud-init seed ISO, the
        # management NIC ({network or bridge, mac}) and the serial console's log file
        self.seed_cdrom = None
        self.management = None
        self.console_log = None

    @classmethod
    def named(cls, name):
        """A spec that names a domain and nothing else (to remove it)."""
        spec = cls.__new__(cls)
        spec.name = name
        return spec

    @staticmethod
    def _qos(qos):
        """``qos`` -> {cpu_shares, cpu_period, cpu_quota: int|None, iotune: {key: int}} or None (not managed)."""
        if qos is None:
            return None
        if not isinstance(qos, dict):
            raise InputError("qos: expected a dict with cpu_shares, cpu_period, cpu_quota and iotune")
        unknown = sorted(set(qos) - set(["cpu_shares", "cpu_period", "cpu_quota", "iotune"]))
        if unknown:
            raise InputError("qos: unknown key(s) %s; known: cpu_shares, cpu_period, cpu_quota, iotune" % ", ".join(unknown))
        out = {"iotune": {}}
        limits = {"cpu_shares": (2, 262144), "cpu_period": (1000, 1000000), "cpu_quota": (1000, UNLIMITED_QUOTA - 1)}
        for key, (low, high) in limits.items():
            value = qos.get(key)
            if value is not None:
                value = _whole(value, "qos.%s" % key)
                if not low <= value <= high:
                    raise InputError("qos.%s: %d is outside %d-%d (libvirt cputune)" % (key, value, low, high))
            out[key] = value
        if out["cpu_quota"] is not None and out["cpu_period"] is None:
            raise InputError("qos.cpu_quota: a quota needs its period; set qos.cpu_period (microseconds, e.g. 100000)")
        iotune = qos.get("iotune") or {}
        if not isinstance(iotune, dict):
            raise InputError("qos.iotune: expected a dict of %s" % ", ".join(IOTUNE_KEYS))
        bad = sorted(set(iotune) - set(IOTUNE_KEYS))
        if bad:
            raise InputError("qos.iotune: unknown key(s) %s; known: %s" % (", ".join(bad), ", ".join(IOTUNE_KEYS)))
        for key, value in iotune.items():
            if value is None:
                continue
            value = _whole(value, "qos.iotune.%s" % key)
            if value < 0:
                raise InputError("qos.iotune.%s: %d is negative; 0 (or leaving it out) means no limit" % (key, value))
            if value:
                out["iotune"][key] = value
        for prefix in ("bytes", "iops"):
            if out["iotune"].get("total_%s_sec" % prefix) and (out["iotune"].get("read_%s_sec" % prefix)
                                                               or out["iotune"].get("write_%s_sec" % prefix)):
                raise InputError("qos.iotune: total_%s_sec cannot be set with read_%s_sec/write_%s_sec (libvirt refuses both); "
                                 "keep one" % (prefix, prefix, prefix))
        return out

    @staticmethod
    def _addr(addr, what):
        _address_attributes(addr, what)
        return str(addr).lower()

    @staticmethod
    def _mac(mac, what):
        return check_mac(mac, what) if mac else None

    def _interfaces(self, entries):
        """VF address -> {mac, vlan} of the network VFs: an entry's own MAC and VLAN, else the
        tenant's ``vlan`` and its ``mac`` for the first one, and a MAC derived from the tenant
        name and the VF's index for each other (vf_mac)."""
        own = {}
        for index, entry in enumerate(entries):
            what = "network_vfs[%d]" % index
            if isinstance(entry, dict):
                addr = self._addr(entry.get("address"), what + ".address")
                own[addr] = {"mac": self._mac(entry.get("mac"), what + ".mac"),
                             "vlan": check_tenant_vlan(entry["vlan"], what + ".vlan") if entry.get("vlan") is not None else self.vlan}
            else:
                own[self._addr(entry, what)] = {"mac": None, "vlan": self.vlan}
        stray = [a for a in own if a not in self.vfs]
        if stray:
            raise InputError("network_vfs: %s not listed in vfs" % ", ".join(stray))
        derived = tenant_vf_macs(self.name, self.vfs, mac=self.mac, network=set(own))
        out = {}
        for addr in [a for a in self.vfs if a in own]:
            out[addr] = {"mac": own[addr]["mac"] or derived[addr], "vlan": own[addr]["vlan"]}
        macs = [i["mac"] for i in out.values()]
        if len(set(macs)) != len(macs):
            raise InputError("network_vfs: two VFs would share MAC %s; give each its own"
                             % sorted(m for m in macs if macs.count(m) > 1)[0])
        return out

    def build(self):
        """A new domain definition."""
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
            ET.SubElement(cpu, "maxphysaddr", {"mode": "passthrough"})
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
        return root

    @staticmethod
    def _hostdev(addr):
        element = ET.Element("hostdev", {"mode": "subsystem", "type": "pci", "managed": "no"})
        source = ET.SubElement(element, "source")
        ET.SubElement(source, "address", _address_attributes(addr, "hostdev"))
        return element

    def _interface(self, addr):
        """A network VF: libvirt sets its MAC and VLAN on the PF when the domain starts (and puts
        the old ones back when it stops); ``managed='no'`` as for every hostdev, the VF stays on
        vfio-pci as the VFIO stage bound it."""
        wanted = self.interfaces[addr]
        element = ET.Element("interface", {"type": "hostdev", "managed": "no"})
        ET.SubElement(element, "mac", {"address": wanted["mac"]})
        source = ET.SubElement(element, "source")
        ET.SubElement(source, "address", dict(_address_attributes(addr, "interface"), type="pci"))
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
        if mmio_window_of(root) == self.mmio_window_mb and len(_mmio_fw_cfg_args(root)) <= 1:
            return False
        commandline = root.find(QEMU_COMMANDLINE)
        for flag, value in _mmio_fw_cfg_args(root):
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
        ET.SubElement(cpu, "maxphysaddr", {"mode": "passthrough"})
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
                cputune = _child(root, "cputune", after=("vcpu", "vcpus", "iothreads", "iothreadids"))
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
        """The seed as a read-only cdrom (SATA on q35, IDE otherwise) and the management NIC
        (virtio, on a libvirt network or a host bridge, with its MAC), when the guest options
        ask for them; other cdroms and interfaces are left as they are. -> True when changed."""
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
        if self.management:
            kind = "network" if self.management.get("network") else "bridge"
            name = self.management.get(kind)
            found = [i for i in devices.findall("interface") if i.get("type") in ("network", "bridge")
                     and i.find("mac") is not None and i.find("mac").get("address", "").lower() == self.management["mac"]]
            right = [i for i in found if i.get("type") == kind and i.find("source") is not None
                     and i.find("source").get(kind) == name and i.find("model") is not None
                     and i.find("model").get("type") == "virtio"]
            if not right:
                for element in found:
                    devices.remove(element)
                element = ET.SubElement(devices, "interface", {"type": kind})
                ET.SubElement(element, "mac", {"address": self.management["mac"]})
                ET.SubElement(element, "source", {kind: name})
                ET.SubElement(element, "model", {"type": "virtio"})
                changed = True
        return changed

    def _interface_matches(self, element):
        wanted = self.interfaces[source_address(element)]
        mac = element.find("mac")
        if mac is None or mac.get("address", "").lower() != wanted["mac"]:
            return False
        tags = [t.get("id") for t in element.findall("vlan/tag")]
        return tags == ([str(wanted["vlan"])] if wanted["vlan"] is not None else [])

    def update(self, root):
        """Bring an existing definition to the spec; -> True when anything changed."""
        changed = False
        if root.get("type") != self.domain_type:
            root.set("type", self.domain_type)
            changed = True
        for tag in ("memory", "currentMemory"):
            element = root.find(tag)
            value = to_kib(element.text, element.get("unit", "KiB")) if element is not None else None
            if value != self.memory_kib:
                element = _child(root, tag, after=("name", "uuid", "memory"))
                element.attrib.clear()
                element.set("unit", "KiB")
                element.text = str(self.memory_kib)
                changed = True
        vcpu = root.find("vcpu")
        if vcpu is None or vcpu_counts(root) != (self.vcpus, self.max_vcpus):
            vcpu = _child(root, "vcpu", after=("memoryBacking", "currentMemory", "memory"))
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
        devices = _child(root, "devices")
        if self._sync_devices(devices):
            changed = True
        if self._sync_mmio_window(root):
            changed = True
        if self._sync_phys_bits(root):
            changed = True
        current = firmware_of(root)
        if current != self.firmware:
            # a guest installed for one firmware does not boot from the other
            self.notes.append("domain %s keeps its %s firmware: firmware is chosen when a tenant's domain is created "
                              "(remove and re-create the tenant to change it)" % (self.name, current))
        return changed


def cputune_qos(root):
    """The cputune shares/period/quota a definition carries, in order."""
    return [(t.tag, t.text) for t in root.findall("cputune/*") if t.tag in [tag for _k, tag, _p in CPU_QOS]]


def read_assignment(root):
    """What a domain definition holds, in the shape the planner's ``existing`` takes."""
    pinning = read_pinning(root)
    nodeset = pinning["nodeset"]
    vcpu = root.find("vcpu")
    memory = root.find("memory")
    pages = pinning["hugepages"]
    node = nodeset[0] if nodeset is not None and len(nodeset) == 1 else None
    fields = pinning_fields(pinning)
    return {
        "hostdevs": device_addresses(root),
        "vcpu_pins": fields["vcpu_pins"],
        "emulator_cpus": fields["emulator_cpus"],
        "memory_mode": fields["memory_mode"],
        "nodeset": fields["nodeset"],
        "numa_node": node,
        "hugepages": {"size": name_of_kb(pages[0]["size_kb"]), "node": node} if pages else None,
        "vcpus": int(vcpu.text) if vcpu is not None and (vcpu.text or "").strip() else None,
        "memory_mb": to_kib(memory.text, memory.get("unit", "KiB")) // 1024 if memory is not None else None,
    }


def held_resources(root, live_root=None):
    """What a domain that is not a listed tenant holds, for the plan to keep out: the fields of
    :func:`read_assignment`, its host devices and pinned CPUs (``cpus``) in its definition and,
    running, in its live XML too, and its hugepage count. A definition without ``numatune`` has
    ``numa_node`` None: its memory may come from any node."""
    held = read_assignment(root)
    roots = [root] if live_root is None else [root, live_root]
    devices = []
    cpus = set()
    for tree in roots:
        devices.extend(address for address in device_addresses(tree) if address not in devices)
        pinning = read_pinning(tree)
        for pinned in pinning["vcpu_pins"].values():
            cpus.update(pinned)
        cpus.update(pinning["emulator_cpus"] or [])
    held["hostdevs"] = devices
    held["cpus"] = format_cpulist(sorted(cpus))
    pages = read_pinning(root)["hugepages"]
    memory = root.find("memory")
    if held["hugepages"] and memory is not None:
        size_kb = pages[0]["size_kb"] or SIZES_KB["2M"]
        held["hugepages"] = dict(held["hugepages"], size=name_of_kb(size_kb),
                                 count=-(-to_kib(memory.text, memory.get("unit", "KiB")) // size_kb))
    return held
