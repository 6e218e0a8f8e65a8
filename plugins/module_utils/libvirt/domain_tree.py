# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A domain definition's XML tree: parsed, serialised, a child found or placed, sizes in KiB,
a PCI address as libvirt's attributes, and the names of the elements a tenant's QoS manages.
Pure XML, no libvirt; the readers (domain_readers), the pinning (domain_pinning) and the
tenant's definition (tenant_spec, domain_builder) build on it."""

from __future__ import absolute_import, division, print_function

import io
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import address_parts, is_address

__metaclass__ = type

# cputune children a tenant's QoS manages, and the domain scheduler parameters they are live.
CPU_QOS = (("cpu_shares", "shares", "cpu_shares"), ("cpu_period", "period", "vcpu_period"), ("cpu_quota", "quota", "vcpu_quota"))
IOTUNE_KEYS = ("total_bytes_sec", "read_bytes_sec", "write_bytes_sec", "total_iops_sec", "read_iops_sec", "write_iops_sec")
# libvirt's QEMU namespace: <qemu:commandline> passes arguments to QEMU as they are.
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)
QEMU_COMMANDLINE = "{%s}commandline" % QEMU_NS
QEMU_ARG = "{%s}arg" % QEMU_NS


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


def find_or_add(parent, tag, after=()):
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


def to_kib(value, unit):
    """A libvirt memory size in ``unit`` as KiB."""
    value = int(value)
    unit = (unit or "KiB").lower()
    factors = {"b": 1.0 / 1024, "bytes": 1.0 / 1024, "k": 1, "kib": 1, "kb": 1000.0 / 1024, "m": 1024, "mib": 1024,
               "mb": 1000.0 * 1000 / 1024, "g": 1024 * 1024, "gib": 1024 * 1024}
    return int(value * factors.get(unit, 1))


def address_attributes(addr, what):
    """A PCI address as libvirt's ``<address domain= bus= slot= function=>`` attributes; only the
    full form (``0000:82:00.0``, any case) is taken."""
    text = str(addr or "").lower()
    if not is_address(text):
        raise InputError("%s: %r is not a PCI address like 0000:82:00.0" % (what, addr))
    domain, bus, slot, function = address_parts(text)
    return {"domain": "0x%04x" % domain, "bus": "0x%02x" % bus, "slot": "0x%02x" % slot, "function": "0x%x" % function}
