# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest NUMA cells of a tenant: one per host node of a tenant spanning nodes (``numa: spread``,
placement_spread), one for a tenant on one node that has GPUs or VFs (planning/tenant_plan
``numa_cells``: the one cell is the degenerate case of N). The ``numa_cells`` option checked, and a
definition brought to it. Per cell (libvirt formatdomain, "CPU model and topology" / "NUMA Node
Tuning" / "Memory Backing" / "Controllers"):

- ``<cpu><numa><cell id= cpus= memory= unit='KiB'/>``: its vCPUs and memory;
- ``<numatune><memnode cellid= mode=THE DOMAIN'S MEMORY MODE nodeset=HOST NODE/>``: its memory from
  its own host node (the vCPUs' pins, on that node's CPUs, are the pins' own, domain_pinning);
- ``<memoryBacking><hugepages><page nodeset=ALL CELLS/>``: hugepages in every cell;
- one ``pcie-expander-bus`` controller (QEMU ``pxb-pcie``) with ``<target busNr=N><node>CELL</node>``
  per cell that holds devices, and under it one ``pcie-root-port`` per device, the device's guest
  address on that port: the guest sees each GPU and VF on its cell's PCIe root bus, so its driver
  reads the right locality (libvirt's tests/qemuxml2argvdata/pcie-expander-bus.xml has this layout:
  the expander at index 1 with busNr 254, a root port on bus 0x01). A bus number range is the
  expander's busNr up to the next expander's: each takes one for itself and one per root port,
  counted down from 255. The expanders need a PCIe machine (q35).

Only these elements are managed: libvirt's own additions (the controllers' model names, chassis
and ports, the expanders' slots on pcie-root) are kept and never count as a change. Pure XML.
"""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_elements
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import find_or_add, to_kib
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_switch import (
    add_switch, bus_of, controller_position, controllers_under, index_of, root_port_of, switches_right)

__metaclass__ = type

EXPANDER = "pcie-expander-bus"
ROOT_PORT = "pcie-root-port"
# the highest PCI bus number: the expanders' ranges are counted down from it
TOP_BUS = 255


def check_cells(cells, max_vcpus, memory_kib, devices, machine):
    """The ``numa_cells`` option -> [{id, node, vcpus: [int], memory_kib, devices: [address]}], or []
    for none. Every vCPU of the definition in one cell, the cells' memory the domain's, every
    GPU and VF in one cell, on a q35 machine when a cell holds devices."""
    if not cells:
        return []
    if not isinstance(cells, list):
        raise InputError("numa_cells: expected a list of cells ({node, vcpus, memory_kib, devices})")
    out = []
    for index, cell in enumerate(cells):
        what = "numa_cells[%d]" % index
        if not isinstance(cell, dict):
            raise InputError("%s: expected a dict with node, vcpus, memory_kib and devices" % what)
        try:
            node = int(cell.get("node"))
            memory = int(cell.get("memory_kib"))
        except (TypeError, ValueError):
            raise InputError("%s: node and memory_kib must be whole numbers (%r, %r)" % (what, cell.get("node"), cell.get("memory_kib")))
        vcpus = parse_cpulist(cell.get("vcpus"), what + ".vcpus")
        if not vcpus or memory <= 0 or node < 0:
            raise InputError("%s: a cell needs vCPUs, memory and a host node (got vcpus %r, memory_kib %d, node %d)"
                             % (what, cell.get("vcpus"), memory, node))
        out.append({"id": index, "node": node, "vcpus": vcpus, "memory_kib": memory,
                    "devices": [str(address).lower() for address in cell.get("devices") or []]})
    listed = sorted(vcpu for cell in out for vcpu in cell["vcpus"])
    if listed != list(range(max_vcpus)):
        raise InputError("numa_cells: the cells' vCPUs (%s) must be each of the domain's vCPUs 0-%d once"
                         % (format_cpulist(listed), max_vcpus - 1))
    if sum(cell["memory_kib"] for cell in out) != memory_kib:
        raise InputError("numa_cells: the cells' memory (%d KiB) must add up to the domain's (%d KiB)"
                         % (sum(cell["memory_kib"] for cell in out), memory_kib))
    placed = [address for cell in out for address in cell["devices"]]
    if sorted(placed) != sorted(devices):
        raise InputError("numa_cells: each GPU and VF (%s) goes in one cell's devices, and only those (cells list %s)"
                         % (", ".join(sorted(devices)) or "none", ", ".join(sorted(placed)) or "none"))
    if placed and "q35" not in (machine or ""):
        raise InputError("numa_cells: devices on a guest cell sit under a pcie-expander-bus, which needs a q35 machine "
                         "(machine: %s); set machine q35" % (machine or "the hypervisor's default"))
    return out


def check_cells_nodeset(cells, nodeset, name):
    """The cells (check_cells) against the domain's ``nodeset`` (PinRequest's host nodes, None when
    not given): when given, it is the cells' host nodes. ``name``: the domain, named in the error."""
    if not cells or nodeset is None:
        return
    nodes = sorted(set(cell["node"] for cell in cells))
    if sorted(set(nodeset)) != nodes:
        raise InputError("nodeset: %s contradicts the host nodes of %s's numa_cells (%s); give nodeset %s, the cells' nodes "
                         "(each cell's memory comes from its own node), or leave it out"
                         % (format_cpulist(nodeset), name, format_cpulist(nodes), format_cpulist(nodes)))


def check_cells_host(cells, host, name):
    """The cells (check_cells) against the host (domain_readers.host_cpus: its NUMA ``cells``): each
    on a node the host has. ``name``: the domain, named in the error."""
    for cell in cells:
        if cell["node"] not in host["cells"]:
            raise InputError("numa_cells[%d]: host NUMA node %d of %s is not a node of this host (nodes %s); give each cell one of "
                             "them (the cells of the plan's placement for this host)"
                             % (cell["id"], cell["node"], name, format_cpulist(sorted(host["cells"])) or "none"))


def sync_cells(root, cells, hugepage_kib, elements, switches=(), mode="strict"):
    """Bring ``root`` to ``cells`` (check_cells). Without cells, a definition whose cells this
    manages (each bound to one host node by a ``memnode``, or devices under an expander) loses
    them, their expanders and ports; any other is left as it is. ``elements``: host PCI address
    -> its ``hostdev`` or ``interface`` element (domain_devices.device_elements); ``switches``:
    the groups of devices that share an emulated switch (domain_switch), its root port on their
    cell's expander; ``mode``: each ``memnode``'s, the domain's memory mode (libvirt refuses a
    ``restrictive`` memory with any other memnode mode). -> True when anything changed."""
    if not cells and not read_cells(root) and root.find("devices/controller[@model='%s']" % EXPANDER) is None:
        return False
    changed = _sync_numa(root, cells)
    changed = _sync_memnodes(root, cells, mode) or changed
    if hugepage_kib:
        changed = _sync_page_nodeset(root, cells) or changed
    return _sync_expanders(root, cells, elements, switches if cells else ()) or changed


def _sync_numa(root, cells):
    cpu = root.find("cpu")
    numa = cpu.find("numa") if cpu is not None else None
    have = []
    if numa is not None:
        for cell in numa.findall("cell"):
            try:
                have.append((cell.get("id"), parse_cpulist(cell.get("cpus"), "cell cpus"), to_kib(cell.get("memory"), cell.get("unit", "KiB"))))
            except (InputError, ValueError):
                have.append(None)
    want = [(str(cell["id"]), cell["vcpus"], cell["memory_kib"]) for cell in cells]
    if have == want:
        return False
    if numa is not None:
        cpu.remove(numa)
    if cells:
        if cpu is None:
            cpu = find_or_add(root, "cpu", after=("features", "os", "vcpu"))
        numa = ET.SubElement(cpu, "numa")
        for cell in cells:
            ET.SubElement(numa, "cell", {"id": str(cell["id"]), "cpus": format_cpulist(cell["vcpus"]),
                                         "memory": str(cell["memory_kib"]), "unit": "KiB"})
    return True


def _sync_memnodes(root, cells, mode="strict"):
    numatune = root.find("numatune")
    have = sorted((m.get("cellid"), m.get("mode"), m.get("nodeset")) for m in (numatune.findall("memnode") if numatune is not None else []))
    want = sorted((str(cell["id"]), mode, str(cell["node"])) for cell in cells)
    if have == want:
        return False
    if numatune is not None:
        for memnode in numatune.findall("memnode"):
            numatune.remove(memnode)
    if cells:
        numatune = find_or_add(root, "numatune", after=("cputune", "vcpu", "vcpus", "iothreads"))
        for cell in cells:
            ET.SubElement(numatune, "memnode", {"cellid": str(cell["id"]), "mode": mode, "nodeset": str(cell["node"])})
    elif numatune is not None and len(numatune) == 0:
        root.remove(numatune)
    return True


def _sync_page_nodeset(root, cells):
    """The hugepage backing in every cell (``nodeset`` the guest cells), or, without cells, none named."""
    changed = False
    want = format_cpulist([cell["id"] for cell in cells]) if cells else None
    for page in root.findall("memoryBacking/hugepages/page"):
        have = page.get("nodeset")
        if have is not None:
            try:
                have = format_cpulist(parse_cpulist(have, "page nodeset"))
            except InputError:
                pass
        if have != want:
            if want is None:
                del page.attrib["nodeset"]
            else:
                page.set("nodeset", want)
            changed = True
    return changed


def _expander_node(controller):
    node = controller.find("target/node")
    try:
        return int(node.text) if node is not None else None
    except (TypeError, ValueError):
        return None


def _sync_expanders(root, cells, elements, switches=()):
    devices = root.find("devices")
    controllers = devices.findall("controller[@type='pci']") if devices is not None else []
    by_index = dict((index_of(c), c) for c in controllers)
    expanders = [c for c in controllers if c.get("model") == EXPANDER]
    # every wanted device on a root port (its own or its switch's) of the expander of its cell
    right = bool(cells) or not expanders
    for cell in cells:
        for address in cell["devices"]:
            element = elements.get(address)
            port = root_port_of(element, by_index) if element is not None else None
            expander = by_index.get(bus_of(port)) if port is not None else None
            if expander is None or expander.get("model") != EXPANDER or _expander_node(expander) != cell["id"]:
                right = False
    if cells and sorted(map(_expander_node, expanders)) != [cell["id"] for cell in cells if cell["devices"]]:
        right = False
    if cells and not switches_right(switches, elements, by_index):
        right = False
    if right:
        return False
    # rebuilt: the old expanders, their ports and switches and the addresses on them out, then one per cell
    gone = set(index_of(c) for c in expanders)
    ports = controllers_under([c for c in controllers if c not in expanders], gone)
    for controller in expanders + ports:
        devices.remove(controller)
    for element in list(elements.values()):
        address = element.find("address")
        if address is not None and bus_of(element) in gone:
            element.remove(address)
    kept = [i for i in (index_of(c) for c in controllers if c not in expanders and c not in ports) if i is not None]
    index = max(kept + [0]) + 1
    top = TOP_BUS + 1
    position = controller_position(devices)
    for cell in cells:
        if not cell["devices"]:
            continue
        units = _units(cell["devices"], switches)
        # a bus of its own, one per root port, and per switch one inside it and one per downstream port
        top -= 1 + sum(1 if len(unit) == 1 else len(unit) + 2 for unit in units)
        expander = ET.Element("controller", {"type": "pci", "index": str(index), "model": EXPANDER})
        target = ET.SubElement(expander, "target", {"busNr": str(top)})
        ET.SubElement(target, "node").text = str(cell["id"])
        devices.insert(position, expander)
        position += 1
        expander_index = index
        index += 1
        for slot, unit in enumerate(units):
            if len(unit) > 1:
                position, index = add_switch(devices, position, index, unit, elements, expander_index, slot)
                continue
            address = unit[0]
            port = ET.Element("controller", {"type": "pci", "index": str(index), "model": ROOT_PORT})
            ET.SubElement(port, "address", {"type": "pci", "domain": "0x0000", "bus": "0x%02x" % expander_index,
                                            "slot": "0x%02x" % slot, "function": "0x0"})
            devices.insert(position, port)
            position += 1
            element = elements[address]
            old = element.find("address")
            if old is not None:
                element.remove(old)
            ET.SubElement(element, "address", {"type": "pci", "domain": "0x0000", "bus": "0x%02x" % index, "slot": "0x00",
                                               "function": "0x0"})
            index += 1
    return True


def _units(addresses, switches):
    """A cell's devices (in order) as what each root port holds: a switch's devices, or one device."""
    units = []
    for address in addresses:
        group = next((g for g in switches if address in g), None)
        if group is None:
            units.append([address])
        elif address == next(a for a in group if a in addresses):
            units.append([a for a in group if a in addresses])
    return units


def read_cells(root):
    """The guest cells of a definition as the planner's ``existing`` reads them: [{id, node,
    vcpus, memory_kib}] with each cell's host node from its ``memnode``; [] without cells, or
    when a cell's memory is not bound to one host node."""
    memnodes = {}
    for memnode in root.findall("numatune/memnode"):
        try:
            nodes = parse_cpulist(memnode.get("nodeset"), "memnode nodeset")
        except InputError:
            return []
        if len(nodes) != 1:
            return []
        memnodes[memnode.get("cellid")] = nodes[0]
    out = []
    for position, cell in enumerate(root.findall("cpu/numa/cell")):
        cell_id = cell.get("id", str(position))
        if cell_id not in memnodes:
            return []
        try:
            vcpus = parse_cpulist(cell.get("cpus"), "cell cpus")
            memory = to_kib(cell.get("memory"), cell.get("unit", "KiB"))
        except (InputError, ValueError):
            return []
        out.append({"id": int(cell_id), "node": memnodes[cell_id], "vcpus": vcpus, "memory_kib": memory})
    return out


def memnode_modes(root):
    """Each cell's memory mode (its ``memnode``), by cell: what a running domain keeps until it is restarted."""
    return sorted((m.get("cellid"), m.get("mode")) for m in root.findall("numatune/memnode"))


def expander_layout(root):
    """Per guest device (host address), the guest cell of the expander its root port is on (None
    when it is on none): what a running domain keeps until it is restarted."""
    by_index = dict((index_of(c), c) for c in root.findall("devices/controller[@type='pci']"))
    out = {}
    for address, element in sorted(device_elements(root).items()):
        port = root_port_of(element, by_index)
        expander = by_index.get(bus_of(port)) if port is not None else None
        out[address] = _expander_node(expander) if expander is not None and expander.get("model") == EXPANDER else None
    return out
