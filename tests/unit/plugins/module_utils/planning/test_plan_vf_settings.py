# -*- coding: utf-8 -*-
"""The tenants stage's VF settings from its plan (module_utils planning/tenant_plan.plan_vf_settings,
run by tenant_domain's ``tenants``): the VFs the planner picked for each tenant's VF count, each with
its own MAC (the tenant's for its first network VF, else derived from the tenant name and the VF's
index in address order), the tenant's VLAN (0 without one), spoof check on and trust off; a VF whose
PF has no netdev gets none. The one place a tenant's VFs get their settings."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac


PLAN_SETTINGS = tenant_plan.plan_vf_settings
VF1 = "0000:81:00.1"
# every VF: spoof checking on, trust off
ON = {"spoofchk": True, "trust": False}


def vf(address, mac, vlan):
    return dict(ON, address=address, mac=mac, vlan=vlan)


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
