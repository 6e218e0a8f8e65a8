# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""libvirt domains for tenants: the domain definition, and CPU/NUMA/hugepage pinning.

Everything goes through libvirt-python (``libvirt``), imported guarded: the modules fail
with a clear message when it is missing. XML is edited with ElementTree on the persistent
definition; only the elements a caller manages are touched, every other element is kept as
libvirt returned it.
"""

from __future__ import annotations

import io
import re
import time
import traceback
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import (
    HUGEPAGE_SIZES, PlacementInputError, format_cpuset, hugepage_size_name, parse_cpuset)

try:
    import libvirt
except ImportError:
    libvirt = None
    LIBVIRT_IMPORT_ERROR = traceback.format_exc()
else:
    LIBVIRT_IMPORT_ERROR = None

MEMORY_MODES = ("strict", "preferred", "interleave", "restrictive")
# cputune children a tenant's QoS manages, and the domain scheduler parameters they are live.
CPU_QOS = (("cpu_shares", "shares", "cpu_shares"), ("cpu_period", "period", "vcpu_period"), ("cpu_quota", "quota", "vcpu_quota"))
IOTUNE_KEYS = ("total_bytes_sec", "read_bytes_sec", "write_bytes_sec", "total_iops_sec", "read_iops_sec", "write_iops_sec")
# a vcpu_quota at or above this (cgroup v2 "max") or below 1 is no cap
UNLIMITED_QUOTA = 17592186044415
PCI_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
MAC_RE = re.compile(r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$")


def missing_libvirt_message():
    return ("libvirt-python is required (module 'libvirt' could not be imported): install python3-libvirt "
            "(Debian/Ubuntu) or python3-libvirt (RHEL) on the managed host")


def _silence(*_args):
    """libvirt prints every error on stderr unless a handler is registered."""


def connect(uri):
    if libvirt is None:
        raise StateError(missing_libvirt_message())
    libvirt.registerErrorHandler(_silence, None)
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise StateError("uri: cannot connect to %s: %s; is libvirtd running (gpuvirt.tenancy.libvirt_host)?" % (uri, exc)) from None


def lookup(conn, name, uri):
    try:
        return conn.lookupByName(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return None
        raise StateError("name: looking up domain %s on %s failed: %s" % (name, uri, exc)) from None


# --------------------------------------------------------------------------- XML helpers
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
    root = _copy(root)
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def _copy(element):
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


def host_info(conn):
    """{"cells": {id: [cpus]}, "cpus": [all], "page_sizes_kb": [..], "map_length": n} from the capabilities XML
    and the host CPU map (whose length bounds the CPUs a pin can name)."""
    caps = ET.fromstring(conn.getCapabilities())
    cells = {}
    for cell in caps.findall("./host/topology/cells/cell"):
        cells[int(cell.get("id"))] = sorted(int(cpu.get("id")) for cpu in cell.findall("./cpus/cpu"))
    map_length = conn.getCPUMap()[0]
    cpus = sorted(set(c for ids in cells.values() for c in ids if c < map_length)) or list(range(map_length))
    sizes = sorted(set(int(p.get("size")) for p in caps.findall("./host/cpu/pages") if p.get("size")))
    return {"cells": cells, "cpus": cpus, "page_sizes_kb": sizes, "map_length": map_length}


# --------------------------------------------------------------------------- pinning
def read_pinning(root):
    """The managed pinning state of a domain XML tree."""
    pins = {}
    emulator = None
    cputune = root.find("cputune")
    if cputune is not None:
        for pin in cputune.findall("vcpupin"):
            pins[int(pin.get("vcpu"))] = parse_cpuset(pin.get("cpuset"))
        emu = cputune.find("emulatorpin")
        if emu is not None:
            emulator = parse_cpuset(emu.get("cpuset"))
    mode = nodeset = None
    memory = root.find("numatune/memory")
    if memory is not None:
        mode = memory.get("mode", "strict")
        nodeset = parse_cpuset(memory.get("nodeset")) if memory.get("nodeset") else None
    pages = None
    hugepages = root.find("memoryBacking/hugepages")
    if hugepages is not None:
        pages = []
        for page in hugepages.findall("page"):
            pages.append({"size_kb": _kib(page.get("size"), page.get("unit", "KiB")),
                          "nodeset": parse_cpuset(page.get("nodeset")) if page.get("nodeset") else None})
        if not pages:
            pages = [{"size_kb": None, "nodeset": None}]
    return {"vcpu_pins": pins, "emulator_cpus": emulator, "memory_mode": mode, "nodeset": nodeset, "hugepages": pages}


def _kib(value, unit):
    value = int(value)
    unit = (unit or "KiB").lower()
    factors = {"b": 1.0 / 1024, "bytes": 1.0 / 1024, "k": 1, "kib": 1, "kb": 1000.0 / 1024, "m": 1024, "mib": 1024,
               "mb": 1000.0 * 1000 / 1024, "g": 1024 * 1024, "gib": 1024 * 1024}
    return int(value * factors.get(unit, 1))


class PinRequest:
    """The normalised ``numa_pin`` options, validated against the host and the domain."""

    def __init__(self, vcpu_pins=None, emulator_cpus=None, memory_mode="strict", nodeset=None, hugepages=None):
        try:
            self.vcpu_pins = None
            if vcpu_pins is not None:
                if not isinstance(vcpu_pins, dict):
                    raise InputError("vcpu_pins: expected a dict vCPU number -> cpuset, e.g. {0: '3', 1: '4-5'}")
                self.vcpu_pins = {}
                for vcpu, cpuset in vcpu_pins.items():
                    try:
                        index = int(vcpu)
                    except (TypeError, ValueError):
                        raise InputError("vcpu_pins: key %r is not a vCPU number" % (vcpu,)) from None
                    if index < 0:
                        raise InputError("vcpu_pins: vCPU %d is negative" % index)
                    cpus = parse_cpuset(cpuset, "vcpu_pins[%d]" % index)
                    if not cpus:
                        raise InputError("vcpu_pins[%d]: empty cpuset; give at least one host CPU" % index)
                    self.vcpu_pins[index] = cpus
            self.emulator_cpus = None
            if emulator_cpus is not None and emulator_cpus != "":
                self.emulator_cpus = parse_cpuset(emulator_cpus, "emulator_cpus")
            if memory_mode not in MEMORY_MODES:
                raise InputError("memory_mode: %r is not one of %s" % (memory_mode, ", ".join(MEMORY_MODES)))
            self.memory_mode = memory_mode
            self.nodeset = parse_cpuset(nodeset, "nodeset") if nodeset not in (None, "") else None
            if nodeset not in (None, "") and not self.nodeset:
                raise InputError("nodeset: empty; give host NUMA node numbers such as '1'")
            self.hugepages = None
            if hugepages:
                if not isinstance(hugepages, dict) or "size" not in hugepages:
                    raise InputError("hugepages: expected a dict with size (2M or 1G) and optional nodeset (guest NUMA cells)")
                name = hugepage_size_name(hugepages.get("size"), "hugepages.size")
                if name is None:
                    raise InputError("hugepages.size: give 2M or 1G (leave hugepages out to keep the memory backing unchanged)")
                guest_nodes = hugepages.get("nodeset")
                self.hugepages = {"size_kb": HUGEPAGE_SIZES[name],
                                  "nodeset": parse_cpuset(guest_nodes, "hugepages.nodeset") if guest_nodes not in (None, "") else None}
        except PlacementInputError as exc:
            raise InputError(str(exc)) from None

    def validate(self, host, root, strict_vcpus=True):
        """-> warnings. With ``strict_vcpus`` false (check mode) pins of vCPUs the definition does
        not have yet are a warning: the tenant's new vCPU count is defined before it is pinned."""
        warnings = []
        known = set(host["cpus"])
        for index, cpus in sorted((self.vcpu_pins or {}).items()):
            outside = [c for c in cpus if c not in known]
            if outside:
                raise InputError("vcpu_pins[%d]: CPU(s) %s are not on this host (host CPUs %s)"
                                 % (index, format_cpuset(outside), format_cpuset(known)))
        if self.emulator_cpus is not None:
            outside = [c for c in self.emulator_cpus if c not in known]
            if outside:
                raise InputError("emulator_cpus: CPU(s) %s are not on this host (host CPUs %s)" % (format_cpuset(outside), format_cpuset(known)))
        if self.nodeset is not None:
            missing = [n for n in self.nodeset if n not in host["cells"]]
            if missing:
                raise InputError("nodeset: NUMA node(s) %s do not exist on this host (nodes %s)"
                                 % (format_cpuset(missing), format_cpuset(host["cells"]) or "none"))
        max_vcpus = vcpu_counts(root)[1]
        too_high = [i for i in (self.vcpu_pins or {}) if i >= max_vcpus]
        if too_high and not strict_vcpus:
            warnings.append("vCPU(s) %s are not in the definition yet (%d vCPU(s)); they are pinned once the domain is defined "
                            "with them (gpuvirt.tenancy.tenant_domain)" % (", ".join(map(str, too_high)), max_vcpus))
        elif too_high:
            raise InputError("vcpu_pins: vCPU(s) %s do not exist; the domain has %d vCPU(s) (0-%d)"
                             % (", ".join(map(str, too_high)), max_vcpus, max_vcpus - 1))
        if self.hugepages is not None:
            if host["page_sizes_kb"] and self.hugepages["size_kb"] not in host["page_sizes_kb"]:
                raise InputError("hugepages.size: %d KiB pages are not supported by this host (sizes %s KiB)"
                                 % (self.hugepages["size_kb"], ", ".join(map(str, host["page_sizes_kb"]))))
            if self.hugepages["nodeset"] is not None:
                cells = [int(c.get("id")) for c in root.findall("cpu/numa/cell") if c.get("id") is not None]
                missing = [n for n in self.hugepages["nodeset"] if n not in cells]
                if missing:
                    raise InputError("hugepages.nodeset: guest NUMA cell(s) %s are not defined in the domain (cells: %s); the "
                                     "host node is set with nodeset" % (format_cpuset(missing), format_cpuset(cells) or "none"))
        return warnings

    def desired(self, current):
        want = {
            "vcpu_pins": self.vcpu_pins if self.vcpu_pins is not None else current["vcpu_pins"],
            "emulator_cpus": self.emulator_cpus if self.emulator_cpus is not None else current["emulator_cpus"],
            "memory_mode": self.memory_mode if self.nodeset is not None else current["memory_mode"],
            "nodeset": self.nodeset if self.nodeset is not None else current["nodeset"],
            "hugepages": [self.hugepages] if self.hugepages is not None else current["hugepages"],
        }
        return want


