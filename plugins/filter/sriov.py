# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuvirt.tenancy.tenant_vf_settings``: the per-VF MAC and VLAN the tenants want,
in the shape of the ``vfs`` option of ``gpuvirt.tenancy.sriov_vfs``."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

__metaclass__ = type


def _nth(value, index):
    """``value[index]``, or None where there is none (a list of MACs shorter than the VFs)."""
    try:
        return value[index]
    except (IndexError, KeyError, TypeError):
        return None


def tenant_vf_settings(tenants, vfs=None):
    """``[{address, mac, vlan}]`` for each VF a present tenant names by address. A tenant's
    ``mac`` is one address (its first VF's) or a list (one per VF); a VF given as a dict may
    carry its own ``mac`` and ``vlan``; a tenant whose ``vfs`` is a count (VFs not placed
    yet) names no VF. ``vfs``: VFs of a PF (dicts with ``address``, as sriov_vfs returns
    them, or addresses): only the settings of these."""
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_vf_settings: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    wanted = []
    for tenant in tenants:
        if not isinstance(tenant, dict) or tenant.get("state", "present") == "absent":
            continue
        tenant_vfs = tenant.get("vfs", [])
        for index, vf in enumerate(tenant_vfs if isinstance(tenant_vfs, (list, tuple)) else []):
            mac = tenant.get("mac")
            if mac is not None and not isinstance(mac, str):
                mac = _nth(mac, index)
            elif index > 0:
                mac = None
            if isinstance(vf, dict):
                wanted.append({"address": vf.get("address"), "mac": vf.get("mac", mac),
                               "vlan": vf.get("vlan", tenant.get("vlan"))})
            else:
                wanted.append({"address": vf, "mac": mac, "vlan": tenant.get("vlan")})
    if vfs is None:
        return wanted
    addresses = [vf.get("address") if isinstance(vf, dict) else vf for vf in vfs]
    return [entry for entry in wanted if entry["address"] in addresses]


class FilterModule:
    """SR-IOV filters."""

    def filters(self):
        return {"tenant_vf_settings": tenant_vf_settings}
