# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IOMMU groups of the host model: who shares a device's group (the unit of isolation)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def group_endpoints(topology, address):
    """The other endpoints (bridges aside) of a device's IOMMU group."""
    pci = topology["pci_devices"]
    group = (pci.get(address) or {}).get("iommu_group")
    if group is None:
        return []
    members = topology["iommu"]["groups"].get(str(group)) or [
        a for a, d in pci.items() if d.get("iommu_group") == group]
    return [m for m in members if m != address and not (pci.get(m) or {}).get("is_bridge")]