def apply_pinning(root, request):
    """Edit ``root`` (a domain XML tree) in place to carry ``request``; -> True when it changed."""
    current = read_pinning(root)
    want = request.desired(current)
    if want == current:
        return False
    if request.vcpu_pins is not None or request.emulator_cpus is not None:
        cputune = _child(root, "cputune", after=("vcpu", "vcpus", "iothreads", "iothreadids"))
        if request.vcpu_pins is not None:
            old = cputune.findall("vcpupin")
            position = list(cputune).index(old[0]) if old else len(cputune)
            for pin in old:
                cputune.remove(pin)
            for offset, index in enumerate(sorted(request.vcpu_pins)):
                element = ET.Element("vcpupin", {"vcpu": str(index), "cpuset": format_cpuset(request.vcpu_pins[index])})
                cputune.insert(position + offset, element)
        if request.emulator_cpus is not None:
            emu = cputune.find("emulatorpin")
            if emu is None:
                pins = cputune.findall("vcpupin")
                position = list(cputune).index(pins[-1]) + 1 if pins else len(cputune)
                emu = ET.Element("emulatorpin")
                cputune.insert(position, emu)
            emu.set("cpuset", format_cpuset(request.emulator_cpus))
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
        memory.set("nodeset", format_cpuset(request.nodeset))
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
            attrs["nodeset"] = format_cpuset(request.hugepages["nodeset"])
        hugepages.append(ET.Element("page", attrs))
    return True


