# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The emulated PCIe switches of a tenant: the GPUs and VFs the host has under one PCIe switch
(the ``pcie_switches`` option; the tenants stage gives each tenant's from the host model,
planning/pcie_switches) sit under one emulated switch in the guest, so that ``nvidia-smi topo
-m`` and NCCL inside read them as PIX, as on the host, not as PHB (each on its own root port).

libvirt formatdomain, "Controllers" (PCI controllers): a ``pcie-switch-upstream-port`` (QEMU
``x3130-upstream``) plugs into a ``pcie-root-port`` (or a downstream port), a
``pcie-switch-downstream-port`` (``xio3130-downstream``) only into an upstream port, up to 32 of
them, and a device into a downstream port; a ``pcie-expander-bus`` takes only root ports, so on
a tenant with guest NUMA cells (domain_cells) the switch's root port is on the cell's expander
and the devices keep their cell's NUMA node. Each controller is placed by its own ``<address
type='pci' bus=...>`` on its parent's ``index``; libvirt adds the model names, chassis and port
numbers. The layout needs a PCIe machine (q35). Pure XML."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_elements
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address

__metaclass__ = type

ROOT_PORT = "pcie-root-port"
UPSTREAM = "pcie-switch-upstream-port"
DOWNSTREAM = "pcie-switch-downstream-port"
# the downstream ports one upstream port takes (slots 0-31 of its bus)
MAX_PORTS = 32


def check_switches(groups, devices, machine):
    """The ``pcie_switches`` option -> [[address]]: each entry two or more of the tenant's GPUs and
    VFs (``devices``), each device in one entry at most, on a q35 machine."""
    if not groups:
        return []
    if not isinstance(groups, list):
        raise InputError("pcie_switches: expected a list of device lists (the GPUs and VFs of each host switch)")
    out, seen = [], set()
    for index, group in enumerate(groups):
        what = "pcie_switches[%d]" % index
        if not isinstance(group, list):
            raise InputError("%s: expected a list of PCI addresses of the tenant's GPUs and VFs" % what)
        addresses = []
        for item in group:
            address = normalize_address(str(item))
            if address not in devices:
                raise InputError("%s: %s is not one of the tenant's GPUs or VFs (%s); list only those"
                                 % (what, item, ", ".join(devices) or "none"))
            if address in seen:
                raise InputError("%s: %s is in more than one switch; give each device one switch" % (what, address))
            seen.add(address)
            addresses.append(address)
        if not 2 <= len(addresses) <= MAX_PORTS:
            raise InputError("%s: a switch holds 2 to %d devices (got %d); leave a lone device out, it gets its own root port"
                             % (what, MAX_PORTS, len(addresses)))
        out.append(addresses)
    if "q35" not in (machine or ""):
        raise InputError("pcie_switches: an emulated PCIe switch needs a q35 machine (machine: %s); set machine q35 or leave "
                         "pcie_switches out" % (machine or "the hypervisor's default"))
    return out


def check_switch_cells(groups, cells):
    """Each switch's devices in one guest cell (domain_cells.check_cells): the switch sits on that
    cell's expander."""
    for index, group in enumerate(groups):
        holders = set(cell["id"] for cell in cells for address in group if address in cell["devices"])
        if len(holders) > 1:
            raise InputError("pcie_switches[%d]: %s are in different numa_cells (%s); a switch's devices go in one cell"
                             % (index, ", ".join(group), ", ".join(str(cell) for cell in sorted(holders))))


def index_of(element):
    try:
        return int(element.get("index"))
    except (TypeError, ValueError):
        return None


def bus_of(element):
    """The guest bus number of an element's own ``<address type='pci'>``, or None."""
    address = element.find("address") if element is not None else None
    if address is None or address.get("type") not in (None, "pci") or address.get("bus") is None:
        return None
    try:
        return int(address.get("bus"), 0)
    except ValueError:
        return None


def upstream_of(element, by_index):
    """The upstream port of the switch a device sits under (on one of its downstream ports), or None."""
    port = by_index.get(bus_of(element))
    if port is None or port.get("model") != DOWNSTREAM:
        return None
    upstream = by_index.get(bus_of(port))
    return upstream if upstream is not None and upstream.get("model") == UPSTREAM else None


def root_port_of(element, by_index):
    """The root port a device sits under: its own, or its switch's; None when on neither."""
    upstream = upstream_of(element, by_index)
    port = by_index.get(bus_of(upstream if upstream is not None else element))
    return port if port is not None and port.get("model") == ROOT_PORT else None


