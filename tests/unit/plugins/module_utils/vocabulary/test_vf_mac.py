# -*- coding: utf-8 -*-
"""The MAC of each tenant VF: derived from the tenant name and VF index when not given, the
same on every run, unique per tenant and VF, locally administered and unicast."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import vf_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

TENANTS = ["tenant-a", "tenant-b", "inference-01", "inference-10", "a", "b", "ü-tenant"]


def test_stable_across_calls_and_processes():
    # the value is part of the contract: the same MAC on every host and run; sha256 of
    # "gpuvirt.tenancy/tenant-a/0" begins a2 54 ad 68 eb 6a (sha256sum); 0xa2 is already unicast, locally administered
    assert vf_mac.derived_mac("tenant-a", 0) == vf_mac.derived_mac("tenant-a", 0)
    assert vf_mac.derived_mac("tenant-a", 0) == "a2:54:ad:68:eb:6a"


@pytest.mark.parametrize("tenant, index", list(itertools.product(TENANTS, range(8))))
def test_locally_administered_unicast(tenant, index):
    mac = vf_mac.derived_mac(tenant, index)
    first = int(mac[:2], 16)
    assert first & 0x02 and not first & 0x01
    assert vf_mac.is_unicast_local(mac)


def test_unique_per_tenant_and_vf():
    macs = [vf_mac.derived_mac("tenant-%d" % t, i) for t in range(300) for i in range(16)]
    assert len(set(macs)) == len(macs)


@pytest.mark.parametrize("mac, expected", [
    ("02:00:00:00:00:01", True), ("52:54:00:00:00:01", True), ("00:11:22:33:44:55", False),
    ("03:00:00:00:00:01", False), ("not a mac", False), (None, False),
])
def test_is_unicast_local(mac, expected):
    assert vf_mac.is_unicast_local(mac) is expected


VF1, VF2, VF3 = "0000:0c:00.2", "0000:0c:00.3", "0000:0c:01.0"


@pytest.mark.parametrize("addresses, mac, network, expected", [
    # no MAC given: each VF its derived one, numbered in PCI address order whatever the input order
    ([VF3, VF1], None, None, {VF1: vf_mac.derived_mac("t", 0), VF3: vf_mac.derived_mac("t", 1)}),
    # one MAC: the first network VF; the others derived
    ([VF1, VF2], "52:54:00:AA:00:01", None, {VF1: "52:54:00:aa:00:01", VF2: vf_mac.derived_mac("t", 1)}),
    # a list: one per network VF, a null entry derived
    ([VF1, VF2, VF3], ["52:54:00:00:00:01", None], None,
     {VF1: "52:54:00:00:00:01", VF2: vf_mac.derived_mac("t", 1), VF3: vf_mac.derived_mac("t", 2)}),
    # only network VFs get a MAC; the index is the VF's among all of the tenant's VFs
    ([VF1, VF2], "52:54:00:00:00:01", {VF2}, {VF2: "52:54:00:00:00:01"}),
    ([VF1, VF2], None, {VF2}, {VF2: vf_mac.derived_mac("t", 1)}),
])
def test_tenant_vf_macs(addresses, mac, network, expected):
    assert vf_mac.tenant_vf_macs("t", addresses, mac=mac, network=network) == expected


PF_ETH, PF_NVME = "0000:0c:00.0", "0000:81:00.0"
TOPOLOGY = {"pci_devices": {
    PF_ETH: {"class": "0x020000", "netdevs": ["enp12s0f0np0"], "virtfns": [VF1]},
    VF1: {"class": "0x020000", "physfn": PF_ETH, "netdevs": []},
    PF_NVME: {"class": "0x010802", "netdevs": [], "virtfns": ["0000:81:00.1"]},
    "0000:81:00.1": {"class": "0x010802", "physfn": PF_NVME},
    "0000:3b:00.0": {"class": "0x020700", "netdevs": ["ib0"], "virtfns": ["0000:3b:00.1"]},
    "0000:3b:00.1": {"class": "0x020700", "physfn": "0000:3b:00.0"},
    "0000:5b:00.0": {"class": "0x020000", "netdevs": [], "virtfns": []},
    # a VPI port in InfiniBand mode that the boot stage sets to Ethernet (link_type eth): the projection's mark
    "0000:3c:00.0": {"class": "0x020700", "netdevs": ["ibp1"], "virtfns": ["0000:3c:00.1"], "netdev_after_boot": True},
    "0000:3c:00.1": {"class": "0x020700", "physfn": "0000:3c:00.0"},
    # an Ethernet-class PF whose netdev is IPoIB (type 32): an InfiniBand port all the same
    "0000:3d:00.0": {"class": "0x020000", "netdevs": ["ibp2"], "virtfns": []},
}, "netdevs": {"ibp2": {"type": 32}, "ibp1": {"type": 32}, "enp12s0f0np0": {"type": 1}}}


@pytest.mark.parametrize("address, pf, expected", [
    (VF1, None, True),                      # Ethernet VF of a PF with a netdev
    ("0000:81:00.1", None, False),          # an NVMe VF (the lab's): a plain hostdev
    ("0000:3b:00.1", None, False),          # an InfiniBand VF: no MAC/VLAN
    ("0000:0c:00.3", PF_ETH, True),         # not created yet (check mode): judged by its PF
    ("0000:5b:00.1", "0000:5b:00.0", False),  # a PF without a netdev (driver not loaded)
    ("0000:3c:00.1", None, True),           # an InfiniBand port the boot stage sets to Ethernet: as it will be then
    ("0000:3c:00.2", "0000:3c:00.0", True),  # the same, a VF not created yet
    ("0000:3d:00.1", "0000:3d:00.0", False),  # an IPoIB netdev takes no VF MAC or VLAN
])
def test_is_network_vf(address, pf, expected):
    assert vf_mac.is_network_vf(TOPOLOGY, address, pf) is expected


def test_tenant_network_vfs():
    got = vf_mac.tenant_network_vfs(TOPOLOGY, "t", ["0000:81:00.1", VF1], mac=None, vlan=100)
    assert got == [{"address": VF1, "pf": PF_ETH, "mac": vf_mac.derived_mac("t", 0), "vlan": 100}]


@pytest.mark.parametrize("vfs, vf_pfs, options, ethernet, words", [
    (["0000:3b:00.1"], None, {"vlan": 100}, (), "PF 0000:3b:00.0 is an InfiniBand port (PCI class 0x020700, netdev ib0)"),
    (["0000:5b:00.1"], {"0000:5b:00.1": "0000:5b:00.0"}, {"mac": "02:00:00:00:00:01"}, (), "PF 0000:5b:00.0 has no netdev"),
    (["0000:3d:00.1"], {"0000:3d:00.1": "0000:3d:00.0"}, {"vlan": 7}, (), "PF 0000:3d:00.0 is an InfiniBand port"),
])
def test_a_vlan_or_mac_a_vf_would_drop_is_refused(vfs, vf_pfs, options, ethernet, words):
    """Never a setting dropped without a word: a network-class VF given as a plain hostdev refuses the tenant's vlan/mac,
    naming the tenant, the VF, the PF and the fix."""
    with pytest.raises(InputError) as refused:
        vf_mac.tenant_network_vfs(TOPOLOGY, "t", vfs, vf_pfs, **options)
    message = str(refused.value)
    assert message.startswith("tenant t: its %s cannot be set on VF %s: " % (next(iter(options)), vfs[0])), message
    assert words in message and "Set link_type: eth for" in message and message.endswith("Nothing was changed")


@pytest.mark.parametrize("vfs, vf_pfs, options", [
    (["0000:3b:00.1"], None, {}),                                   # nothing asked, nothing lost
    (["0000:81:00.1"], None, {"vlan": 100}),                        # an NVMe VF is no network function
    (["0000:3c:00.1"], None, {"vlan": 100}),                        # set to Ethernet by this run's boot stage: marked by the projection
])
def test_settings_that_reach_their_vf_pass(vfs, vf_pfs, options):
    vf_mac.check_settings_reach(TOPOLOGY, "t", vfs, vf_pfs, **options)


def test_a_port_set_to_ethernet_by_the_boot_stage_gets_its_vlan():
    got = vf_mac.tenant_network_vfs(TOPOLOGY, "t", ["0000:3c:00.1"], vlan=101)
    assert got == [{"address": "0000:3c:00.1", "pf": "0000:3c:00.0", "mac": vf_mac.derived_mac("t", 0), "vlan": 101}]
