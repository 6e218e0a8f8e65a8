# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A domain's vCPU and emulator pins, NUMA memory tuning and hugepage backing: the options
(``numa_pin``; ``tenant_domain``'s pins) checked against the host and the domain, and applied
to its definition. Pure XML, no libvirt."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import read_pinning, vcpu_counts
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import find_or_add
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, size_name

__metaclass__ = type

MEMORY_MODES = ("strict", "preferred", "interleave", "restrictive")


def check_page_size(host, size_kb, what):
    """Refuse hugepages of a size the host (:func:`host_cpus`) does not have."""
    if host["page_sizes_kb"] and size_kb not in host["page_sizes_kb"]:
        raise InputError("%s: %d KiB pages are not supported by this host (sizes %s KiB)"
                         % (what, size_kb, ", ".join(map(str, host["page_sizes_kb"]))))


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
                cpus = parse_cpulist(cpuset, "vcpu_pins[%d]" % index)
                if not cpus:
                    raise InputError("vcpu_pins[%d]: empty cpuset; give at least one host CPU" % index)
                self.vcpu_pins[index] = cpus
        self.emulator_cpus = None
        if emulator_cpus is not None and emulator_cpus != "":
            self.emulator_cpus = parse_cpulist(emulator_cpus, "emulator_cpus")
        if memory_mode not in MEMORY_MODES:
            raise InputError("memory_mode: %r is not one of %s" % (memory_mode, ", ".join(MEMORY_MODES)))
        self.memory_mode = memory_mode
        self.nodeset = parse_cpulist(nodeset, "nodeset") if nodeset not in (None, "") else None
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
                              "nodeset": parse_cpulist(guest_nodes, "hugepages.nodeset") if guest_nodes not in (None, "") else None}

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
        cputune = find_or_add(root, "cputune", after=("vcpu", "vcpus", "iothreads", "iothreadids"))
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
        numatune = find_or_add(root, "numatune", after=("cputune", "vcpu", "vcpus", "iothreads"))
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
        backing = find_or_add(root, "memoryBacking", after=("currentMemory", "memory", "maxMemory"))
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
