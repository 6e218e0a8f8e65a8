# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every domain on a libvirt connection holds (its PCI devices, its interfaces' MACs, its
disks' files), defined or running: what the tenants stage's isolation rules check a new
definition against."""

from __future__ import absolute_import, division, print_function

from collections import OrderedDict

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_addresses
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.change import _live_xml, _persistent_xml

__metaclass__ = type


def interface_macs(root):
    """The MACs of a definition's interfaces: its VFs' (hostdev interfaces) and its virtio NICs'."""
    return [mac.get("address").lower() for mac in root.findall("devices/interface/mac") if mac.get("address")]


def disk_files(root):
    """The files a definition's disks and cdroms are (``<source file=...>``): what the domain
    writes, or a seed it reads. Not their backing files: a base image is shared by overlays."""
    files = []
    for source in root.findall("devices/disk/source"):
        if source.get("file") and source.get("file") not in files:
            files.append(source.get("file"))
    return files


def domain_holdings(conn):
    """{domain: (its PCI devices, its interfaces' MACs, its disks' files)} over every domain on the connection, defined or
    running (a VF as ``<interface type='hostdev'>`` counts, and so does a virtio NIC's MAC; a running
    one's live XML too)."""
    held = OrderedDict()
    for name in conn.domain_names():
        domain = conn.domain(name)
        if domain is None:
            continue
        roots = [_persistent_xml(domain, name)]
        if domain.is_active():
            roots.append(_live_xml(domain, name))
        devices, macs, files = [], [], []
        for root in roots:
            devices.extend(a for a in device_addresses(root) if a not in devices)
            macs.extend(m for m in interface_macs(root) if m not in macs)
            files.extend(f for f in disk_files(root) if f not in files)
        held[name] = (devices, macs, files)
    return held