def _cpumap(cpus, length):
    wanted = set(cpus)
    return tuple(cpu in wanted for cpu in range(length))


def _from_map(cpumap):
    return [cpu for cpu, used in enumerate(cpumap) if used]


NUMA_MODE_CODES = {"strict": 0, "preferred": 1, "interleave": 2, "restrictive": 3}


class NumaPin:
    """Decide, then apply, the pinning of one domain (persistent definition, optionally live)."""

    def __init__(self, conn, name, uri, request, live=False, check_mode=False):
        self.conn = conn
        self.name = name
        self.request = request
        self.live = live
        self.domain = lookup(conn, name, uri)
        if self.domain is None:
            raise InputError("name: no domain %s on %s; define it first (for tenants: gpuvirt.tenancy.tenant_domain)" % (name, uri))
        self.host = host_info(conn)
        flags = libvirt.VIR_DOMAIN_XML_INACTIVE if self.domain.isPersistent() else 0
        self.before_xml = self.domain.XMLDesc(flags)
        self.root = parse_xml(self.before_xml)
        self.warnings = request.validate(self.host, self.root, strict_vcpus=not check_mode)
        self.before_text = to_text(self.root)
        self.after_root = _copy(self.root)
        self.config_changed = apply_pinning(self.after_root, request)
        self.after_text = to_text(self.after_root)
        self.active = bool(self.domain.isActive())
        self.live_changes = self._live_changes() if (live and self.active) else []
        self.restart_required = False
        if self.active and self.config_changed:
            old, new = read_pinning(self.root), read_pinning(self.after_root)
            if old["hugepages"] != new["hugepages"]:
                self.restart_required = True
                self.warnings.append("hugepage backing of running domain %s applies at its next start" % name)
            if live and old["memory_mode"] not in (None, new["memory_mode"]):
                self.restart_required = True
                self.warnings.append("numatune mode of running domain %s applies at its next start" % name)
            if not live:
                self.restart_required = True

    @property
    def changed(self):
        return self.config_changed or bool(self.live_changes)

    def _live_changes(self):
        changes = []
        if self.request.vcpu_pins:
            info = self.domain.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)
            for index, cpus in sorted(self.request.vcpu_pins.items()):
                now = _from_map(info[index]) if index < len(info) else None
                if now is None:
                    continue
                if now != cpus:
                    changes.append(("vcpu", index, now, cpus))
        if self.request.emulator_cpus is not None:
            now = _from_map(self.domain.emulatorPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE))
            if now != self.request.emulator_cpus:
                changes.append(("emulator", None, now, self.request.emulator_cpus))
        if self.request.nodeset is not None:
            params = self.domain.numaParameters(libvirt.VIR_DOMAIN_AFFECT_LIVE)
            now = parse_cpuset(params.get("numa_nodeset") or "")
            if now != self.request.nodeset:
                changes.append(("nodeset", None, now, self.request.nodeset))
        return changes

    def diff(self):
        diff = [{"before_header": "%s (persistent XML)" % self.name, "after_header": "%s (persistent XML)" % self.name,
                 "before": self.before_text, "after": self.after_text}]
        if self.live_changes:
            lines_before, lines_after = [], []
            for kind, index, now, want in self.live_changes:
                label = "vcpu %d" % index if kind == "vcpu" else kind
                lines_before.append("%s: %s\n" % (label, format_cpuset(now)))
                lines_after.append("%s: %s\n" % (label, format_cpuset(want)))
            diff.append({"before_header": "%s (running)" % self.name, "after_header": "%s (running)" % self.name,
                         "before": "".join(lines_before), "after": "".join(lines_after)})
        return diff

    def apply(self):
        if self.config_changed:
            try:
                self.conn.defineXML(self.after_text)
            except libvirt.libvirtError as exc:
                raise StateError("libvirt refused the new definition of %s: %s" % (self.name, exc)) from None
        length = self.host["map_length"]
        for kind, index, _now, want in self.live_changes:
            try:
                # the domain is running: AFFECT_CURRENT is its live state
                if kind == "vcpu":
                    self.domain.pinVcpuFlags(index, _cpumap(want, length), libvirt.VIR_DOMAIN_AFFECT_CURRENT)
                elif kind == "emulator":
                    self.domain.pinEmulator(_cpumap(want, length), libvirt.VIR_DOMAIN_AFFECT_CURRENT)
                else:
                    self.domain.setNumaParameters({"numa_nodeset": format_cpuset(want)}, libvirt.VIR_DOMAIN_AFFECT_LIVE)
            except libvirt.libvirtError as exc:
                raise StateError("live %s pinning of %s failed: %s (the persistent definition is updated)" % (kind, self.name, exc)) from None

    def result(self):
        state = read_pinning(self.after_root)
        return {
            "xml": self.after_text,
            "config_changed": self.config_changed,
            "live_changed": bool(self.live_changes),
            "active": self.active,
            "restart_required": self.restart_required,
            "vcpu_pins": dict((str(k), format_cpuset(v)) for k, v in sorted(state["vcpu_pins"].items())),
            "emulator_cpus": format_cpuset(state["emulator_cpus"]) if state["emulator_cpus"] is not None else None,
            "memory_mode": state["memory_mode"],
            "nodeset": format_cpuset(state["nodeset"]) if state["nodeset"] is not None else None,
        }


