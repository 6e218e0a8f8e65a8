# -*- coding: utf-8 -*-
"""The tenant_vf_settings filter as host_sriov calls it: the tenant shapes of
gpuvirt_tenants turned into the vfs option of sriov_vfs."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.tenant_vf_settings import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import stage_options
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac

SETTINGS = FilterModule().filters()["tenant_vf_settings"]
VF1, VF2, VF3 = "0000:81:00.1", "0000:81:00.2", "0000:81:00.3"
# every VF: spoof checking on, trust off
ON = {"spoofchk": True, "trust": False}


def vf(address, mac, vlan):
    return dict(ON, address=address, mac=mac, vlan=vlan)


@pytest.mark.parametrize("tenants, expected", [
    # one MAC: the tenant's first VF; the next gets the MAC derived from tenant and VF index; the VLAN on every VF
    ([{"name": "a", "vfs": [VF1, VF2], "mac": "52:54:00:00:00:01", "vlan": 10}],
     [vf(VF1, "52:54:00:00:00:01", 10), vf(VF2, derived_mac("a", 1), 10)]),
    # a list of MACs: one per VF, in order; VFs past its end get derived ones
    ([{"name": "a", "vfs": [VF1, VF2, VF3], "mac": ["52:54:00:00:00:01", "52:54:00:00:00:02"]}],
     [vf(VF1, "52:54:00:00:00:01", None), vf(VF2, "52:54:00:00:00:02", None), vf(VF3, derived_mac("a", 2), None)]),
    # a VF given as a dict carries its own MAC/VLAN, else the tenant's (or the derived MAC)
    ([{"name": "a", "vfs": [{"address": VF1, "mac": "52:54:00:00:00:09"}, {"address": VF2, "vlan": 5}],
       "mac": "52:54:00:00:00:01", "vlan": 7}],
     [vf(VF1, "52:54:00:00:00:09", 7), vf(VF2, derived_mac("a", 1), 5)]),
    # an explicit null MAC on the VF stays null
    ([{"name": "a", "vfs": [{"address": VF1, "mac": None}], "mac": "52:54:00:00:00:01"}],
     [vf(VF1, None, None)]),
    # no MAC given: each VF its own derived one
    ([{"name": "b", "vfs": [VF2, VF1]}], [vf(VF2, derived_mac("b", 1), None), vf(VF1, derived_mac("b", 0), None)]),
    # VFs as a count (not placed yet), no VFs, an absent tenant: nothing
    ([{"name": "a", "vfs": 2, "mac": "52:54:00:00:00:01"}], []),
    ([{"name": "a"}], []),
    ([{"name": "a", "state": "absent", "vfs": [VF1]}], []),
    ([{"name": "a", "vfs": VF1}], []),
])
def test_tenant_shapes(tenants, expected):
    assert SETTINGS(tenants) == expected


def test_only_the_vfs_of_one_pf():
    tenants = [{"name": "a", "vfs": [VF1], "vlan": 1}, {"name": "b", "vfs": ["0000:82:00.1"], "vlan": 2}]
    created = [{"index": 0, "address": VF1}, {"index": 1, "address": VF2}]
    assert SETTINGS(tenants, created) == [vf(VF1, derived_mac("a", 0), 1)]
    assert SETTINGS(tenants, ["0000:82:00.1"]) == [vf("0000:82:00.1", derived_mac("b", 0), 2)]
    assert SETTINGS(tenants, []) == []


def test_not_a_list_names_the_input():
    with pytest.raises(AnsibleFilterError, match="expected the tenant list"):
        SETTINGS({"name": "a"})


# --------------------------------------------------------------------------- the VFs the planner picked
# the tenants stage's VF settings from its plan (module_utils tenant_plan, run by tenant_domain's tenants)
PLAN_SETTINGS = tenant_plan.plan_vf_settings
PF_ETH, PF_NVME = "0000:0c:00.0", "0000:81:00.0"
TOPOLOGY = {"pci_devices": {
    PF_ETH: {"class": "0x020000", "netdevs": ["enp12s0f0np0"], "virtfns": ["0000:0c:00.2", "0000:0c:00.3", "0000:0c:00.4"]},
    "0000:0c:00.2": {"class": "0x020000", "physfn": PF_ETH}, "0000:0c:00.3": {"class": "0x020000", "physfn": PF_ETH},
    "0000:0c:00.4": {"class": "0x020000", "physfn": PF_ETH},
    PF_NVME: {"class": "0x010802", "netdevs": [], "virtfns": [VF1]}, VF1: {"class": "0x010802", "physfn": PF_NVME},
}}


def placed(vfs):
    return {"vfs": vfs, "vf_pfs": dict((vf, PF_NVME if vf == VF1 else PF_ETH) for vf in vfs)}


@pytest.mark.parametrize("placements, tenants, expected", [
    # the planner's VF counts: each VF its own MAC (derived), the tenant's VLAN, spoof check on, trust off
    ({"a": placed(["0000:0c:00.3", "0000:0c:00.2"])}, [{"name": "a", "vfs": 2, "vlan": 100}],
     [{"pf": PF_ETH, "vfs": [vf("0000:0c:00.2", derived_mac("a", 0), 100), vf("0000:0c:00.3", derived_mac("a", 1), 100)]}]),
    # the tenant's MAC for its first network VF; no VLAN: 0 (a VF given back keeps none of an earlier tenant's)
    ({"a": placed(["0000:0c:00.2", "0000:0c:00.3"])}, [{"name": "a", "vfs": 2, "mac": "52:54:00:00:00:01"}],
     [{"pf": PF_ETH, "vfs": [vf("0000:0c:00.2", "52:54:00:00:00:01", 0), vf("0000:0c:00.3", derived_mac("a", 1), 0)]}]),
    # two tenants on one PF; an NVMe VF (PF without netdev) gets nothing; b's 0c:00.4 is its VF 0 (address order)
    ({"a": placed(["0000:0c:00.2"]), "b": placed([VF1, "0000:0c:00.4"])}, [{"name": "a", "vfs": 1}, {"name": "b", "vfs": 2}],
     [{"pf": PF_ETH, "vfs": [vf("0000:0c:00.2", derived_mac("a", 0), 0), vf("0000:0c:00.4", derived_mac("b", 0), 0)]}]),
    ({"b": placed([VF1])}, [{"name": "b", "vfs": 1}], []),
    ({}, [], []),
])
def test_plan_vf_settings(placements, tenants, expected):
    got = PLAN_SETTINGS({"placements": placements}, tenants, TOPOLOGY)
    assert got == expected
    macs = [v["mac"] for pf in got for v in pf["vfs"]]
    assert len(set(macs)) == len(macs)


def test_plan_vf_settings_needs_a_plan():
    with pytest.raises(InputError, match="expected a plan"):
        PLAN_SETTINGS([], [], TOPOLOGY)


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
    inputs = {"pfs": pfs or [], "tenants": [], "autoprobe": False, "persist": True, "force": False}
    assert [p["pf"] for p in stage_options("sriov", inputs)["pfs"]] == addresses


@pytest.mark.parametrize("pfs, words", [
    ("0000:81:00.0", "expected the PF list \\(gpuvirt_sriov_pfs\\), got str"),
    ([{"num_vfs": 4}], "each of gpuvirt_sriov_pfs needs pf"),
    (["0000:81:00.0"], "each of gpuvirt_sriov_pfs needs pf"),
])
def test_sriov_pf_addresses_name_a_bad_pf_list(pfs, words):
    with pytest.raises(AnsibleFilterError, match=words):
        PF_ADDRESSES(pfs)
