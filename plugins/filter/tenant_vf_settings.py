# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuvirt.tenancy.tenant_vf_settings``: the
per-VF MAC, VLAN, spoof check and trust the tenants get, in the shape of the ``vfs`` option of
``gpuvirt.tenancy.sriov_vfs``. Every VF a tenant holds gets its own MAC (given, or derived from
the tenant name and the VF's index: module_utils/vocabulary/vf_mac.py), spoof checking on and trust off:
the guest cannot send with another MAC or VLAN, nor ask the PF for promiscuous mode.
``gpuvirt.tenancy.sriov_pf_addresses``: the PFs gpuvirt_sriov_pfs names."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.


def tenant_vf_settings(tenants, vfs=None):
    """``[{address, mac, vlan, spoofchk, trust}]`` for each VF a present tenant names by address
    (module_utils ``tenant_vfs``, which vfio_bind uses on the host). ``vfs``: VFs of a PF (dicts
    with ``address``, as sriov_vfs returns them, or addresses): only the settings of these."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import tenant_vfs  # pylint: disable=import-outside-toplevel
    try:
        return tenant_vfs.tenant_vf_settings(tenants, vfs)
    except InputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_vf_settings: %s" % exc)


def sriov_pf_addresses(pfs):
    """The PF of each entry of ``pfs`` (``[{pf, num_vfs, autoprobe}]``, as gpuvirt_sriov_pfs), in
    order, a PF asked for no VFs too; none for null."""
    name = "gpuvirt.tenancy.sriov_pf_addresses"
    if pfs is None:
        return []
    if not isinstance(pfs, list):
        raise AnsibleFilterError("%s: expected the PF list (gpuvirt_sriov_pfs), got %s" % (name, type(pfs).__name__))
    addresses = []
    for item in pfs:
        if not isinstance(item, dict) or "pf" not in item:
            raise AnsibleFilterError("%s: each of gpuvirt_sriov_pfs needs pf, got %r" % (name, item))
        addresses.append(item["pf"])
    return addresses


class FilterModule:
    """SR-IOV filters."""

    def filters(self):
        return {"tenant_vf_settings": tenant_vf_settings, "sriov_pf_addresses": sriov_pf_addresses}
