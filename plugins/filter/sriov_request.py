# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters ``gpuvirt.tenancy.tenant_vf_settings`` and ``gpuvirt.tenancy.sriov_request``: the
per-VF MAC, VLAN, spoof check and trust the tenants get, in the shape of the ``vfs`` option of
``gpuvirt.tenancy.sriov_vfs``. Every VF a tenant holds gets its own MAC (given, or derived from
the tenant name and the VF's index: module_utils/vf_mac.py), spoof checking on and trust off:
the guest cannot send with another MAC or VLAN, nor ask the PF for promiscuous mode."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_plan import ISOLATION
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vf_mac import tenant_vf_macs

__metaclass__ = type


def tenant_vf_settings(tenants, vfs=None):
    """``[{address, mac, vlan, spoofchk, trust}]`` for each VF a present tenant names by address.
    A tenant's ``mac`` is one address (its first VF's) or a list (one per VF, in PCI address
    order); a VF given as a dict may carry its own ``mac`` and ``vlan``; every other VF gets the
    MAC derived from the tenant name and its index. A tenant whose ``vfs`` is a count (VFs not
    placed yet: the tenants stage gives theirs from its plan) names no VF. ``vfs``: VFs of a PF (dicts
    with ``address``, as sriov_vfs returns them, or addresses): only the settings of these."""
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_vf_settings: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    wanted = []
    for tenant in tenants:
        if not isinstance(tenant, dict) or tenant.get("state", "present") == "absent":
            continue
        tenant_vfs = tenant.get("vfs", [])
        if not isinstance(tenant_vfs, (list, tuple)):
            continue
        entries = [vf if isinstance(vf, dict) else {"address": vf} for vf in tenant_vfs]
        macs = tenant_vf_macs(tenant.get("name"), [e.get("address") for e in entries], mac=tenant.get("mac"))
        for entry in entries:
            address = entry.get("address")
            settings = {"address": address, "mac": entry["mac"] if "mac" in entry else macs.get(address),
                        "vlan": entry.get("vlan", tenant.get("vlan"))}
            settings.update(ISOLATION)
            wanted.append(settings)
    if vfs is None:
        return wanted
    addresses = [vf.get("address") if isinstance(vf, dict) else vf for vf in vfs]
    return [entry for entry in wanted if entry["address"] in addresses]


def sriov_request(pfs, tenants, autoprobe=False, persist=True, force=False):
    """The options of ``gpuvirt.tenancy.sriov_vfs`` for every PF of ``pfs`` (``[{pf, num_vfs,
    autoprobe}]``, as gpuvirt_sriov_pfs) in one call: ``{pfs: [...], vf_settings: [...]}``, the
    settings of each VF the tenants name by address (``tenant_vf_settings``), which the module
    hands to the PF that owns the VF."""
    if not isinstance(pfs, list) or any(not isinstance(p, dict) or "pf" not in p or "num_vfs" not in p for p in pfs):
        raise AnsibleFilterError("gpuvirt.tenancy.sriov_request: expected the PF list [{pf, num_vfs, autoprobe}] "
                                 "(gpuvirt_sriov_pfs), got %r" % (pfs,))
    return {"pfs": [{"pf": p["pf"], "num_vfs": p["num_vfs"],
                     "autoprobe": p["autoprobe"] if p.get("autoprobe") is not None else autoprobe,
                     "persist": persist, "force": force} for p in pfs],
            "vf_settings": tenant_vf_settings(tenants)}


class FilterModule:
    """SR-IOV filters."""

    def filters(self):
        return {"tenant_vf_settings": tenant_vf_settings, "sriov_request": sriov_request}
