# -*- coding: utf-8 -*-
"""tenant_domain against libvirt's built-in test driver (test:///default, domain type
'test', guest arch i686): definitions are real libvirt definitions, parsed and normalised by
libvirt itself."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import tenant_domain

from conftest import run_module  # pylint: disable=import-error

libvirt = pytest.importorskip("libvirt")

URI = "test:///default"
EDU = "0000:82:00.0"
VF1, VF2 = "0000:81:00.1", "0000:81:00.2"


@pytest.fixture
def conn():
    libvirt.registerErrorHandler(lambda *_: None, None)
    handle = libvirt.open(URI)
    yield handle
    handle.close()


@pytest.fixture
def args(conn):
    del conn
    return {"name": "tenant-" + uuid.uuid4().hex[:8], "uri": URI, "domain_type": "test", "arch": "i686",
            "vcpus": 2, "memory_mb": 100, "hugepage_size": "2M", "gpus": [EDU], "vfs": [VF1]}


def xml_of(conn, name):
    return ET.fromstring(conn.lookupByName(name).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))


def hostdevs(root):
    out = []
    for element in root.findall("devices/hostdev"):
        address = element.find("source/address")
        out.append("%04x:%02x:%02x.%x" % tuple(int(address.get(k), 16) for k in ("domain", "bus", "slot", "function")))
    return sorted(out)


def test_defines_the_tenant(conn, args):
    result = run_module(tenant_domain.main, args)
    assert result["changed"] and result["created"] and not result["started"]
    root = xml_of(conn, args["name"])
    assert root.get("type") == "test"
    assert hostdevs(root) == sorted([EDU, VF1])
    assert all(h.get("managed") == "no" for h in root.findall("devices/hostdev"))
    assert root.find("vcpu").text == "2"
    # 100 MiB rounds up to whole 2M pages
    assert root.find("memory").text == str(50 * 2048)
    assert root.find("memoryBacking/hugepages/page").attrib == {"size": "2048", "unit": "KiB"}
    assert not conn.lookupByName(args["name"]).isActive()


def test_defining_twice_changes_nothing(conn, args):
    run_module(tenant_domain.main, args)
    before = conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    again = run_module(tenant_domain.main, args)
    assert not again["changed"]
    assert conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before


def test_check_mode_defines_nothing(conn, args):
    result = run_module(tenant_domain.main, args, check_mode=True, diff=True)
    assert result["changed"] and result["created"]
    assert result["diff"]["before"] == "" and "<hostdev" in result["diff"]["after"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])


def test_network_vf_is_an_interface_with_mac_and_vlan(conn, args):
    args.update(vfs=[VF1, VF2], network_vfs=[VF2], mac="52:54:00:00:00:0B", vlan=100)
    assert run_module(tenant_domain.main, args)["changed"]
    root = xml_of(conn, args["name"])
    assert hostdevs(root) == sorted([EDU, VF1])
    iface = root.find("devices/interface[@type='hostdev']")
    assert iface.find("mac").get("address") == "52:54:00:00:00:0b"
    assert iface.find("vlan/tag").get("id") == "100"
    assert iface.find("source/address").get("function") == "0x2"
    assert not run_module(tenant_domain.main, args)["changed"]
    args["vlan"] = 200
    assert run_module(tenant_domain.main, args)["changed"]
    assert xml_of(conn, args["name"]).find("devices/interface[@type='hostdev']/vlan/tag").get("id") == "200"


def test_disks_are_virtio_with_io_threads(conn, args):
    args["disks"] = [{"path": "/var/lib/libvirt/images/t.qcow2"}, {"path": "/var/lib/libvirt/images/d.raw", "format": "raw"}]
    run_module(tenant_domain.main, args)
    disks = xml_of(conn, args["name"]).findall("devices/disk")
    assert [(d.find("target").get("dev"), d.find("target").get("bus"), d.find("driver").get("io"), d.find("driver").get("type"))
            for d in disks] == [("vda", "virtio", "threads", "qcow2"), ("vdb", "virtio", "threads", "raw")]
    assert not run_module(tenant_domain.main, args)["changed"]


def test_update_changes_only_what_differs(conn, args):
    run_module(tenant_domain.main, args)
    before = xml_of(conn, args["name"])
    args.update(gpus=[], vfs=[VF1, VF2], vcpus=4)
    result = run_module(tenant_domain.main, args, diff=True)
    assert result["changed"] and not result["created"]
    after = xml_of(conn, args["name"])
    assert hostdevs(after) == [VF1, VF2]
    assert after.find("vcpu").text == "4"
    assert after.find("uuid").text == before.find("uuid").text
    assert ET.tostring(after.find("os")) == ET.tostring(before.find("os"))


def test_running_starts_once(conn, args):
    args["state"] = "running"
    result = run_module(tenant_domain.main, args)
    assert result["changed"] and result["started"]
    assert conn.lookupByName(args["name"]).isActive()
    assert not run_module(tenant_domain.main, args)["changed"]


@pytest.mark.parametrize("change, message", [
    ({"gpus": ["82:00.0"]}, "gpus: '82:00.0' is not a PCI address"),
    ({"vfs": [EDU]}, "listed twice"),
    ({"network_vfs": [VF2]}, "network_vfs: 0000:81:00.2 not listed in vfs"),
    ({"mac": "52:54:00"}, "mac: '52:54:00' is not a MAC address"),
    ({"vlan": 5000}, "vlan: 5000 is not a VLAN id"),
    ({"vcpus": 0}, "vcpus: must be at least 1"),
    ({"hugepage_size": "4M"}, "hugepage_size"),
    ({"disks": [{"path": "/a"}, {"path": "/b", "target": "vda"}]}, "target vda used twice"),
])
def test_bad_input_fails_and_defines_nothing(conn, args, change, message):
    args.update(change)
    result = run_module(tenant_domain.main, args)
    assert result.get("failed") and message in result["msg"], result
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])