# --------------------------------------------------------------------------- tenant domains
def _whole(value, what):
    if isinstance(value, bool):
        raise InputError("%s: %r is not a whole number" % (what, value))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError("%s: %r is not a whole number" % (what, value)) from None


def vcpu_counts(root):
    """(current, maximum) vCPUs of a domain definition."""
    vcpu = root.find("vcpu")
    if vcpu is None or not (vcpu.text or "").strip():
        return (1, 1)
    maximum = int(vcpu.text)
    return (int(vcpu.get("current") or maximum), maximum)


def device_addresses(root):
    """PCI addresses of a definition's PCI hostdevs, then of its hostdev interfaces."""
    out = []
    for element in root.findall("devices/hostdev[@type='pci']") + root.findall("devices/interface[@type='hostdev']"):
        if _address_of(element):
            out.append(_address_of(element))
    return out


def _disk_targets(root):
    return dict((d.find("source").get("file"), d.find("target").get("dev")) for d in root.findall("devices/disk")
                if d.find("source") is not None and d.find("target") is not None and d.find("source").get("file"))


def _pci_address(addr, what):
    match = PCI_RE.match(str(addr or ""))
    if not match:
        raise InputError("%s: %r is not a PCI address like 0000:82:00.0" % (what, addr))
    domain, bus, slot, function = match.groups()
    return {"domain": "0x" + domain.lower(), "bus": "0x" + bus.lower(), "slot": "0x" + slot.lower(), "function": "0x" + function}


