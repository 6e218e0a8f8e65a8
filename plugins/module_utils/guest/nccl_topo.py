# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL topology file of a tenant guest (``NCCL_TOPO_FILE``): the guest's GPUs and RDMA NICs by
their guest PCI addresses, with the GPU host's link speeds and widths and the host's distance
between them.

The format is NCCL's own (NVIDIA/nccl ``src/graph/xml.cc``, ``ncclTopoGetXmlFromFile`` and the
``ncclTopoXmlLoad*`` rules): ``<system version="1">`` holding ``<cpu numaid="N">``, each holding
``<pci>`` elements (a bridge, class ``0x060400``, may hold more ``<pci>``); a ``pci`` element names
its device by ``busid`` (``DDDD:BB:DD.F``, lower-case hex as NCCL prints bus IDs) and carries
``class``, ``link_speed`` (one of the strings of NCCL's ``kvDictPciGen``, ``src/graph/topo.cc``)
and ``link_width``. NCCL fills in what the file leaves out from the guest itself
(``ncclTopoGetXmlFromSys``, ``ncclTopoGetXmlFromCpu``: the CPU's affinity, arch and vendor, the
devices' vendor and device IDs, the ``gpu``, ``nic`` and ``net`` elements), and never overrides
an attribute the file sets but ``class``, which it reads from sysfs where the device exists.
This is the layout of the topology files published for VMs (Azure's ``ndv4-topo.xml``,
``ndv5-topo.xml``): each GPU and NIC a leaf ``pci`` under the bridge it shares on the host.

Inside a VM NCCL reads the emulated PCIe tree: link speeds of emulated ports, and a distance
between GPU and NIC that need not be the host's. The file gives NCCL the host's facts, which
the tenants stage reads on the GPU host (``planning.pci_links``) and passes per guest.

A link the host cannot give (no ``max_link_speed``/``max_link_width`` in its host model, or the
tenant's GPUs, or its VFs' PFs, on different links, since the guest cannot tell which of its bus IDs
is which host device) is left out of the element: NCCL fills a ``pci`` element without
``link_speed``/``link_width`` itself (NVIDIA/nccl 5067397c2676d5aed50042fc39e5c8ee96eb0027,
``src/graph/xml.cc`` ``ncclTopoGetXmlFromSys``): a GPU that NVML finds from NVML's current PCIe link
generation and width (16.0 GT/s x16 where NVML gives none), any other device from sysfs in the guest,
the lower of its ``max_link_speed``/``max_link_width`` and its parent port's (``../max_link_speed``),
and a bus ID with no sysfs path (a bridge only the file names) gets ``""``, which ``ncclTopoAddPci``
(``src/graph/topo.cc``) reads as x16 at kvDictPciGen's fallback, 8 GT/s. So the file leaves a link out
only on a device or bridge the guest has, where NCCL then reads what it would read without a file, and
keeps the facts that are known: the devices by guest bus ID, their NUMA node and the host's distance.

The host's distance is kept in the file's tree as NCCL computes it (NVIDIA/nccl
5067397c2676d5aed50042fc39e5c8ee96eb0027): ``ncclTopoAddPci`` (``src/graph/topo.cc``) makes a node of a bridge
``pci`` element (class 0x060400, type PCI) and of a GPU's or NIC's, each joined to its parent element's node by a
LINK_PCI link; ``ncclTopoSetPaths`` (``src/graph/paths.cc``) types each hop of a path LINK_PCI (PATH_PIX), PATH_PXB
where both ends are PCI nodes, PATH_PHB where one is a CPU, and a path takes its worst hop. So GPU -> bridge -> NIC
reads PIX, and GPU -> bridge -> bridge -> bridge -> NIC (the GPUs' bridge below a shared one holding the NICs'
bridge) reads PXB: the file of a PXB tenant names the host's three switch levels as bridges only it has
(``ffff:ff:NN.0``, as the published files do), each with its host switch's link, since the guest has one emulated
switch (read as PIX).

Pure logic with reads through a Sysfs reader; nothing here writes.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import is_address, nearest_shared_bridge, upstream_bridges

__metaclass__ = type

PCI_DEVICES = "/sys/bus/pci/devices"
IB_CLASS = "/sys/class/infiniband"
NODE_DIR = "/sys/devices/system/node"
NVIDIA = "0x10de"
BRIDGE_CLASS = "0x060400"
# NCCL's kvDictPciGen (src/graph/topo.cc): the link_speed strings NCCL converts (a prefix match);
# anything else falls back to 8 GT/s without an error, so anything else is refused here.
LINK_SPEEDS = ("2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s",
               "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe")
# the host's distance between the tenant's GPUs and VFs, as the plan names it (nvidia-smi's names)
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
# bridges that exist only in the file, in a PCI domain no guest device uses (the published VM files' practice)
VIRTUAL_BRIDGE = "ffff:ff:%02x.0"
# the facts a tenant with VFs and no GPU gets (action guest_inventory): no file, and the one written before goes
NO_GPU = "the plan gives the tenant no GPU on its host"
# The file's first line: an XML comment, which NCCL's parser skips wherever an element may start (xml.cc
# xmlGetNode and xmlSkipComment), by which nccl_env knows the file it wrote (guest.nccl_topo_edit).
MARK = "<!-- gpuvirt.tenancy nccl_env: the NCCL topology file of this guest, removed when it can no longer be made -->"
# PXB: NCCL reads PXB where a GPU and a NIC meet above more than one bridge of its tree, a switch being its upstream
# port (ncclTopoGetXmlFromSys takes a device's parent two sysfs levels up, skipping the downstream port). The guest has
# one emulated switch for them (libvirt/domain_switch), which NCCL reads as PIX, so the file names the host's three
# switch levels as bridges only it has: the shared switch, under it one bridge per side holding that side's GPUs or
# NICs. NCCL gives such a bridge the link the file sets or, with none, link_speed "" and link_width "" (no sysfs path),
# which ncclTopoAddPci reads as 8 GT/s x16: each needs its host switch's link (planning.pci_links, PXB_KINDS).
PXB_SWITCHES = (("shared_switch", "the switch the GPUs and VFs share"), ("gpu_switch", "the GPUs' switch below it"),
                ("nic_switch", "the VFs' switch below it"))


def speed_ok(text):
    """Whether NCCL's kvDictPciGen converts ``text`` (a prefix match, as kvConvertToInt does)."""
    return any(str(text).startswith(entry) for entry in LINK_SPEEDS)


def _link(value, what):
    if not isinstance(value, dict):
        raise InputError("topo_links.%s: expected {link_speed, link_width} (the host's link of the device, as the tenants stage "
                         "gives it in gpuvirt_guest_pci_links), got %r" % (what, value))
    speed, width = value.get("link_speed"), value.get("link_width")
    if not speed_ok(speed or ""):
        raise InputError("topo_links.%s.link_speed: %r is not a speed NCCL reads; use one of %s" % (what, speed, ", ".join(LINK_SPEEDS)))
    try:
        width = int(str(width), 10)
    except ValueError:
        width = 0
    if not 1 <= width <= 32:
        raise InputError("topo_links.%s.link_width: %r is not a PCIe link width (1-32 lanes)" % (what, value.get("link_width")))
    return {"link_speed": str(speed), "link_width": width}


KINDS = ("gpu", "nic", "switch")
ALL_KINDS = KINDS + tuple(kind for kind, _what in PXB_SWITCHES)


def check_links(value):
    """The host's link facts of one tenant (``gpuvirt_guest_pci_links``), checked: {level, gpu, nic,
    switch, shared_switch, gpu_switch, nic_switch, missing, unknown}; ``missing`` (a reason) when the host
    could not give the distance; a link None where the host could not give it (or gave different ones),
    its reason in ``unknown`` where the level needs it (``switch`` with PIX, the ``*_switch`` levels with PXB)."""
    if not isinstance(value, dict):
        raise InputError("topo_links: expected the host's link facts of this tenant (gpuvirt_guest_pci_links: level, gpu, nic, "
                         "switch, missing, unknown), got %r" % (value,))
    unknown_keys = sorted(set(value) - set(ALL_KINDS) - {"level", "missing", "unknown"})
    if unknown_keys:
        raise InputError("topo_links: unknown keys %s; give level, gpu, nic, switch, shared_switch, gpu_switch, nic_switch, "
                         "missing and unknown" % ", ".join(unknown_keys))
    if value.get("missing"):
        return dict([(kind, None) for kind in ALL_KINDS], level=None, missing=str(value["missing"]), unknown={})
    level = value.get("level")
    if level not in LEVELS:
        raise InputError("topo_links.level: %r is not a distance of the plan; use %s" % (level, ", ".join(LEVELS)))
    reasons = value.get("unknown") or {}
    if not isinstance(reasons, dict) or set(reasons) - set(ALL_KINDS):
        raise InputError("topo_links.unknown: expected {%s: why the host gives no link}, got %r" % (", ".join(ALL_KINDS), reasons))
    out = {"level": level, "missing": None, "unknown": {}}
    # the switch's link matters with PIX only, the switch levels' with PXB only
    needed = dict((kind, level == "PXB") for kind in ALL_KINDS[3:])
    needed.update(gpu=True, nic=True, switch=level == "PIX")
    for kind in ALL_KINDS:
        if value.get(kind) is None:
            out[kind] = None
            if needed[kind]:
                out["unknown"][kind] = str(reasons.get(kind) or "not given by the GPU host")
        else:
            out[kind] = _link(value[kind], kind)
    return out


def _link_attrs(link):
    """A pci element's link attributes: the host's link, or none (NCCL then reads the device's own in the guest)."""
    if link is None:
        return []
    return [("link_speed", link["link_speed"]), ("link_width", str(link["link_width"]))]


def _pci_device(fs, address):
    base = "%s/%s" % (PCI_DEVICES, address)
    numa = fs.read_int(base + "/numa_node")
    return {"address": address, "class": (fs.read(base + "/class") or "").lower() or None,
            "upstream": upstream_bridges(fs.realpath(base), address),
            "numa_node": None if numa is None or numa < 0 else numa}


def guest_devices(fs, rdma_devices):
    """The guest's NVIDIA GPUs (vendor 0x10de, display class) and the PCI functions of the RDMA devices
    ``rdma_devices`` (the HCAs NCCL is given), each {address, class, upstream, numa_node}; a device
    that is not a PCI function (soft-RoCE) is listed in ``not_pci``."""
    gpus = []
    for address in sorted(fs.listdir(PCI_DEVICES)):
        base = "%s/%s" % (PCI_DEVICES, address)
        if (fs.read(base + "/vendor") or "").lower() == NVIDIA and (fs.read(base + "/class") or "").lower().startswith("0x03"):
            gpus.append(_pci_device(fs, address))
    nics, not_pci = [], []
    for device in sorted(set(rdma_devices)):
        real = fs.realpath("%s/%s/device" % (IB_CLASS, device)) or ""
        address = real.rsplit("/", 1)[-1]
        if is_address(address):
            if address not in [nic["address"] for nic in nics]:
                nics.append(_pci_device(fs, address))
        else:
            not_pci.append(device)
    nodes = [entry for entry in fs.listdir(NODE_DIR) if re.match(r"^node\d+$", entry)]
    return {"gpus": gpus, "nics": nics, "not_pci": not_pci, "numa_nodes": sorted(int(n[4:]) for n in nodes)}


def _node(device, nodes):
    """The guest NUMA node of a device; the only node of a guest with one (QEMU gives a device -1 then), node 0
    of a kernel without NUMA (no node directories); None where several nodes leave it open."""
    if device["numa_node"] is not None:
        return device["numa_node"]
    if len(nodes) > 1:
        return None
    return nodes[0] if nodes else 0


def plan_tree(devices, links):
    """-> (cpus, reason): ``cpus`` [(numaid, [element])], an element ("pci", attrs, children); None
    and the reason when no honest file can be made (the file is then left out)."""
    if links is None:
        return None, "no host link facts were given (the tenants stage gives them as gpuvirt_guest_pci_links)"
    if links["missing"]:
        return None, "the GPU host's link facts are unknown: %s" % links["missing"]
    if devices["not_pci"] and not devices["nics"]:
        return None, "the RDMA device %s is not a PCI function (soft-RoCE): NCCL's topology has no NIC to place" % ", ".join(devices["not_pci"])
    if not devices["gpus"]:
        return None, "no NVIDIA GPU in this guest"
    if not devices["nics"]:
        return None, "no RDMA NIC of this tenant in this guest"
    groups = {}
    for kind, device in [("gpu", d) for d in devices["gpus"]] + [("nic", d) for d in devices["nics"]]:
        node = _node(device, devices["numa_nodes"])
        if node is None:
            return None, "%s has no NUMA node in this guest (numa_node -1 with %d guest nodes)" % (device["address"], len(devices["numa_nodes"]))
        groups.setdefault(node, []).append((kind, device))
    level = links["level"]
    if level == "PXB":
        lacking = [(what, links["unknown"][kind]) for kind, what in PXB_SWITCHES if links[kind] is None]
        if lacking:
            return None, ("the host's GPUs and VFs are PXB apart (under different switches below a shared one): the file names "
                          "each host switch level as a bridge only it has, which needs that switch's link, unknown for %s; "
                          "NCCL would take 8 GT/s x16 for it (NCCL_NET_GDR_LEVEL=PXB carries the distance)"
                          % "; ".join("%s (%s)" % pair for pair in lacking))
    cpus, bridges = [], 0
    for index, (node, members) in enumerate(sorted(groups.items())):
        kinds = set(kind for kind, _device in members)
        if level == "SYS" and len(kinds) > 1:
            return None, ("the host's GPUs and VFs are SYS apart (different NUMA nodes) but share guest NUMA node %d; give the tenant "
                          "guest NUMA cells" % node)
        if level in ("PIX", "PXB") and len(kinds) < 2:
            return None, "the host's GPUs and VFs are %s apart but guest NUMA node %d holds only %ss" % (
                {"PIX": "under one switch (PIX)", "PXB": "under one shared switch (PXB)"}[level], node, kinds.pop().upper())
        leaves = [(kind, ("pci", [("busid", device["address"]), ("class", device["class"] or ("0x030200" if kind == "gpu" else "0x020000"))]
                          + _link_attrs(links[kind]), []))
                  for kind, device in sorted(members, key=lambda m: m[1]["address"])]
        if level == "PXB":
            # ffff:ff:NN.0 bridges numbered through the file: the shared switch, then the GPUs' and the VFs' below it
            sides = []
            for offset, side in ((2, "gpu"), (3, "nic")):
                sides.append(("pci", [("busid", VIRTUAL_BRIDGE % (bridges + offset)), ("class", BRIDGE_CLASS)]
                              + _link_attrs(links[side + "_switch"]), [leaf for kind, leaf in leaves if kind == side]))
            cpus.append((node, [("pci", [("busid", VIRTUAL_BRIDGE % (bridges + 1)), ("class", BRIDGE_CLASS)]
                                 + _link_attrs(links["shared_switch"]), sides)]))
            bridges += 3
            continue
        leaves = [leaf for _kind, leaf in leaves]
        if level == "PIX":
            chains = [device["upstream"] for _kind, device in members]
            bridge = nearest_shared_bridge(chains[0], *chains[1:])
            if bridge is None and links["switch"] is None:
                # NCCL finds no sysfs path for a bus ID only the file names and sets its link_speed "" (read as
                # 8 GT/s) and link_width "" (read as x16): a link nobody measured
                return None, ("the guest has no bridge above its GPUs and VF (no emulated switch), and a bridge only the file names "
                              "needs the host switch's link, which is unknown (%s); NCCL would take 8 GT/s x16 for it"
                              % links["unknown"]["switch"])
            leaves = [("pci", [("busid", bridge or VIRTUAL_BRIDGE % (index + 1)), ("class", BRIDGE_CLASS)]
                       + _link_attrs(links["switch"]), leaves)]
        cpus.append((node, leaves))
    return cpus, None


def _render(element, depth, lines):
    name, attrs, children = element
    text = "%s<%s %s" % ("  " * depth, name, " ".join('%s="%s"' % pair for pair in attrs))
    if not children:
        lines.append(text + "/>")
        return
    lines.append(text + ">")
    for child in children:
        _render(child, depth + 1, lines)
    lines.append("%s</%s>" % ("  " * depth, name))


def render(cpus):
    """NCCL's XML of ``cpus`` (from :func:`plan_tree`) after the MARK line: spaces between elements (NCCL's
    parser skips only blanks and line ends, no tabs), no XML declaration (NCCL would read it as an element)."""
    lines = [MARK, '<system version="1">']
    for node, children in cpus:
        lines.append('  <cpu numaid="%d">' % node)
        for child in children:
            _render(child, 2, lines)
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


def from_guest(links):
    """{gpu, nic, switch: why} of the links the file leaves to NCCL's own reading in the guest."""
    return dict((links or {}).get("unknown") or {})


def topology_file(fs, rdma_devices, links):
    """-> (text, details): the file's text (None when it is left out) and what was read and decided:
    {gpus, nics, level, reason, from_guest}."""
    devices = guest_devices(fs, rdma_devices)
    cpus, reason = plan_tree(devices, links)
    details = {"gpus": [d["address"] for d in devices["gpus"]], "nics": [d["address"] for d in devices["nics"]],
               "level": links["level"] if links else None, "reason": reason,
               "from_guest": from_guest(links) if cpus is not None else {}}
    return (render(cpus) if cpus is not None else None), details


def preview_file(layout, links):
    """-> (lines, reason, from_guest): the file the guest stage will write for a tenant, decided as in the guest
    (:func:`plan_tree`) on the guest layout its domain defines (planning.pci_links ``guest_layouts``: each
    device's guest NUMA cell and emulated switch, its class) and the host's ``links`` (None: :data:`NO_GPU`);
    ``lines`` None and the reason where no file is made. The guest's bus IDs are the guest's own, read there:
    shown as ``{HOST ADDRESS}``, an emulated switch as ``{switch N}``."""
    checked = check_links(links if links is not None else {"missing": NO_GPU})
    cell_of = dict((address, index) for index, cell in enumerate(layout["cells"]) for address in cell)
    switch_of = dict((address, "{switch %d}" % (index + 1)) for index, group in enumerate(layout["switches"]) for address in group)

    def device(address):
        return {"address": "{%s}" % address, "class": layout["classes"].get(address), "numa_node": cell_of.get(address),
                "upstream": [switch_of[address]] if address in switch_of else []}

    devices = {"gpus": [device(a) for a in layout["gpus"]], "nics": [device(a) for a in layout["nics"]], "not_pci": [],
               "numa_nodes": list(range(len(layout["cells"]))) or [0]}
    cpus, reason = plan_tree(devices, checked)
    if cpus is None:
        return None, reason, {}
    return render(cpus).splitlines(), None, from_guest(checked)
