# -*- coding: utf-8 -*-
"""The sriov_pf_addresses filter (tenant_vms_vf_pfs' default): the PFs gpuvirt_sriov_pfs names, in
order, the same PFs the host_sriov role's one sriov_vfs call asks for."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.sriov_pf_addresses import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import stage_options

PF_ADDRESSES = FilterModule().filters()["sriov_pf_addresses"]


@pytest.mark.parametrize("pfs, addresses", [
    # gpuvirt_sriov_pfs of the example inventory's shape: in order, a PF asked for no VFs named too, a netdev as given
    ([{"pf": "0000:19:00.0", "num_vfs": 4, "link_type": "eth"}, {"pf": "0000:21:00.0", "num_vfs": 0},
      {"pf": "ens12", "num_vfs": 2, "autoprobe": True}], ["0000:19:00.0", "0000:21:00.0", "ens12"]),
    ([], []),
    (None, []),
])
def test_sriov_pf_addresses_are_the_pfs_in_order(pfs, addresses):
    assert PF_ADDRESSES(pfs) == addresses
    # the PFs the host_sriov role's call asks for, alike
    inputs = {"pfs": pfs or [], "tenants": None, "autoprobe": False, "persist": True, "force": False}
    assert [p["pf"] for p in stage_options("sriov", inputs)["pfs"]] == addresses


@pytest.mark.parametrize("pfs, words", [
    ("0000:81:00.0", "expected the PF list \\(gpuvirt_sriov_pfs\\), got str"),
    ([{"num_vfs": 4}], "each of gpuvirt_sriov_pfs needs pf"),
    (["0000:81:00.0"], "each of gpuvirt_sriov_pfs needs pf"),
])
def test_sriov_pf_addresses_name_a_bad_pf_list(pfs, words):
    with pytest.raises(AnsibleFilterError, match=words):
        PF_ADDRESSES(pfs)
