# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SR-IOV PFs of ``gpuvirt_sriov_pfs`` (``[{pf, num_vfs}]``, a PF given as
PCI address, short or full, or netdev name) resolved against the host model."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type


def resolve_pf(topology, name):
    """A PF given as PCI address (short or full) or netdev name -> full address or None."""
    pci = topology.get("pci_devices") or {}
    text = str(name or "").strip().lower()
    if text in pci:
        return text
    if "0000:" + text in pci:
        return "0000:" + text
    netdev = (topology.get("netdevs") or {}).get(str(name))
    if netdev and netdev.get("pci_address") in pci:
        return netdev["pci_address"]
    return None


def wanted_vfs(topology, sriov_pfs):
    """{PF address (or the name given when it is not found): wanted VF count}."""
    wanted = {}
    for index, item in enumerate(sriov_pfs or []):
        if not isinstance(item, dict) or "pf" not in item:
            raise InputError("gpuvirt_sriov_pfs[%d]: expected {pf, num_vfs}, got %r" % (index, item))
        address = resolve_pf(topology, item["pf"])
        wanted[address or str(item["pf"])] = int(item.get("num_vfs") or 0)
    return wanted
