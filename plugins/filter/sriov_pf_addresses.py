# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuvirt.tenancy.sriov_pf_addresses``: the PFs gpuvirt_sriov_pfs names."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

__metaclass__ = type


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
        return {"sriov_pf_addresses": sriov_pf_addresses}
