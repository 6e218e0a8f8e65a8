# -*- coding: utf-8 -*-
"""NCCL's reading of an NCCL_TOPO_FILE, as rules a test can apply: a small parser that follows
NVIDIA/nccl src/graph/xml.cc (commit 5067397c2676d5aed50042fc39e5c8ee96eb0027) and refuses what NCCL
refuses or silently reads otherwise than written. Cited per rule:

- xmlGetNode: between elements only ' ', '\\n', '\\r' are skipped (a tab is "expecting '<'"); an
  element is ``<name`` then attributes each after one ' ' (``key="value"``, xmlGetToken/xmlGetValue),
  ``/>`` closes a single element, ``</name>`` must match the open one (xmlLoadSub "XML Mismatch");
  ``<!-- ... -->`` is skipped (xmlSkipComment).
- xmlGetToken/xmlGetValue: a name or value of MAX_STR_LEN - 1 (254) characters or more, with its end
  quote, is "too long" (xml.h MAX_STR_LEN 255); quotes are " or '.
- xmlGetNode: at most MAX_ATTR_COUNT (16) attributes are kept, the rest ignored; xmlLoadSub: at most
  MAX_SUBS (640) children.
- ncclTopoXmlLoadSystem: the top element is ``system`` with version NCCL_TOPO_XML_VERSION (1); the
  handlers give what may nest: system > cpu; cpu > pci | nic; pci > pci | gpu | nic | pcilink;
  nic > net; gpu > nvlink | c2c. Any other element is "Ignoring element": refused here, since a
  writer that makes one made a mistake.
- checkBDFFormat / int64ToBusId: a ``busid`` is ``DDDD:BB:DD.F`` in hex; NCCL finds a device's node by
  comparing its own lower-case bus ID (int64ToBusId "%04lx:%02lx:%02lx.%01lx") with strcmp, so a
  ``pci`` busid is lower-case.
- ncclTopoAddPci (topo.cc): ``link_speed`` is converted by kvDictPciGen with a prefix match, an
  unknown string falls back to 8 GT/s without an error (refused here); ``link_width`` is an integer.
- kvDictPciClass: ``class`` is a hex class code (0x060400 a bridge, 0x03.. a GPU, 0x02.. a NIC).
- ncclTopoGetXmlFromSys (xml.cc), for a ``pci`` element without ``link_speed``/``link_width``: a GPU NVML
  finds gets NVML's current link, another device its sysfs ``max_link_speed``/``max_link_width`` (the
  lower of its own and its parent port's), and a bus ID without a sysfs path ``""``, which
  ncclTopoAddPci (topo.cc) reads as x16 at 8 GT/s (kvDictPciGen's fallback): ``links_fillable``
  refuses such an element whose bus ID the guest does not have.
- ncclTopoAddPci (topo.cc) and ncclTopoSetPaths (paths.cc), for ``path_type``: a bridge ``pci`` element
  (kvDictPciClass 0x060400: PCI) becomes a node and its sub-elements are added under it; a GPU's (0x03..)
  and a NIC's (0x02..) become a node once NCCL has added its ``gpu``/``nic`` sub-element in the guest
  (ncclTopoFillGpu, ncclTopoFillNet in xml.cc); each node is joined to its parent's by LINK_PCI. A hop is
  LINK_PCI (PATH_PIX), PATH_PXB where both ends are PCI nodes, PATH_PHB where one end is a CPU; CPUs are
  joined by LINK_SYS (PATH_SYS, ncclTopoConnectCpus); a path's type is its worst hop's (std::max).
"""

from __future__ import annotations

import re

MAX_STR_LEN = 255
MAX_ATTR_COUNT = 16
MAX_SUBS = 640
CHILDREN = {None: ("system",), "system": ("cpu",), "cpu": ("pci", "nic"), "pci": ("pci", "gpu", "nic", "pcilink"),
            "nic": ("net",), "gpu": ("nvlink", "c2c"), "net": (), "nvlink": (), "c2c": (), "pcilink": ()}
PCI_GEN = ("2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe",
           "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe")
BUSID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")


class TopoError(ValueError):
    """A file NCCL refuses, or reads otherwise than it says."""


