# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host PCI devices a libvirt domain definition holds: ``<hostdev type='pci'>`` and
``<interface type='hostdev'>`` (an SR-IOV VF with its MAC/VLAN), the one reader for both."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import format_address

__metaclass__ = type


def source_address(element):
    """The normalised ``0000:bb:ss.f`` of an element's ``<source><address>``, or None."""
    address = element.find("source/address")
    if address is None:
        return None
    try:
        return format_address(*(int(address.get(k, "0"), 16) for k in ("domain", "bus", "slot", "function")))
    except ValueError:
        return None


def _device_elements(root):
    """(address, element) of a parsed definition's PCI hostdevs, then of its hostdev interfaces."""
    for element in root.findall("devices/hostdev[@type='pci']") + root.findall("devices/interface[@type='hostdev']"):
        address = source_address(element)
        if address:
            yield address, element


def device_addresses(root):
    """PCI addresses of a parsed definition's PCI hostdevs, then of its hostdev interfaces.
    A running domain's status file (``/run/libvirt/qemu/<name>.xml``) wraps the definition in
    ``<domstatus>``: its ``<domain>`` is read."""
    if root.tag == "domstatus" and root.find("domain") is not None:
        root = root.find("domain")
    return [address for address, _element in _device_elements(root)]


def device_elements(root):
    """Host PCI address -> the ``hostdev`` or hostdev ``interface`` element that passes it through."""
    return dict(_device_elements(root))


def xml_device_addresses(text):
    """The same from XML text; an empty list for text that is not XML."""
    try:
        return device_addresses(ET.fromstring(text))
    except ET.ParseError:
        return []
