# -*- coding: utf-8 -*-
"""tenant_request: what bounds a tenant on a host and the isolation rules over all assignments, pure."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.tenant_request import Claims, limits_of_capabilities, limits_of_topology, vf_security

CAPS = ("<capabilities><host><topology><cells num='2'>"
        "<cell id='0'><memory unit='KiB'>2097152</memory><cpus num='2'><cpu id='0'/><cpu id='1'/></cpus></cell>"
        "<cell id='1'><memory unit='KiB'>4194304</memory><cpus num='2'><cpu id='2'/><cpu id='3'/></cpus></cell>"
        "</cells></topology></host></capabilities>")


def test_limits_from_the_host_model_and_from_libvirt():
    topology = {"cpus": [{"id": 0}, {"id": 1, "online": False}, {"id": 2}],
                "numa_nodes": [{"id": 0, "cpus": [0, 1], "memory_mb": 1024}, {"id": 1, "cpus": [2], "memory_mb": 2048}]}
    assert limits_of_topology(topology) == {"cpus": 2, "memory_mb": 3072}
    assert limits_of_topology({}) == {"cpus": None, "memory_mb": None}
    assert limits_of_capabilities(CAPS) == {"cpus": 4, "memory_mb": 6144}


# a host model: GPUs 07 and 08 share group 5; PF 41:00.0 (group 9) has VFs 41:00.2 and .3 (groups 10, 11)
TOPOLOGY = {"pci_devices": {
    "0000:07:00.0": {"iommu_group": 5, "class": "0x030200"}, "0000:08:00.0": {"iommu_group": 5, "class": "0x030200"},
    "0000:06:00.0": {"iommu_group": 5, "class": "0x060400"},
    "0000:41:00.0": {"iommu_group": 9, "class": "0x020000", "virtfns": ["0000:41:00.2", "0000:41:00.3"]},
    "0000:41:00.2": {"iommu_group": 10, "class": "0x020000", "physfn": "0000:41:00.0"},
    "0000:41:00.3": {"iommu_group": 11, "class": "0x020000", "physfn": "0000:41:00.0"}}}


def claims_of(*tenants, **held):
    claims = Claims(TOPOLOGY)
    for name, (devices, macs) in held.items():
        claims.hold(name, devices, macs)
    out = []
    for name, devices, macs in tenants:
        claims.add(name, devices, macs=macs)
        out.append(claims.check(name))
    return out


def test_a_group_goes_whole_to_one_tenant():
    assert claims_of(("a", ["0000:07:00.0", "0000:08:00.0"], {})) == [([], [])]
    errors = claims_of(("a", ["0000:07:00.0"], {}), ("b", ["0000:08:00.0"], {}))[1][0]
    assert errors and "0000:08:00.0 (b) and 0000:07:00.0 (a) share IOMMU group 5" in errors[0]
    # the bridge of the group stays with the host; an endpoint no one takes is not a split
    assert claims_of(("a", ["0000:07:00.0"], {})) == [([], [])]
    held = claims_of(("b", ["0000:08:00.0"], {}), other=(["0000:07:00.0"], []))[0][1]
    assert held and "0000:07:00.0 (domain other)" in held[0]


def test_a_pf_and_its_vfs_are_not_split():
    errors = claims_of(("a", ["0000:41:00.0"], {}), ("b", ["0000:41:00.2"], {}))[1][0]
    assert "VF 0000:41:00.2 (b) and its PF 0000:41:00.0 (a) are split" in errors[0]
    errors = claims_of(("a", ["0000:41:00.0", "0000:41:00.2"], {}))[0][0]
    assert "has VFs 0000:41:00.3 that stay with the host" in errors[0]
    assert claims_of(("a", ["0000:41:00.0", "0000:41:00.2", "0000:41:00.3"], {})) == [([], [])]
    # VFs to two tenants with the PF on the host: SR-IOV as meant
    assert claims_of(("a", ["0000:41:00.2"], {}), ("b", ["0000:41:00.3"], {})) == [([], []), ([], [])]


def test_a_device_twice_and_a_mac_twice():
    claims = Claims(TOPOLOGY)
    claims.add("a", ["0000:41:00.2"])
    with pytest.raises(InputError, match="0000:41:00.2 is also given to a"):
        claims.add("b", ["0000:41:00.2"])
    first, second = claims_of(("a", ["0000:41:00.2"], {"0000:41:00.2": "52:54:00:00:00:01"}),
                              ("b", ["0000:41:00.3"], {"0000:41:00.3": "52:54:00:00:00:01"}))
    assert first == ([], []) and "MAC 52:54:00:00:00:01 of VF 0000:41:00.3 is also the MAC of VF 0000:41:00.2 (a)" in second[0][0]
    held = claims_of(("b", ["0000:41:00.3"], {"0000:41:00.3": "52:54:00:00:00:01"}), old=([], ["52:54:00:00:00:01"]))[0][1]
    assert "already the MAC of an interface of domain old" in held[0]


def test_released_domains_free_what_they_held():
    claims = Claims(TOPOLOGY)
    claims.hold("old", ["0000:07:00.0"], ["52:54:00:00:00:01"])
    claims.release("old")
    claims.add("a", ["0000:08:00.0"], macs={"0000:08:00.0": "52:54:00:00:00:01"})
    assert claims.check("a") == ([], [])


def test_weak_vf_settings_need_the_tenants_opt_in():
    settings = [("sriov_vfs.vfs[0]", "0000:41:00.2", {"spoofchk": False}), ("sriov_vfs.vfs[1]", "0000:41:00.3", {"trust": False})]
    with pytest.raises(InputError, match=r"sriov_vfs.vfs\[0\]: spoof checking off for VF 0000:41:00.2 of tenant a"):
        vf_security(settings, {"0000:41:00.2": "a"}, set())
    warnings = vf_security(settings, {"0000:41:00.2": "a"}, {"a"})
    assert warnings == ["VF 0000:41:00.2 (tenant a, relax_vf_isolation: true) has spoof checking off: its guest can send with "
                        "another MAC or VLAN (or ask the PF for promiscuous mode)"]