class Node:
    def __init__(self, name, attrs, parent):
        self.name, self.attrs, self.parent, self.subs = name, attrs, parent, []

    def walk(self):
        yield self
        for sub in self.subs:
            yield from sub.walk()


def _token(text, pos, stops):
    start = pos
    while pos < len(text) and text[pos] not in stops:
        pos += 1
    if pos >= len(text):
        raise TopoError("Unexpected EOF")
    if pos - start + 1 >= MAX_STR_LEN - 1:
        raise TopoError("name %r too long (max %d)" % (text[start:pos], MAX_STR_LEN))
    return text[start:pos], pos


def _element(text, pos):
    """One element from ``pos`` (at '<'): (name, attrs, kind, next pos); kind open | single | close."""
    pos += 1
    if text.startswith("!--", pos):
        end = text.find("-->", pos + 3)
        if end < 0:
            raise TopoError("unterminated comment")
        return None, None, "comment", end + 3
    if text[pos] == "/":
        name, pos = _token(text, pos + 1, " >/\n\r")
        if text[pos] != ">":
            raise TopoError("unexpected trailing %r in closing tag %s" % (text[pos], name))
        return name, None, "close", pos + 1
    name, pos = _token(text, pos, " >/\n\r=")
    if text[pos] == "=":
        raise TopoError("Unexpected value with name %s" % name)
    attrs = []
    while text[pos] == " ":
        key, pos = _token(text, pos + 1, "= >/\n\r")
        if text[pos] != "=":
            raise TopoError("element %s: attribute %r without a value" % (name, key))
        quote = text[pos + 1]
        if quote not in "\"'":
            raise TopoError("Expected (double) quote after %s=" % key)
        end = text.find(quote, pos + 2)
        if end < 0:
            raise TopoError("Unexpected EOF")
        value = text[pos + 2:end]
        if len(value) + 1 >= MAX_STR_LEN - 1:
            raise TopoError("value %r too long (max %d)" % (value, MAX_STR_LEN))
        attrs.append((key, value))
        pos = end + 1
    if len(attrs) > MAX_ATTR_COUNT:
        raise TopoError("element %s: %d attributes, NCCL keeps %d" % (name, len(attrs), MAX_ATTR_COUNT))
    kind = "open"
    if text[pos] == "/":
        kind, pos = "single", pos + 1
    if text[pos] != ">":
        raise TopoError("expected >, got %r" % text[pos])
    return name, dict(attrs), kind, pos + 1


def parse(text):
    """The ``system`` node of an NCCL topology file, or TopoError naming the rule it breaks."""
    pos, head, top = 0, None, None
    while True:
        while pos < len(text) and text[pos] in " \n\r":
            pos += 1
        if pos >= len(text):
            if head is not None:
                raise TopoError("unterminated %s" % head.name)
            break
        if text[pos] != "<":
            raise TopoError("expecting '<', got %r" % text[pos])
        name, attrs, kind, pos = _element(text, pos)
        if kind == "comment":
            continue
        if kind == "close":
            if head is None or name != head.name:
                raise TopoError("XML Mismatch : %s / %s" % (head.name if head else None, name))
            head = head.parent
            continue
        allowed = CHILDREN[head.name if head else None]
        if name not in allowed:
            raise TopoError("element %s inside %s: NCCL ignores it (it reads %s there)" % (
                name, head.name if head else "the file", ", ".join(allowed) or "nothing"))
        node = Node(name, attrs, head)
        if head is None:
            if top is not None:
                raise TopoError("a second system element")
            top = node
        else:
            if len(head.subs) == MAX_SUBS:
                raise TopoError("XML parser is limited to %d subnodes" % MAX_SUBS)
            head.subs.append(node)
        if kind == "open":
            head = node
    if top is None:
        raise TopoError("no system element")
    check(top)
    return top


