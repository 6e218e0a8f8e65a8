# -*- coding: utf-8 -*-
"""device_use: IOMMU-group isolation over fake trees built from real listings
(tests/fixtures/iommu, tests/fixtures/pci), and what marks a device in use by a tenant
(``/dev/vfio/N`` held open, a libvirt domain's host device)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import device_use
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import iommu_groups
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.kernel import cx4lx_no_acs_host, domain_xml, lab_host, v100_pairs_host  # pylint: disable=import-error

# ---------------------------------------------------------------- isolation from real listings


def test_cx4lx_pf_and_vfs_in_one_group_not_viable(tmp_path):
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    topo = read_topology(host.root)
    vfs = topo["pci_devices"]["0000:01:00.0"]["virtfns"]
    assert vfs == ["0000:01:00.2", "0000:01:00.3", "0000:01:00.4", "0000:01:00.5"]
    result = device_use.isolation(topo, vfs)
    assert result["viable"] is False
    assert set(result["groups"].values()) == {1}
    assert any("0000:01:00.2 shares IOMMU group 1 with 0000:01:00.3, 0000:01:00.4, 0000:01:00.5" in r
               for r in result["reasons"])
    assert any("holds 0000:01:00.0, bound to the host driver mlx5_core" in r for r in result["reasons"])


@pytest.mark.parametrize("gpus, viable", [
    (["0000:27:00.0", "0000:43:00.0", "0000:c3:00.0"], True),    # one GPU per group: 3 tenants
    (["0000:27:00.0", "0000:28:00.0"], False),                   # a pair: one tenant only
    (["0000:27:00.0", "0000:28:00.0", "0000:43:00.0", "0000:44:00.0", "0000:c3:00.0", "0000:c4:00.0"], False),
])
def test_v100_pairs_isolation(tmp_path, gpus, viable):
    host, _kernel = v100_pairs_host(tmp_path)
    assert device_use.isolation(read_topology(host.root), gpus)["viable"] is viable


def test_v100_each_gpu_shares_with_its_pair(tmp_path):
    host, _kernel = v100_pairs_host(tmp_path)
    topo = read_topology(host.root)
    assert iommu_groups.group_endpoints(topo, "0000:27:00.0") == ["0000:28:00.0"]
    assert iommu_groups.group_endpoints(topo, "0000:c4:00.0") == ["0000:c3:00.0"]


# ---------------------------------------------------------------- in use
def test_libvirt_domain_xml_marks_device_in_use(tmp_path):
    host, _kernel = lab_host(tmp_path)
    host.write("/etc/libvirt/qemu/tenant-a.xml",
               "<domain type='kvm'><name>tenant-a</name><devices><hostdev mode='subsystem' type='pci' managed='yes'>"
               "<source><address domain='0x0000' bus='0x82' slot='0x00' function='0x0'/></source></hostdev>"
               "</devices></domain>")
    fs = Sysfs(host.root)
    assert device_use.libvirt_domains_using(fs, "0000:82:00.0") == ["tenant-a"]
    assert device_use.libvirt_domains_using(fs, "0000:81:00.0") == []
    assert device_use.usage_of(fs, read_topology(host.root), "0000:82:00.0") == ["attached to libvirt domain tenant-a"]


@pytest.mark.parametrize("path, text", [
    ("/etc/libvirt/qemu/tenant-net.xml", domain_xml("tenant-net", "0000:81:00.2")),            # defined, stopped
    ("/run/libvirt/qemu/tenant-net.xml",                                                       # running: status file
     "<domstatus state='running'>%s</domstatus>" % domain_xml("tenant-net", "0000:81:00.2")),
    ("/run/libvirt/qemu/tenant-net.xml",
     "<domstatus state='running'>%s</domstatus>" % domain_xml("tenant-net", "0000:81:00.2", interface=False)),
])
def test_vf_held_by_a_domain_file_is_in_use(tmp_path, path, text):
    host, _kernel = lab_host(tmp_path)
    host.write(path, text)
    assert device_use.libvirt_domains_using(Sysfs(host.root), "0000:81:00.2") == ["tenant-net"]
    assert device_use.libvirt_domains_using(Sysfs(host.root), "0000:81:00.3") == []


def test_a_file_that_is_not_xml_holds_nothing(tmp_path):
    host, _kernel = lab_host(tmp_path)
    host.write("/etc/libvirt/qemu/broken.xml", "<domain")
    assert device_use.libvirt_domains_using(Sysfs(host.root), "0000:81:00.2") == []


@pytest.mark.parametrize("text, expected", [
    ("0000:81:00.0", "0000:81:00.0"),
    ("81:00.0", "0000:81:00.0"),
    ("enp1s0f0np0", "0000:01:00.0"),
    ("nosuchnic", None),
])
def test_pci_function_of_address_or_netdev(tmp_path, text, expected):
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    assert device_use.pci_function_of(read_topology(host.root), text) == expected


def test_pfs_kept_for_vfs_are_the_calls_and_those_with_a_vf_a_tenant_holds(tmp_path):
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    fs = Sysfs(host.root)
    assert device_use.pfs_kept_for_vfs(fs, read_topology(host.root), []) == {}
    kept = device_use.pfs_kept_for_vfs(fs, read_topology(host.root), ["0000:01:00.1"])
    assert list(kept) == ["0000:01:00.1"] and "this call makes or binds for tenants" in kept["0000:01:00.1"]
    host.write("/etc/libvirt/qemu/tenant-a.xml", domain_xml("tenant-a", "0000:01:00.3"))
    kept = device_use.pfs_kept_for_vfs(fs, read_topology(host.root), [])
    assert kept == {"0000:01:00.0": "an SR-IOV PF whose VF 0000:01:00.3 a tenant holds, so it stays on its host driver"}


def test_pfs_kept_for_vfs_a_vf_whose_vfio_group_is_held_open(tmp_path):
    """A VF on vfio-pci whose /dev/vfio/<group> a process holds (a running QEMU) keeps its PF, as usage_of says."""
    host, kernel = cx4lx_no_acs_host(tmp_path)
    fs = Sysfs(host.root)
    kernel.bind("0000:01:00.4", "vfio-pci")
    topology = read_topology(host.root)
    assert device_use.pfs_kept_for_vfs(fs, topology, []) == {}
    group = topology["pci_devices"]["0000:01:00.4"]["iommu_group"]
    os.makedirs(host.p("/proc/777/fd"))
    os.symlink(host.p("/dev/vfio/%s" % group), host.p("/proc/777/fd/31"))
    assert device_use.usage_of(fs, topology, "0000:01:00.4")
    assert device_use.pfs_kept_for_vfs(fs, topology, []) == {
        "0000:01:00.0": "an SR-IOV PF whose VF 0000:01:00.4 a tenant holds, so it stays on its host driver"}
