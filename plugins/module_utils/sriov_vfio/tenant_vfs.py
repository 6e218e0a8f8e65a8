# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VFs tenants name by address and the settings each gets, and the one sriov_vfs request of
the SR-IOV/VFIO stage: every PF of ``gpuvirt_sriov_pfs`` with its VF count, and the settings of
those VFs (pure; vfio_bind decides with them on the host, the filters ``tenant_vf_settings`` and
``sriov_request`` wrap them for the controller).

Every VF a tenant names gets its own MAC (given, or derived from the tenant name and the VF's
index: vocabulary/vf_mac.py), the tenant's VLAN, spoof checking on and trust off: the guest cannot send with
another MAC or VLAN, nor ask the PF for promiscuous mode."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import tenant_vf_macs

__metaclass__ = type

ISOLATION = {"spoofchk": True, "trust": False}


def named_vfs(tenants):
    """``[(where, tenant name, settings)]`` for each VF a present tenant names by address, in the
    tenants' order: ``where`` labels the entry (``tenants[0] (tenant-a).vfs[1]``), ``settings``
    is ``{address, mac, vlan, spoofchk, trust}`` as given (the address not normalized). A tenant's
    ``mac`` is one address (its first VF's, in PCI address order) or a list (one per VF); a VF
    given as a dict may carry its own ``mac`` and ``vlan``; every other VF gets the MAC derived
    from the tenant name and its index. A tenant whose ``vfs`` is a count (VFs not placed yet:
    the tenants stage gives theirs) names no VF."""
    if not isinstance(tenants, list):
        raise InputError("expected the tenant list (gpuvirt_tenants), got %s" % type(tenants).__name__)
    found = []
    for position, tenant in enumerate(tenants):
        if not stays(tenant):
            continue
        tenant_vfs = tenant.get("vfs", [])
        if not isinstance(tenant_vfs, (list, tuple)):
            continue
        entries = [vf if isinstance(vf, dict) else {"address": vf} for vf in tenant_vfs]
        macs = tenant_vf_macs(tenant.get("name"), [e.get("address") for e in entries], mac=tenant.get("mac"))
        for index, entry in enumerate(entries):
            address = entry.get("address")
            settings = {"address": address, "mac": entry["mac"] if "mac" in entry else macs.get(address),
                        "vlan": entry.get("vlan", tenant.get("vlan"))}
            settings.update(ISOLATION)
            found.append(("tenants[%d] (%s).vfs[%d]" % (position, tenant.get("name"), index), tenant.get("name"), settings))
    return found


def tenant_vf_settings(tenants, vfs=None):
    """``[{address, mac, vlan, spoofchk, trust}]`` for each VF a present tenant names by address
    (:func:`named_vfs`). ``vfs``: VFs of a PF (dicts with ``address``, as sriov_vfs returns them,
    or addresses): only the settings of these."""
    wanted = [settings for _where, _name, settings in named_vfs(tenants)]
    if vfs is None:
        return wanted
    addresses = [vf.get("address") if isinstance(vf, dict) else vf for vf in vfs]
    return [entry for entry in wanted if entry["address"] in addresses]


def sriov_request(pfs, tenants, autoprobe=False, persist=True, force=False):
    """The options of ``gpuvirt.tenancy.sriov_vfs`` for every PF of ``pfs`` (``[{pf, num_vfs,
    autoprobe}]``, as gpuvirt_sriov_pfs) in one call: ``{pfs: [...], vf_settings: [...]}``, the
    settings of each VF the tenants name by address (:func:`tenant_vf_settings`), which the
    module hands to the PF that owns the VF. A PF's own ``autoprobe`` wins over ``autoprobe``."""
    if not isinstance(pfs, list) or any(not isinstance(p, dict) or "pf" not in p or "num_vfs" not in p for p in pfs):
        raise InputError("expected the PF list [{pf, num_vfs, autoprobe}] (gpuvirt_sriov_pfs), got %r" % (pfs,))
    return {"pfs": [{"pf": p["pf"], "num_vfs": p["num_vfs"],
                     "autoprobe": p["autoprobe"] if p.get("autoprobe") is not None else autoprobe,
                     "persist": persist, "force": force} for p in pfs],
            "vf_settings": tenant_vf_settings(tenants)}