def _address_of(element):
    """The normalised 0000:bb:ss.f of a hostdev/interface ``<source><address>``."""
    address = element.find("source/address")
    if address is None:
        return None
    try:
        return "%04x:%02x:%02x.%x" % tuple(int(address.get(k, "0"), 16) for k in ("domain", "bus", "slot", "function"))
    except ValueError:
        return None


class TenantSpec:
    """The ``tenant_domain`` options, validated."""

    def __init__(self, params):
        self.name = params["name"]
        self.domain_type = params["domain_type"]
        self.vcpus = params["vcpus"]
        if not self.vcpus or self.vcpus < 1:
            raise InputError("vcpus: must be at least 1")
        self.max_vcpus = params.get("max_vcpus") or self.vcpus
        if self.max_vcpus < self.vcpus:
            raise InputError("max_vcpus: %d is below vcpus %d; raise max_vcpus (the most vCPUs the running domain may grow to) "
                             "or leave it out" % (self.max_vcpus, self.vcpus))
        self.qos = self._qos(params.get("qos"))
        self.memory_kib = params["memory_mb"] * 1024
        if params["memory_mb"] < 1:
            raise InputError("memory_mb: must be at least 1")
        self.hugepage_kib = None
        if params.get("hugepage_size"):
            try:
                size = hugepage_size_name(params["hugepage_size"], "hugepage_size")
            except PlacementInputError as exc:
                raise InputError(str(exc)) from None
            if size:
                self.hugepage_kib = HUGEPAGE_SIZES[size]
                # guest memory is whole hugepages
                self.memory_kib = -(-self.memory_kib // self.hugepage_kib) * self.hugepage_kib
        self.gpus = [self._addr(a, "gpus") for a in params.get("gpus") or []]
        self.vfs = [self._addr(a, "vfs") for a in params.get("vfs") or []]
        network = [self._addr(a, "network_vfs") for a in params.get("network_vfs") or []]
        stray = [a for a in network if a not in self.vfs]
        if stray:
            raise InputError("network_vfs: %s not listed in vfs" % ", ".join(stray))
        self.network_vfs = network
        all_devices = self.gpus + self.vfs
        if len(set(all_devices)) != len(all_devices):
            raise InputError("gpus/vfs: a PCI address is listed twice")
        self.mac = params.get("mac")
        if self.mac and not MAC_RE.match(self.mac):
            raise InputError("mac: %r is not a MAC address like 52:54:00:12:34:56" % self.mac)
        self.vlan = params.get("vlan")
        if self.vlan is not None and not 1 <= int(self.vlan) <= 4094:
            raise InputError("vlan: %r is not a VLAN id (1-4094)" % self.vlan)
        self.disks = []
        targets = set()
        for index, disk in enumerate(params.get("disks") or []):
            path = disk.get("path")
            if not path:
                raise InputError("disks[%d]: path is required" % index)
            target = disk.get("target") or "vd%s" % "abcdefghijklmnopqrstuvwxyz"[len(self.disks)]
            if target in targets:
                raise InputError("disks[%d]: target %s used twice" % (index, target))
            targets.add(target)
            self.disks.append({"path": path, "format": disk.get("format") or "qcow2", "target": target})
        self.machine = params.get("machine")
        self.arch = params.get("arch") or "x86_64"

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
        _pci_address(addr, what)
        return str(addr).lower()

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
        os_el = ET.SubElement(root, "os")
        type_attrs = {"arch": self.arch}
        if self.machine:
            type_attrs["machine"] = self.machine
        ET.SubElement(os_el, "type", type_attrs).text = "hvm"
        ET.SubElement(os_el, "boot", {"dev": "hd"})
        features = ET.SubElement(root, "features")
        ET.SubElement(features, "acpi")
        ET.SubElement(features, "apic")
        if self.domain_type == "kvm":
            ET.SubElement(root, "cpu", {"mode": "host-passthrough", "check": "none"})
        ET.SubElement(root, "clock", {"offset": "utc"})
        ET.SubElement(root, "on_poweroff").text = "destroy"
        ET.SubElement(root, "on_reboot").text = "restart"
        ET.SubElement(root, "on_crash").text = "destroy"
        devices = ET.SubElement(root, "devices")
        self._sync_devices(devices)
        ET.SubElement(devices, "serial", {"type": "pty"})
        ET.SubElement(devices, "console", {"type": "pty"})
        ET.SubElement(devices, "memballoon", {"model": "none"})
        return root

    def _hostdev(self, addr):
        element = ET.Element("hostdev", {"mode": "subsystem", "type": "pci", "managed": "no"})
        source = ET.SubElement(element, "source")
        ET.SubElement(source, "address", _pci_address(addr, "hostdev"))
        return element

    def _interface(self, addr):
        element = ET.Element("interface", {"type": "hostdev", "managed": "no"})
        if self.mac:
            ET.SubElement(element, "mac", {"address": self.mac.lower()})
        source = ET.SubElement(element, "source")
        ET.SubElement(source, "address", dict(_pci_address(addr, "interface"), type="pci"))
        if self.vlan is not None:
            vlan = ET.SubElement(element, "vlan")
            ET.SubElement(vlan, "tag", {"id": str(int(self.vlan))})
        return element

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
                have[_address_of(element)] = element
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
                nets[_address_of(element)] = element
        for addr, element in list(nets.items()):
            if addr not in self.network_vfs or not self._interface_matches(element):
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
        return changed

    def _interface_matches(self, element):
        mac = element.find("mac")
        if self.mac and (mac is None or mac.get("address", "").lower() != self.mac.lower()):
            return False
        tags = [t.get("id") for t in element.findall("vlan/tag")]
        want = [str(int(self.vlan))] if self.vlan is not None else []
        return tags == want

    def update(self, root):
        """Bring an existing definition to the spec; -> True when anything changed."""
        changed = False
        if root.get("type") != self.domain_type:
            root.set("type", self.domain_type)
            changed = True
        for tag in ("memory", "currentMemory"):
            element = root.find(tag)
            value = _kib(element.text, element.get("unit", "KiB")) if element is not None else None
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
            request = PinRequest(hugepages={"size": "2M" if self.hugepage_kib == 2048 else "1G"})
            pages = read_pinning(root)["hugepages"]
            if not pages or [p["size_kb"] for p in pages] != [self.hugepage_kib]:
                apply_pinning(root, request)
                changed = True
        devices = _child(root, "devices")
        if self._sync_devices(devices):
            changed = True
        return changed


class TenantDomain:
    """Define, update (persistently and, with ``live``, on the running domain), start or remove one
    tenant's domain; decide first (``__init__``), then act (``apply``)."""

    def __init__(self, conn, uri, spec, state, live=False, shutdown_timeout=120, force_off=False, clock=time.monotonic, sleep=time.sleep):
        self.conn = conn
        self.spec = spec
        self.state = state
        self.live = live
        self.shutdown_timeout = shutdown_timeout
        self.force_off = force_off
        self._clock, self._sleep = clock, sleep
        self.warnings = []
        self.restart_required = False
        self.live_changes = []
        self.released = []
        self.stopped = self.forced = False
        self.domain = lookup(conn, spec.name, uri)
        self.created = self.domain is None and state != "absent"
        self.active = bool(self.domain.isActive()) if self.domain is not None else False
        if self.domain is not None:
            flags = libvirt.VIR_DOMAIN_XML_INACTIVE if self.domain.isPersistent() else 0
            self.before_root = parse_xml(self.domain.XMLDesc(flags))
            self.before_text = to_text(self.before_root)
        else:
            self.before_root = None
            self.before_text = ""
        if state == "absent":
            self.after_root = None
            self.after_text = ""
            self.define = False
            self.start = False
            self.remove = self.domain is not None
            if self.remove:
                self.released = device_addresses(self.before_root)
                self.stopped = self.active
            return
        self.remove = False
        if self.domain is not None:
            self.after_root = _copy(self.before_root)
            self.define = spec.update(self.after_root)
        else:
            self.after_root = spec.build()
            self.define = True
        self.after_text = to_text(self.after_root)
        self.start = state == "running" and not self.active
        if self.active and self.define:
            self._running_domain_changes()

    # ------------------------------------------------------------------ decide
    def _running_domain_changes(self):
        """What of a new definition reaches the running domain: live where libvirt can (vCPU count
        within the domain's maximum, CPU shares/quota, disk I/O limits), otherwise restart_required."""
        before, after = self.before_root, self.after_root
        name = self.spec.name
        later = []
        if _kib(before.find("memory").text, before.find("memory").get("unit")) != self.spec.memory_kib:
            later.append("memory")
        if device_addresses(before) != device_addresses(after) or _disk_targets(before) != _disk_targets(after):
            later.append("devices")
        if before.get("type") != after.get("type"):
            later.append("domain type")
        if read_pinning(before)["hugepages"] != read_pinning(after)["hugepages"]:
            later.append("hugepage backing")
        want_count = self.spec.vcpus
        if vcpu_counts(before) != vcpu_counts(after):
            if not self.live:
                later.append("vCPU count")
            else:
                now = self.domain.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE)
                live_max = self.domain.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_VCPU_MAXIMUM)
                if now != want_count and want_count <= live_max:
                    self.live_changes.append(("vcpus", None, now, want_count))
                elif now != want_count:
                    later.append("vCPU count %d (the running domain's maximum is %d; max_vcpus raises it from the next start)"
                                 % (want_count, live_max))
        if self.spec.qos is not None:
            if not self.live:
                if [(t.tag, t.text) for t in before.findall("cputune/*") if t.tag in ("shares", "period", "quota")] != \
                        [(t.tag, t.text) for t in after.findall("cputune/*") if t.tag in ("shares", "period", "quota")]:
                    later.append("CPU QoS")
            else:
                try:
                    self._live_qos()
                except libvirt.libvirtError as exc:
                    later.append("CPU and disk QoS (its live values cannot be read: %s)" % exc)
        if later:
            self.restart_required = True
            self.warnings.append("running domain %s keeps its %s until it is restarted (the definition is updated; "
                                 "restart the tenant to apply)" % (name, ", ".join(later)))

    def _live_qos(self):
        params = self.domain.schedulerParametersFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        want = {}
        for key, _tag, param in CPU_QOS:
            value = self.spec.qos[key]
            if param not in params:
                continue
            if param == "vcpu_quota":
                capped = 0 < params[param] < UNLIMITED_QUOTA
                if value is None and capped:
                    want[param] = -1
                elif value is not None and params[param] != value:
                    want[param] = value
            elif param == "vcpu_period":
                # the period only matters with a quota; the kernel keeps its default otherwise
                if value is not None and params[param] != value:
                    want[param] = value
            elif value is not None and params[param] != value:
                want[param] = value
        if want:
            self.live_changes.append(("scheduler", None, dict((k, params[k]) for k in want), want))
        targets = _disk_targets(self.before_root)
        for disk in self.spec.disks:
            target = targets.get(disk["path"])
            if target is None:
                continue
            now = self.domain.blockIoTune(target, libvirt.VIR_DOMAIN_AFFECT_LIVE)
            wanted = dict((key, self.spec.qos["iotune"].get(key, 0)) for key in IOTUNE_KEYS)
            current = dict((key, int(now.get(key) or 0)) for key in IOTUNE_KEYS)
            if current != wanted:
                self.live_changes.append(("iotune", target, current, wanted))

    @property
    def changed(self):
        return self.define or self.start or self.remove or bool(self.live_changes)

    # ------------------------------------------------------------------ act
    def apply(self):
        if self.remove:
            self._remove()
            return
        if self.define:
            try:
                self.domain = self.conn.defineXML(self.after_text)
            except libvirt.libvirtError as exc:
                raise StateError("libvirt refused the definition of %s: %s" % (self.spec.name, exc)) from None
        for kind, target, _now, want in self.live_changes:
            try:
                if kind == "vcpus":
                    self.domain.setVcpusFlags(want, libvirt.VIR_DOMAIN_AFFECT_LIVE)
                elif kind == "scheduler":
                    self.domain.setSchedulerParametersFlags(want, libvirt.VIR_DOMAIN_AFFECT_LIVE)
                else:
                    self.domain.setBlockIoTune(target, want, libvirt.VIR_DOMAIN_AFFECT_LIVE)
            except libvirt.libvirtError as exc:
                # the definition is already updated: say what the running domain did not take
                self.restart_required = True
                self.warnings.append("running domain %s did not take its new %s live (%s); it applies when the tenant is "
                                     "restarted" % (self.spec.name, kind, exc))
        if self.start:
            try:
                self.domain.create()
            except libvirt.libvirtError as exc:
                raise StateError("starting %s failed: %s" % (self.spec.name, exc)) from None

    def _remove(self):
        name = self.spec.name
        try:
            if self.domain.isActive():
                self.domain.shutdown()
                deadline = self._clock() + self.shutdown_timeout
                while self.domain.isActive() and self._clock() < deadline:
                    self._sleep(1)
                if self.domain.isActive():
                    if not self.force_off:
                        raise StateError("%s did not shut down within %ss (its guest did not act on the ACPI power button); nothing "
                                         "was removed. Shut it down from inside, raise shutdown_timeout, or allow a forced power-off "
                                         "(force_off)" % (name, self.shutdown_timeout))
                    self.domain.destroy()
                    self.forced = True
            if self.domain.isPersistent():
                # a managed save image and snapshot metadata would otherwise block the undefine;
                # the NVRAM file (UEFI guests) belongs to the tenant and goes with it
                flags = libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
                if self.before_root.find("os/nvram") is not None:
                    flags |= libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
                self.domain.undefineFlags(flags)
        except libvirt.libvirtError as exc:
            raise StateError("removing %s failed: %s" % (name, exc)) from None

    def diff(self):
        diff = [{"before_header": "%s (persistent XML)" % self.spec.name, "after_header": "%s (persistent XML)" % self.spec.name,
                 "before": self.before_text, "after": self.after_text}]
        if self.live_changes:
            before, after = [], []
            for kind, target, now, want in self.live_changes:
                label = kind if target is None else "%s %s" % (kind, target)
                before.append("%s: %s\n" % (label, now))
                after.append("%s: %s\n" % (label, want))
            diff.append({"before_header": "%s (running)" % self.spec.name, "after_header": "%s (running)" % self.spec.name,
                         "before": "".join(before), "after": "".join(after)})
        return diff

    def result(self):
        return {"changed": self.changed, "xml": self.after_text, "created": self.created, "defined": self.define,
                "started": self.start, "removed": self.remove, "stopped": self.stopped, "forced_off": self.forced,
                "released_devices": self.released, "live_changed": bool(self.live_changes),
                "restart_required": self.restart_required, "restart_reasons": list(self.warnings)}


