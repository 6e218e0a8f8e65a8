"""Where a nested tenant's devices sit, read two ways (lab/nested.py, check gpu_switch): the bridge
chain the domain's XML gives each device (its <address> on a controller's bus, that controller's on
its parent's, up to a root bus) and the chain the guest reads in sysfs (the device's path from its
root bus, pci0000:NN/...). Pure functions over text; no I/O.

libvirt formatdomain, "Controllers": a PCI controller's ``index`` is the bus that devices name in
their ``<address type='pci' bus=...>``; a ``pcie-expander-bus`` (QEMU ``pxb-pcie``) is a root bus of
its own whose guest bus number is its ``<target busNr=...>`` and whose NUMA node is its
``<target><node>``. The guest numbers the buses below a root bus itself (its firmware), so the
chains are compared by what both know: the root bus number, each level's slot and function, and
each bridge's kind, by the PCI id QEMU gives the model libvirt names in ``<model name=...>``.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

# QEMU's vendor:device of the controller models libvirt uses (QEMU hw/pci-bridge/xio3130_upstream.c
# PCI_DEVICE_ID_TI_XIO3130U, xio3130_downstream.c PCI_DEVICE_ID_TI_XIO3130D, gen_pcie_root_port.c
# PCI_DEVICE_ID_REDHAT_PCIE_RP, ioh3420.c PCI_DEVICE_ID_IOH_EPORT); the lab reads the first three
# in its own lspci (docs/lab.md, "What the lab is").
MODEL_IDS = {
    "pcie-root-port": "0x1b36:0x000c",
    "ioh3420": "0x8086:0x3420",
    "x3130-upstream": "0x104c:0x8232",
    "xio3130-downstream": "0x104c:0x8233",
}
# the QEMU model of a controller whose XML names none (a definition before libvirt fills it in):
# formatdomain, "Controllers": pcie-root-port (ioh3420 on a QEMU without it), x3130-upstream and
# xio3130-downstream, the only model each of the switch's ports has
DEFAULT_MODELS = {"pcie-root-port": "pcie-root-port", "pcie-switch-upstream-port": "x3130-upstream",
                  "pcie-switch-downstream-port": "xio3130-downstream"}
UPSTREAM = "pcie-switch-upstream-port"
DOWNSTREAM = "pcie-switch-downstream-port"
EXPANDER = "pcie-expander-bus"
ADDRESS = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")


def _int(text) -> int | None:
    try:
        return int(str(text), 0)
    except (TypeError, ValueError):
        return None


def _pci(address) -> dict | None:
    """An element's <address type='pci'> (a <source>'s has no type) -> {bus, slot, function} as numbers, or None."""
    if address is None or address.get("type", "pci") != "pci":
        return None
    values = {key: _int(address.get(key, "0")) for key in ("domain", "bus", "slot", "function")}
    return None if None in values.values() else values


def host_devices(xml_text: str) -> dict[str, ET.Element]:
    """The domain's PCI host devices by host address (0000:83:00.0): <hostdev type='pci'> and
    <interface type='hostdev'>, each by its <source><address>."""
    root = ET.fromstring(xml_text)
    found = {}
    for element in root.findall("devices/hostdev[@type='pci']") + root.findall("devices/interface[@type='hostdev']"):
        source = _pci(element.find("source/address"))
        if source:
            found["%04x:%02x:%02x.%x" % (source["domain"], source["bus"], source["slot"], source["function"])] = element
    return found


def xml_chain(xml_text: str, host_address: str) -> list[dict]:
    """The bridge chain the domain gives its device of ``host_address``, root first:
    [{"root_bus": N, "node": node or None, "model": the root's model}, {"model", "qemu", "slot", "function", "index"}
    per controller below it, ..., {"model": "device", "slot", "function"}]. Raises ValueError when
    the device or a controller on the way is missing, or a level has no PCI address."""
    root = ET.fromstring(xml_text)
    element = host_devices(xml_text).get(host_address)
    if element is None:
        raise ValueError(f"the domain has no host device {host_address}")
    controllers = {_int(c.get("index")): c for c in root.findall("devices/controller[@type='pci']")}
    where = _pci(element.find("address"))
    if where is None:
        raise ValueError(f"{host_address} has no guest PCI address in the domain")
    chain = [{"model": "device", "slot": where["slot"], "function": where["function"]}]
    seen = set()
    while True:
        parent = controllers.get(where["bus"])
        if parent is None:
            raise ValueError(f"no PCI controller of index {where['bus']} (the bus {host_address}'s chain names)")
        if where["bus"] in seen:
            raise ValueError(f"the controllers above {host_address} form a loop at index {where['bus']}")
        seen.add(where["bus"])
        model = parent.get("model")
        if model in ("pcie-root", "pci-root"):
            chain.insert(0, {"model": model, "root_bus": 0, "node": None})
            return chain
        if model == EXPANDER:
            target = parent.find("target")
            chain.insert(0, {"model": model, "root_bus": _int(target.get("busNr")) if target is not None else None,
                             "node": _int(target.findtext("node")) if target is not None else None})
            return chain
        where = _pci(parent.find("address"))
        if where is None:
            raise ValueError(f"the {model} of index {parent.get('index')} has no PCI address")
        qemu = parent.find("model")
        qemu = qemu.get("name") if qemu is not None and qemu.get("name") else DEFAULT_MODELS.get(model)
        chain.insert(0, {"model": model, "qemu": qemu,
                         "index": _int(parent.get("index")), "slot": where["slot"], "function": where["function"]})


def guest_chain(path: str, ids: dict[str, str]) -> list[dict]:
    """A guest sysfs path from its root bus (pci0000:fe/0000:fe:00.0/0000:ff:00.0) -> the chain,
    root first: [{"root_bus": N}, {"pci", "slot", "function", "id"} per level]; ``ids``: the guest's
    vendor:device by PCI address. Raises ValueError on a path of another shape."""
    parts = [part for part in path.split("/") if part]
    match = re.fullmatch(r"pci([0-9a-f]{4}):([0-9a-f]{2})", parts[0]) if parts else None
    if not match or len(parts) < 2:
        raise ValueError(f"not a PCI path from a root bus: {path!r}")
    chain = [{"root_bus": int(match.group(2), 16)}]
    for part in parts[1:]:
        address = ADDRESS.match(part)
        if not address:
            raise ValueError(f"{part!r} in {path!r} is not a PCI address")
        chain.append({"pci": part, "slot": int(address.group(3), 16), "function": int(address.group(4)),
                      "id": ids.get(part)})
    return chain


def chain_text(chain: list[dict]) -> str:
    """A chain in a line: 'root 0xfe > pcie-root-port 00.0 > ... > device 00.0' (the domain's) or the guest's ids."""
    words = []
    for level in chain:
        if "root_bus" in level:
            node = level.get("node")
            words.append("root 0x%02x" % level["root_bus"] + ("" if node is None else " node %s" % node))
        else:
            words.append("%s %02x.%x" % (level.get("id") or level.get("qemu") or level["model"], level["slot"], level["function"]))
    return " > ".join(words)


def chain_problems(domain: list[dict], guest: list[dict], device_id: str) -> list[str]:
    """What differs between the domain's chain and the guest's, level by level: the root bus number,
    each level's slot and function, each bridge's PCI id (its QEMU model's) and the device's id."""
    if len(domain) != len(guest):
        return [f"the domain has {len(domain) - 1} level(s) below the root bus, the guest {len(guest) - 1}"]
    problems = []
    if domain[0]["root_bus"] != guest[0]["root_bus"]:
        problems.append("root bus: domain 0x%02x, guest 0x%02x" % (domain[0]["root_bus"] or 0, guest[0]["root_bus"]))
    for depth, (want, seen) in enumerate(zip(domain[1:], guest[1:]), start=1):
        if (want["slot"], want["function"]) != (seen["slot"], seen["function"]):
            problems.append("level %d (%s): domain slot %02x.%x, guest %s" % (depth, want["model"], want["slot"],
                                                                              want["function"], seen["pci"]))
        wanted_id = device_id if want["model"] == "device" else MODEL_IDS.get(want.get("qemu") or "")
        if wanted_id is None:
            problems.append(f"level {depth}: no PCI id known for the {want['model']} model {want.get('qemu')}")
        elif seen["id"] != wanted_id:
            problems.append(f"level {depth} ({want['model']}): guest id {seen['id']} at {seen['pci']}, expected {wanted_id}")
    return problems


def shared_switch(domain_a: list[dict], domain_b: list[dict], guest_a: list[dict], guest_b: list[dict]) -> list[str]:
    """Whether two devices sit below one switch upstream port, each on a downstream port of its own,
    in the domain (the same upstream controller) and in the guest (the same upstream port's path):
    -> the problems, none when they do."""
    problems = []
    for name, chain in (("first", domain_a), ("second", domain_b)):
        if len(chain) < 4 or chain[-2]["model"] != DOWNSTREAM or chain[-3]["model"] != UPSTREAM:
            problems.append(f"the domain puts the {name} device below no switch: {chain_text(chain)}")
    if problems:
        return problems
    if domain_a[-3]["index"] != domain_b[-3]["index"]:
        problems.append("the domain puts the devices below two upstream ports (indices %s and %s)"
                        % (domain_a[-3]["index"], domain_b[-3]["index"]))
    if domain_a[-2]["index"] == domain_b[-2]["index"]:
        problems.append("the domain puts both devices on one downstream port")
    if len(guest_a) < 4 or len(guest_b) < 4 or guest_a[:-2] != guest_b[:-2]:
        problems.append("the guest reads no common upstream port: %s | %s" % (chain_text(guest_a), chain_text(guest_b)))
    elif guest_a[-2]["pci"] == guest_b[-2]["pci"]:
        problems.append("the guest reads both devices on one downstream port %s" % guest_a[-2]["pci"])
    return problems
