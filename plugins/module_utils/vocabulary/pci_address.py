# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI addresses (domain:bus:slot.function), the one place that knows their form."""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

PCI_ADDRESS_RE = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_SHORT_RE = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def normalize_address(text):
    """``81:00.0`` / ``0000:81:00.0`` (any case, surrounding blanks) -> ``0000:81:00.0``;
    None when it is not a PCI address."""
    if not isinstance(text, str):
        return None
    text = text.strip().lower()
    if _SHORT_RE.match(text):
        text = "0000:" + text
    return text if PCI_ADDRESS_RE.match(text) else None


def is_address(text):
    """True for a full lower-case address as sysfs names devices."""
    return isinstance(text, str) and PCI_ADDRESS_RE.match(text) is not None


def upstream_bridges(real_path, address):
    """The bridges above the device ``address``, nearest first, from the real path of its sysfs
    directory (``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` -> ``["0000:00:01.0"]``);
    [] when the path does not end at ``address``."""
    chain = [part for part in (real_path or "").split("/") if is_address(part)]
    return list(reversed(chain[:-1])) if chain and chain[-1] == address else []


def nearest_shared_bridge(chain, *others):
    """The first entry of ``chain`` (a device's bridges, nearest first) that every one of ``others``
    holds too: where the devices' paths meet; None when they meet under no bridge."""
    return next((bridge for bridge in chain if all(bridge in other for other in others)), None)


def address_parts(text):
    """``0000:81:00.1`` -> (0, 0x81, 0, 1); None when it is not a PCI address."""
    normal = normalize_address(text)
    if normal is None:
        return None
    return tuple(int(part, 16) for part in PCI_ADDRESS_RE.match(normal).groups())


def format_address(domain, bus, slot, function):
    return "%04x:%02x:%02x.%x" % (domain, bus, slot, function)


def vf_address(pf, offset, stride, index):
    """Address of VF ``index`` from the PF's ``sriov_offset``/``sriov_stride`` (routing
    IDs, PCIe SR-IOV spec), or None when they are unknown."""
    if offset is None or stride is None:
        return None
    domain, bus, slot, function = address_parts(pf)
    rid = (bus << 8 | slot << 3 | function) + offset + index * stride
    return format_address(domain, (rid >> 8) & 0xff, (rid >> 3) & 0x1f, rid & 0x7)