def read_assignment(root):
    """What a domain definition holds, in the shape the planner's ``existing`` takes."""
    pinning = read_pinning(root)
    hostdevs = device_addresses(root)
    nodeset = pinning["nodeset"]
    vcpu = root.find("vcpu")
    memory = root.find("memory")
    pages = pinning["hugepages"]
    size = None
    if pages and pages[0]["size_kb"] in HUGEPAGE_SIZES.values():
        size = [name for name, kib in HUGEPAGE_SIZES.items() if kib == pages[0]["size_kb"]][0]
    return {
        "hostdevs": hostdevs,
        "vcpu_pins": dict((str(k), format_cpuset(v)) for k, v in sorted(pinning["vcpu_pins"].items())),
        "emulator_cpus": format_cpuset(pinning["emulator_cpus"]) if pinning["emulator_cpus"] is not None else None,
        "memory_mode": pinning["memory_mode"],
        "nodeset": format_cpuset(nodeset) if nodeset is not None else None,
        "numa_node": nodeset[0] if nodeset is not None and len(nodeset) == 1 else None,
        "hugepages": {"size": size, "node": nodeset[0] if nodeset is not None and len(nodeset) == 1 else None} if pages else None,
        "vcpus": int(vcpu.text) if vcpu is not None and (vcpu.text or "").strip() else None,
        "memory_mb": _kib(memory.text, memory.get("unit", "KiB")) // 1024 if memory is not None else None,
    }


def domain_assignments(conn, uri, names):
    """name -> read_assignment(...) plus ``active``, for the names that are defined."""
    found = {}
    for name in names:
        domain = lookup(conn, name, uri)
        if domain is None:
            continue
        flags = libvirt.VIR_DOMAIN_XML_INACTIVE if domain.isPersistent() else 0
        assignment = read_assignment(parse_xml(domain.XMLDesc(flags)))
        assignment["active"] = bool(domain.isActive())
        found[name] = assignment
    return found