def check(top):
    """The attribute rules of NCCL's topology loader on a parsed tree."""
    if top.attrs.get("version") != "1":
        raise TopoError("XML Topology has wrong version %r, 1 needed" % top.attrs.get("version"))
    for node in top.walk():
        if node.name == "cpu" and not re.match(r"^-?\d+$", node.attrs.get("numaid", "")):
            raise TopoError("cpu without a numaid: %r" % node.attrs)
        if node.name != "pci":
            continue
        busid = node.attrs.get("busid", "")
        if not BUSID.match(busid):
            raise TopoError("pci busid %r is not a lower-case DDDD:BB:DD.F bus ID" % busid)
        if "class" in node.attrs and not re.match(r"^0x[0-9a-fA-F]{2,6}$", node.attrs["class"]):
            raise TopoError("pci %s class %r is not a hex class code" % (busid, node.attrs["class"]))
        if "link_speed" in node.attrs and not any(node.attrs["link_speed"].startswith(gen) for gen in PCI_GEN):
            raise TopoError("pci %s link_speed %r is not in kvDictPciGen (NCCL would read 8 GT/s)" % (busid, node.attrs["link_speed"]))
        if "link_width" in node.attrs and not re.match(r"^\d+$", node.attrs["link_width"]):
            raise TopoError("pci %s link_width %r is not an integer" % (busid, node.attrs["link_width"]))


def links_fillable(top, present):
    """Every ``pci`` element of ``top`` that leaves its link out names a device of ``present`` (the bus IDs
    under the guest's /sys/bus/pci/devices), where NCCL reads the link itself; else TopoError."""
    for node in top.walk():
        if node.name != "pci":
            continue
        left = [key for key in ("link_speed", "link_width") if key not in node.attrs]
        if left and node.attrs["busid"] not in present:
            raise TopoError("pci %s leaves %s out and has no sysfs path: NCCL would read 8 GT/s x16" % (node.attrs["busid"], ", ".join(left)))


# paths.cc path types (topo.h: PATH_PIX 4, PATH_PXB 5, PATH_PHB 8, PATH_SYS 9)
PATH_TYPES = {4: "PIX", 5: "PXB", 8: "PHB", 9: "SYS"}


def _kind(node):
    """The NCCL node a file element becomes: CPU, PCI (a bridge), GPU, NIC, or None (no node: its parent's stands)."""
    if node.name == "cpu":
        return "CPU"
    if node.name != "pci":
        return None
    cls = node.attrs.get("class", "")
    if cls == "0x060400":
        return "PCI"
    return "GPU" if cls.startswith("0x03") else "NIC" if cls.startswith("0x02") else None


def _chain(top, busid):
    """The NCCL nodes from the device ``busid`` up to its CPU (the file's elements that become nodes), or TopoError."""
    found = [node for node in top.walk() if node.name == "pci" and node.attrs.get("busid") == busid]
    if len(found) != 1:
        raise TopoError("%d pci elements with busid %s" % (len(found), busid))
    chain, node = [], found[0]
    if _kind(node) not in ("GPU", "NIC"):
        raise TopoError("pci %s is no GPU or NIC (class %r)" % (busid, node.attrs.get("class")))
    while node is not None and node.name != "system":
        if node.name == "pci" and node is not found[0] and _kind(node) != "PCI":
            # ncclTopoAddPci only descends into a bridge's sub-elements: NCCL never reads a device below a non-bridge
            raise TopoError("pci %s sits under %s, which is no bridge: NCCL does not read it" % (busid, node.attrs.get("busid")))
        chain.append(node)
        node = node.parent
    return chain


def path_type(top, one, other):
    """NCCL's path type (PIX, PXB, PHB or SYS) between the devices ``one`` and ``other`` of the file ``top``, as
    ncclTopoSetPaths types it: the worst hop on the path through their nearest shared node, SYS across CPUs."""
    up, down = _chain(top, one), _chain(top, other)
    shared = next((node for node in up if any(node is mine for mine in down)), None)
    if shared is None:
        # different cpu elements: the path crosses a LINK_SYS between the CPUs
        return "SYS"
    path = up[:next(i for i, node in enumerate(up) if node is shared) + 1]
    path += list(reversed(down[:next(i for i, node in enumerate(down) if node is shared)]))
    worst = 0
    for near, far in zip(path, path[1:]):
        hop = 4  # LINK_PCI
        if _kind(near) == "PCI" and _kind(far) == "PCI":
            hop = 5
        if "CPU" in (_kind(near), _kind(far)):
            hop = 8
        worst = max(worst, hop)
    return PATH_TYPES[worst]