def switches_right(groups, elements, by_index):
    """Whether each group's devices share one switch (each group its own, on a root port) and no
    other device of ``elements`` sits under a switch."""
    grouped = set(address for group in groups for address in group)
    for address, element in elements.items():
        if address not in grouped and upstream_of(element, by_index) is not None:
            return False
    used = set()
    for group in groups:
        upstreams = set(id(upstream_of(elements.get(address), by_index)) if address in elements else None for address in group)
        first = upstream_of(elements.get(group[0]), by_index) if group[0] in elements else None
        if len(upstreams) != 1 or first is None or id(first) in used or root_port_of(elements[group[0]], by_index) is None:
            return False
        used.add(id(first))
    return True


def held_switches(devices, elements):
    """The controllers of the switches that hold any device of ``elements``, and the root ports they
    sit on: what a rebuild removes (a switch of other devices is left as it is)."""
    by_index = dict((index_of(c), c) for c in devices.findall("controller[@type='pci']"))
    upstreams = []
    for element in elements.values():
        upstream = upstream_of(element, by_index)
        if upstream is not None and upstream not in upstreams:
            upstreams.append(upstream)
    out = []
    for upstream in upstreams:
        port = by_index.get(bus_of(upstream))
        if port is not None and port.get("model") == ROOT_PORT:
            out.append(port)
        out.append(upstream)
        out.extend(c for c in by_index.values() if c.get("model") == DOWNSTREAM and bus_of(c) == index_of(upstream))
    return out


def controllers_under(controllers, gone):
    """The controllers on the buses of ``gone`` (indices), and on theirs, down the tree."""
    out = []
    found = True
    while found:
        found = False
        for controller in controllers:
            if controller not in out and bus_of(controller) in gone:
                out.append(controller)
                gone.add(index_of(controller))
                found = True
    return out


def add_switch(devices, position, index, group, elements, parent_bus=None, slot=0):
    """A root port (on bus ``parent_bus``, slot ``slot``; libvirt places it on pcie-root when None),
    an upstream port on it and one downstream port per device of ``group``, each device on its
    port, the controllers inserted at ``position`` of ``devices`` with indices from ``index``.
    -> (next position, next index)."""
    port = ET.Element("controller", {"type": "pci", "index": str(index), "model": ROOT_PORT})
    if parent_bus is not None:
        _address(port, parent_bus, slot)
    upstream = ET.Element("controller", {"type": "pci", "index": str(index + 1), "model": UPSTREAM})
    _address(upstream, index, 0)
    added = [port, upstream]
    for number, address in enumerate(group):
        downstream = ET.Element("controller", {"type": "pci", "index": str(index + 2 + number), "model": DOWNSTREAM})
        _address(downstream, index + 1, number)
        added.append(downstream)
        element = elements[address]
        old = element.find("address")
        if old is not None:
            element.remove(old)
        _address(element, index + 2 + number, 0)
    for controller in added:
        devices.insert(position, controller)
        position += 1
    return position, index + len(added)


def _address(element, bus, slot):
    ET.SubElement(element, "address", {"type": "pci", "domain": "0x0000", "bus": "0x%02x" % bus, "slot": "0x%02x" % slot,
                                       "function": "0x0"})


def controller_position(devices):
    """Where new controllers go: after the disks and the other controllers (libvirt's order)."""
    position = 0
    for number, child in enumerate(devices):
        if child.tag in ("emulator", "disk", "controller"):
            position = number + 1
    return position


def sync_switches(root, groups, elements):
    """The switches of a tenant without guest cells (on pcie-root; a tenant with cells has its
    switches on its expanders, domain_cells): each group of ``groups`` (check_switches) under
    one switch, no other device of ``elements`` (host address -> its hostdev or interface)
    under one. -> True when anything changed."""
    devices = root.find("devices")
    if devices is None:
        return False
    by_index = dict((index_of(c), c) for c in devices.findall("controller[@type='pci']"))
    if switches_right(groups, elements, by_index):
        return False
    gone = held_switches(devices, elements)
    indices = set(index_of(c) for c in gone)
    for controller in gone:
        devices.remove(controller)
    for element in elements.values():
        if bus_of(element) in indices and element.find("address") is not None:
            element.remove(element.find("address"))
    kept = [i for i in (index_of(c) for c in devices.findall("controller[@type='pci']")) if i is not None]
    index = max(kept + [0]) + 1
    position = controller_position(devices)
    for group in groups:
        position, index = add_switch(devices, position, index, group, elements)
    return True


def switch_layout(root):
    """The devices (host addresses) that share an emulated switch, per switch: what a running
    domain keeps until it is restarted."""
    by_index = dict((index_of(c), c) for c in root.findall("devices/controller[@type='pci']"))
    shared = {}
    for address, element in sorted(device_elements(root).items()):
        upstream = upstream_of(element, by_index)
        if upstream is not None:
            shared.setdefault(index_of(upstream), []).append(address)
    return sorted(shared.values())
