# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a domain definition holds, read: the host's CPUs and page sizes (from libvirt's
capabilities or the host model), the firmware, the OVMF 64-bit aperture, the vCPU counts, disks
and NICs, the pinning and NUMA memory tuning, the QoS, and the assignment the planner's
``existing`` takes. Pure XML, no libvirt."""

from __future__ import absolute_import, division, print_function

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_cells import read_cells
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_addresses
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import CPU_QOS, QEMU_ARG, QEMU_COMMANDLINE, to_kib
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, name_of_kb

__metaclass__ = type

# The fw_cfg file OVMF reads for the size of its 64-bit PCI aperture, in MiB (edk2
# OvmfPkg/Library/PlatformInitLib/MemDetect.c, PlatformGetFirstNonAddress).
MMIO64_FW_CFG = "opt/ovmf/X-PciMmio64Mb"


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


def mmio_fw_cfg_value(arg):
    """N of a ``-fw_cfg`` argument ``[name=]opt/ovmf/X-PciMmio64Mb,string=N``; None for
    another argument; -1 for that file with a value that is not a number."""
    fields = dict(part.split("=", 1) if "=" in part else ("name", part) for part in (arg or "").split(","))
    if fields.get("name") != MMIO64_FW_CFG:
        return None
    try:
        return int(fields.get("string", "").strip())
    except ValueError:
        return -1


def mmio_fw_cfg_args(root):
    """The ``<qemu:arg>`` pairs (``-fw_cfg``, its value) that set the OVMF aperture."""
    pairs = []
    commandline = root.find(QEMU_COMMANDLINE)
    args = list(commandline.findall(QEMU_ARG)) if commandline is not None else []
    for flag, value in zip(args, args[1:]):
        if flag.get("value") == "-fw_cfg" and mmio_fw_cfg_value(value.get("value")) is not None:
            pairs.append((flag, value))
    return pairs


def mmio_window_of(root):
    """The OVMF 64-bit aperture (MiB) a definition asks for through fw_cfg, or None."""
    for _flag, value in mmio_fw_cfg_args(root):
        found = mmio_fw_cfg_value(value.get("value"))
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


def read_pinning(root):
    """The managed pinning state of a domain XML tree."""
    pins = {}
    emulator = None
    cputune = root.find("cputune")
    if cputune is not None:
        for pin in cputune.findall("vcpupin"):
            pins[int(pin.get("vcpu"))] = parse_cpulist(pin.get("cpuset"), "cpuset")
        emu = cputune.find("emulatorpin")
        if emu is not None:
            emulator = parse_cpulist(emu.get("cpuset"), "cpuset")
    mode = nodeset = None
    memory = root.find("numatune/memory")
    if memory is not None:
        mode = memory.get("mode", "strict")
        nodeset = parse_cpulist(memory.get("nodeset"), "cpuset") if memory.get("nodeset") else None
    pages = None
    hugepages = root.find("memoryBacking/hugepages")
    if hugepages is not None:
        pages = []
        for page in hugepages.findall("page"):
            pages.append({"size_kb": to_kib(page.get("size"), page.get("unit", "KiB")),
                          "nodeset": parse_cpulist(page.get("nodeset"), "cpuset") if page.get("nodeset") else None})
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
    cells = read_cells(root)
    return {
        "hostdevs": device_addresses(root),
        "vcpu_pins": fields["vcpu_pins"],
        "emulator_cpus": fields["emulator_cpus"],
        "memory_mode": fields["memory_mode"],
        "nodeset": fields["nodeset"],
        "numa_node": node,
        # a tenant spanning nodes: its guest cells, each bound to its host node (domain_cells)
        "cells": cells if len(cells) > 1 else None,
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
