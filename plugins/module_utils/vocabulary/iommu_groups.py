# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IOMMU groups of the host model: who shares a device's group (the unit of isolation).

A VFIO user gets a whole group: every endpoint in it goes to the same user (vfio_bind binds
them, the planner gives them to one tenant). Bridges are not endpoints and stay with the host:
the kernel's VFIO documentation (Documentation/driver-api/vfio.rst, "VFIO Usage Example") says
of a bridge in a device's group that "it's not required to bind this device to the vfio-pci
driver (vfio-pci does not currently support PCI bridges)", and vfio counts a group with PCI
bridges on their own driver (pcieport) as viable (kernel commit 5f096b14, "vfio: Whitelist
PCI bridges")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The fix for a device whose IOMMU group holds one the host keeps: the planner leaves it out, vfio_bind refuses it
GROUP_FIX = ("enable ACS on the PCIe ports above it (BIOS: ACS/PCIe ACS enable), move the card to a slot "
             "with its own IOMMU group, or keep the device for the host (gpuvirt_host_gpus)")
# Why a device whose iommu_group link names a group /sys/kernel/iommu_groups lacks is refused, and the fix
DANGLING_GROUP = ("the iommu_group link names group %s, which /sys/kernel/iommu_groups does not hold, so the devices that share "
                  "it (all of which vfio-pci would take) cannot be known; on a capture, capture the host again with "
                  "/sys/kernel/iommu_groups; on the host, check that the device is still there (lspci -s %s) and run again")
# PCI class of a PCI-to-PCI bridge (base 0x06, subclass 0x04): the ports of switches and root ports
BRIDGE_CLASS = 0x0604


def is_bridge(device):
    """Whether a device of the host model is a PCI-to-PCI bridge (``is_bridge``, else its class)."""
    device = device or {}
    if "is_bridge" in device:
        return bool(device["is_bridge"])
    pci_class = str(device.get("class") or "")
    try:
        return int(pci_class, 16) >> 8 == BRIDGE_CLASS
    except ValueError:
        return False


def group_members(topology, address):
    """All the devices of ``address``'s IOMMU group, itself included, sorted; [] without a group."""
    pci = topology.get("pci_devices") or {}
    group = (pci.get(address) or {}).get("iommu_group")
    if group is None:
        return []
    members = ((topology.get("iommu") or {}).get("groups") or {}).get(str(group)) or [
        a for a, d in pci.items() if (d or {}).get("iommu_group") == group]
    return sorted(set(members) | {address})


def group_endpoints(topology, address):
    """The other endpoints (bridges aside) of a device's IOMMU group."""
    pci = topology.get("pci_devices") or {}
    return [m for m in group_members(topology, address) if m != address and not is_bridge(pci.get(m))]


def dangling_group(topology, address):
    """The group number ``address``'s iommu_group link names where the host model's group table
    (read from /sys/kernel/iommu_groups) lacks it (a capture taken without it, a device being
    removed), else None; None too where the model has no table (IOMMU off: no group at all)."""
    group = ((topology.get("pci_devices") or {}).get(address) or {}).get("iommu_group")
    known = (topology.get("iommu") or {}).get("groups") or {}
    return group if group is not None and known and str(group) not in known else None
