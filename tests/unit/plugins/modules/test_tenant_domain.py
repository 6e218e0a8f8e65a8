# -*- coding: utf-8 -*-
"""tenant_domain against libvirt's built-in test driver (conftest ``libvirt_conn``, domain type
'test', guest arch i686): definitions are real libvirt definitions, parsed and normalised by
libvirt itself."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import QEMU_NS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac
from ansible_collections.gpuvirt.tenancy.plugins.modules import numa_pin, sriov_vfs, tenant_domain

from conftest import FIXTURES, LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host, lab_host_with_vfs, v100_pairs_host  # pylint: disable=import-error
from fakes.paths import STANDINS  # pylint: disable=import-error
from fakes.host_tree import BAR_MEM32, BAR_MEM64_PREFETCH, FakeHost, write_resource  # pylint: disable=import-error
EDU = "0000:82:00.0"
VF1, VF2 = "0000:81:00.1", "0000:81:00.2"


@pytest.fixture
def conn(libvirt_conn):
    return libvirt_conn


@pytest.fixture
def args(conn):
    del conn
    # mmio_window_mb 0: the devices are not in this machine's sysfs (the window from their BARs
    # is tested on a host tree below)
    return {"name": "tenant-" + uuid.uuid4().hex[:8], "uri": URI, "domain_type": "test", "arch": "i686",
            "vcpus": 2, "memory_mb": 100, "hugepage_size": "2M", "gpus": [EDU], "vfs": [VF1], "mmio_window_mb": 0}


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
    assert result["changed"] and result["created"] and not result["powered_on"]
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
    assert result["diff"][0]["before"] == "" and "<hostdev" in result["diff"][0]["after"]
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
    assert result["changed"] and result["powered_on"]
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


# --------------------------------------------------------------------------- lifecycle: resize, QoS, removal
BATCH = {"cpu_shares": 256, "cpu_period": 100000, "cpu_quota": 50000,
         "iotune": {"total_iops_sec": 500, "total_bytes_sec": 52428800}}


def cputune(root):
    return dict((child.tag, int(child.text)) for child in root.findall("cputune/*") if child.tag in ("shares", "period", "quota"))


def iotune(root):
    return dict((child.tag, int(child.text)) for child in root.findall("devices/disk/iotune/*"))


def test_max_vcpus_leaves_room_to_grow(conn, args):
    args.update(vcpus=2, max_vcpus=4)
    run_module(tenant_domain.main, args)
    vcpu = xml_of(conn, args["name"]).find("vcpu")
    assert (vcpu.text, vcpu.get("current")) == ("4", "2")
    assert not run_module(tenant_domain.main, args)["changed"]


def test_running_tenant_grows_live_within_its_maximum(conn, args):
    args.update(vcpus=1, max_vcpus=4, state="running", live=True)
    run_module(tenant_domain.main, args)
    args["vcpus"] = 3
    result = run_module(tenant_domain.main, args, diff=True)
    assert result["changed"] and result["live_changed"] and not result["restart_required"]
    assert result["diff"][1]["before"] == "vcpus: 1\n" and result["diff"][1]["after"] == "vcpus: 3\n"
    domain = conn.lookupByName(args["name"])
    assert domain.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE) == 3
    assert xml_of(conn, args["name"]).find("vcpu").get("current") == "3"
    assert not run_module(tenant_domain.main, args)["changed"]


def test_growth_past_the_running_maximum_asks_for_a_restart(conn, args):
    args.update(vcpus=2, state="running", live=True)
    run_module(tenant_domain.main, args)
    args["vcpus"] = 3
    result = run_module(tenant_domain.main, args)
    assert result["changed"] and result["restart_required"] and not result["live_changed"]
    assert any("maximum is 2" in w and "restart" in w for w in result["restart_reasons"])
    domain = conn.lookupByName(args["name"])
    assert domain.isActive() and domain.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE) == 2
    assert xml_of(conn, args["name"]).find("vcpu").text == "3"


def test_memory_change_of_a_running_tenant_asks_for_a_restart(conn, args):
    args.update(state="running", live=True)
    run_module(tenant_domain.main, args)
    args["memory_mb"] = 200
    result = run_module(tenant_domain.main, args)
    assert result["restart_required"] and any("memory" in w for w in result["restart_reasons"])
    assert conn.lookupByName(args["name"]).isActive()


def test_batch_qos_in_the_definition_then_online_uncaps(conn, args):
    args.update(disks=[{"path": "/var/lib/libvirt/images/b.raw", "format": "raw"}], qos=BATCH)
    run_module(tenant_domain.main, args)
    root = xml_of(conn, args["name"])
    assert cputune(root) == {"shares": 256, "period": 100000, "quota": 50000}
    assert iotune(root) == {"total_bytes_sec": 52428800, "total_iops_sec": 500}
    assert not run_module(tenant_domain.main, args)["changed"]
    args["qos"] = {"cpu_shares": 1024}
    assert run_module(tenant_domain.main, args)["changed"]
    root = xml_of(conn, args["name"])
    assert cputune(root) == {"shares": 1024} and iotune(root) == {}
    del args["qos"]
    assert not run_module(tenant_domain.main, args)["changed"]
    assert cputune(xml_of(conn, args["name"])) == {"shares": 1024}


def test_qos_in_check_mode_shows_the_xml_and_writes_nothing(conn, args):
    args["disks"] = [{"path": "/var/lib/libvirt/images/c.raw", "format": "raw"}]
    run_module(tenant_domain.main, args)
    before = conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    result = run_module(tenant_domain.main, dict(args, qos=BATCH, vcpus=3), check_mode=True, diff=True)
    assert result["changed"]
    after = ET.fromstring(result["diff"][0]["after"])
    assert cputune(after)["quota"] == 50000 and iotune(after)["total_iops_sec"] == 500 and after.find("vcpu").text == "3"
    assert "<quota>" not in result["diff"][0]["before"]
    assert conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before


@pytest.mark.parametrize("qos, message", [
    ({"cpu_quota": 50000}, "qos.cpu_quota: a quota needs its period"),
    ({"cpu_shares": 1}, "qos.cpu_shares: 1 is outside 2-262144"),
    ({"iotune": {"total_iops_sec": 10, "read_iops_sec": 5}}, "total_iops_sec cannot be set with read_iops_sec"),
    ({"iotune": {"write_bytes_sec": -1}}, "qos.iotune.write_bytes_sec: -1 is negative"),
])
def test_bad_qos_fails_and_defines_nothing(conn, args, qos, message):
    result = run_module(tenant_domain.main, dict(args, qos=qos))
    assert result.get("failed") and message in result["msg"], result
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])


def test_max_vcpus_below_vcpus_is_refused(conn, args):
    result = run_module(tenant_domain.main, dict(args, vcpus=4, max_vcpus=2))
    assert result.get("failed") and "max_vcpus: 2 is below vcpus 4" in result["msg"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])


def test_absent_shuts_down_undefines_and_lists_the_released_devices(conn, args):
    args["state"] = "running"
    run_module(tenant_domain.main, args)
    gone = {"name": args["name"], "uri": URI, "state": "absent"}
    check = run_module(tenant_domain.main, gone, check_mode=True, diff=True)
    assert check["changed"] and check["removed"] and check["stopped"] and check["diff"][0]["after"] == ""
    assert conn.lookupByName(args["name"]).isActive()
    result = run_module(tenant_domain.main, gone)
    assert result["removed"] and result["stopped"] and not result["forced_off"]
    assert sorted(result["released_devices"]) == sorted([EDU, VF1])
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])
    again = run_module(tenant_domain.main, gone)
    assert not again["changed"] and not again["removed"]


def test_absent_needs_no_size(conn):
    result = run_module(tenant_domain.main, {"name": "never-defined", "uri": URI, "state": "absent"})
    assert not result["changed"]
    del conn


def test_defined_needs_a_size(conn):
    result = run_module(tenant_domain.main, {"name": "t", "uri": URI, "state": "defined"})
    assert result.get("failed") and "vcpus" in result["msg"] and "memory_mb" in result["msg"]
    del conn


def test_runs_on_an_injected_host(conn, args, tmp_path):
    """The one host seam: a Host over a temporary tree, nothing patched; libvirt from ``uri``."""
    host = Host(str(tmp_path), commands=RecordedCommands())
    result = run_module(tenant_domain.main, args, host=host)
    assert result["changed"] and result["created"]
    assert hostdevs(xml_of(conn, args["name"])) == sorted([EDU, VF1])
    assert host.commands.calls == []


# --------------------------------------------------------------------------- define and pin in one call
PINS = {"vcpu_pins": {"0": "2", "1": "3"}, "emulator_cpus": "4", "nodeset": "0"}


def pins_of(root):
    return ([(p.get("vcpu"), p.get("cpuset")) for p in root.findall("cputune/vcpupin")],
            root.find("cputune/emulatorpin").get("cpuset"), root.find("numatune/memory").attrib)


def live_pins(domain):
    return [[cpu for cpu, on in enumerate(cpus) if on] for cpus in domain.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)]


def test_defines_and_pins_in_one_call(conn, args):
    args.update(PINS, qos={"cpu_shares": 512})
    result = run_module(tenant_domain.main, args)
    assert result["changed"] and result["created"] and not result["restart_required"]
    root = xml_of(conn, args["name"])
    assert pins_of(root) == ([("0", "2"), ("1", "3")], "4", {"mode": "strict", "nodeset": "0"})
    assert cputune(root) == {"shares": 512}
    assert not run_module(tenant_domain.main, args)["changed"]


def test_pins_are_checked_against_the_host_and_the_new_vcpus(conn, args):
    for change, message in [({"vcpu_pins": {"0": "99"}}, "vcpu_pins[0]: CPU(s) 99 are not on this host"),
                            ({"vcpu_pins": {"2": "1"}}, "vcpu_pins: vCPU(s) 2 do not exist; the domain has 2"),
                            ({"nodeset": "3"}, "nodeset: NUMA node(s) 3 do not exist on this host")]:
        result = run_module(tenant_domain.main, dict(args, **change))
        assert result.get("failed") and message in result["msg"], result
        with pytest.raises(libvirt.libvirtError):
            conn.lookupByName(args["name"])


def test_check_mode_resize_shows_the_new_vcpu_pinned(conn, args):
    args.update(PINS, vcpus=2, max_vcpus=3)
    run_module(tenant_domain.main, args)
    before = conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    grown = dict(args, vcpus=3, vcpu_pins={"0": "2", "1": "3", "2": "5"})
    result = run_module(tenant_domain.main, grown, check_mode=True, diff=True)
    assert result["changed"] and not result.get("warnings")
    assert '<vcpupin vcpu="2" cpuset="5" />' in result["diff"][0]["after"]
    assert '<vcpu placement="static">3</vcpu>' in result["diff"][0]["after"]
    assert conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before


def test_running_tenant_grows_and_pins_the_new_vcpu_live(conn, args):
    args.update(PINS, vcpu_pins={"0": "2"}, vcpus=1, max_vcpus=2, state="running", live=True)
    assert run_module(tenant_domain.main, args)["powered_on"]
    domain = conn.lookupByName(args["name"])
    assert live_pins(domain) == [[2]]
    args.update(vcpus=2, vcpu_pins={"0": "2", "1": "6"})
    result = run_module(tenant_domain.main, args, diff=True)
    assert result["changed"] and result["live_changed"] and not result["restart_required"], result
    assert domain.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE) == 2
    assert live_pins(domain) == [[2], [6]]
    assert result["diff"][1]["after"].startswith("vcpus: 2\n")
    assert pins_of(xml_of(conn, args["name"]))[0] == [("0", "2"), ("1", "6")]
    assert not run_module(tenant_domain.main, args)["changed"]


def test_running_tenant_repinned_without_live_asks_for_a_restart(conn, args):
    args.update(PINS, state="running")
    run_module(tenant_domain.main, args)
    before = live_pins(conn.lookupByName(args["name"]))
    result = run_module(tenant_domain.main, dict(args, vcpu_pins={"0": "5", "1": "3"}))
    assert result["changed"] and result["restart_required"] and not result["live_changed"]
    assert any("CPU pins" in reason for reason in result["restart_reasons"])
    assert live_pins(conn.lookupByName(args["name"])) == before
    assert pins_of(xml_of(conn, args["name"]))[0] == [("0", "5"), ("1", "3")]


# --------------------------------------------------------------------------- UEFI, the 64-bit MMIO window, VF interfaces
def fwcfg(root):
    """fw_cfg name -> value of the definition's QEMU ``-fw_cfg name=N,string=V`` arguments."""
    args = [a.get("value") for a in root.findall("{%s}commandline/{%s}arg" % (QEMU_NS, QEMU_NS))]
    pairs = (dict(part.split("=", 1) for part in value.split(",")) for flag, value in zip(args, args[1:]) if flag == "-fw_cfg")
    return dict((pair["name"], pair["string"]) for pair in pairs)


@pytest.fixture
def a100_tree(tmp_path):
    """A host tree where EDU is an A100 80GB (BAR1 128 GiB, BAR3 32 MiB), 0000:83:00.0 an A100
    40GB (BAR1 64 GiB) and VF1/VF2 ConnectX VFs (one 2 MiB 64-bit BAR each)."""
    tree = FakeHost(tmp_path)
    bars = {EDU: {0: (0xF6000000, 16 << 20, BAR_MEM32), 1: (0x2000000000, 128 << 30, BAR_MEM64_PREFETCH),
                  3: (0x4000000000, 32 << 20, BAR_MEM64_PREFETCH)},
            "0000:83:00.0": {0: (0xF4000000, 16 << 20, BAR_MEM32), 1: (0x6000000000, 64 << 30, BAR_MEM64_PREFETCH),
                             3: (0x7000000000, 32 << 20, BAR_MEM64_PREFETCH)},
            VF1: {0: (0x8000000000, 2 << 20, BAR_MEM64_PREFETCH)}, VF2: {0: (0x8000200000, 2 << 20, BAR_MEM64_PREFETCH)}}
    for address, resources in bars.items():
        tree.add_pci(address, "0x10de", "0x20b5", "0x030200")
        write_resource(tree, address, resources)
    return Host(str(tmp_path), commands=RecordedCommands())


@pytest.mark.parametrize("gpus, window", [
    ([EDU], "262144"),                      # 80GB: 128 GiB + 32 MiB + headroom -> 256 GiB
    (["0000:83:00.0"], "131072"),           # 40GB: 64 GiB + 32 MiB + headroom -> 128 GiB
    ([EDU, "0000:83:00.0"], "262144"),      # 192 GiB + 64 MiB + headroom -> 256 GiB
    ([], None),                             # a VF alone: OVMF's default window
])
def test_uefi_tenant_gets_a_window_for_its_bars(conn, args, a100_tree, gpus, window):
    del args["mmio_window_mb"]
    args.update(gpus=gpus, machine="pc")
    result = run_module(tenant_domain.main, args, host=a100_tree)
    assert result["changed"] and result["mmio_window_mb"] == (int(window) if window else None)
    # the definition asked for; libvirt's test driver keeps no <qemu:commandline> (the QEMU
    # driver does: the lab's verify_uefi.yml), and says so
    assert fwcfg(ET.fromstring(result["xml"])).get("opt/ovmf/X-PciMmio64Mb") == window
    assert any("only libvirt's QEMU driver keeps; test:///default drops it" in w for w in result.get("warnings", [])) == bool(window)
    root = xml_of(conn, args["name"])
    assert root.find("os").get("firmware") == "efi"
    assert root.find("os/firmware/feature[@name='secure-boot']").get("enabled") == "no"
    assert not run_module(tenant_domain.main, args, host=a100_tree)["changed"]


@pytest.mark.parametrize("damage", [
    lambda text: "",                                           # empty
    lambda text: "\n".join(text.split("\n")[:3]),              # truncated to three lines
    lambda text: text[:len(text) // 2],                        # cut in the middle of a line
    lambda text: "garbage\n" * 13,                             # garbage
])
def test_a_damaged_resource_file_warns_like_a_missing_one(conn, args, a100_tree, damage):
    """The tenants stage (and the preview, which runs it over a capture): a GPU whose resource
    file is not whole is named in a warning, not taken as a GPU without 64-bit BARs."""
    del args["mmio_window_mb"]
    args.update(gpus=[EDU], vfs=[], machine="pc")
    path = os.path.join(a100_tree.root, "sys/bus/pci/devices/%s/resource" % EDU)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(damage(text))
    result = run_module(tenant_domain.main, args, host=a100_tree)
    assert result["mmio_window_mb"] is None
    assert any(w.startswith("no whole sysfs resource file for %s (" % EDU) and "give mmio_window_mb" in w
               for w in result["warnings"]), result["warnings"]


def test_on_a_driver_without_qemu_arguments_the_window_does_not_flap(conn, args, a100_tree):
    del args["mmio_window_mb"]
    run_module(tenant_domain.main, args, host=a100_tree)
    assert fwcfg(xml_of(conn, args["name"])) == {}
    smaller = dict(args, gpus=["0000:83:00.0"])
    # the device changes, the window that the test driver cannot keep is not chased
    result = run_module(tenant_domain.main, smaller, host=a100_tree)
    assert result["changed"] and fwcfg(ET.fromstring(result["xml"])) == {}
    assert not run_module(tenant_domain.main, smaller, host=a100_tree)["changed"]


def test_a_window_given_wins_and_unknown_bars_are_named(conn, args, tmp_path):
    # an Intel host without these devices (the machine the tests run on may be an AMD one, where a
    # window below 1 TiB is refused: test_on_an_amd_host_the_window_is_placed_above_the_hypertransport_hole)
    FakeHost(tmp_path).set_cpuinfo("GenuineIntel")
    host = Host(str(tmp_path), commands=RecordedCommands())
    del args["mmio_window_mb"]
    result = run_module(tenant_domain.main, args, host=host)
    # their BARs are unknown, and said so
    assert any("no whole sysfs resource file for 0000:82:00.0, 0000:81:00.1" in w for w in result["warnings"]), result
    conn.lookupByName(args["name"]).undefine()
    result = run_module(tenant_domain.main, dict(args, mmio_window_mb=65536), host=host)
    assert fwcfg(ET.fromstring(result["xml"])) == {"opt/ovmf/X-PciMmio64Mb": "65536"}


def test_on_an_amd_host_the_window_is_placed_above_the_hypertransport_hole(conn, args, a100_tree):
    """An AMD host: the window is at least 1 TiB, which OVMF places above
    0xfd00000000-0xffffffffff, with the guest's address bits the host's (<maxphysaddr>); a smaller
    window given is refused, nothing defined; 0 (no entry) is the caller's to give."""
    FakeHost(a100_tree.root).set_cpuinfo("AuthenticAMD")
    del args["mmio_window_mb"]
    args.update(gpus=[EDU], machine="pc")
    failed = run_module(tenant_domain.main, dict(args, mmio_window_mb=262144), host=a100_tree)
    assert failed.get("failed"), failed
    assert "mmio_window_mb: 262144 MiB for %s on an AMD host" % args["name"] in failed["msg"] and "1048576" in failed["msg"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])
    result = run_module(tenant_domain.main, args, host=a100_tree)
    assert result["changed"] and result["mmio_window_mb"] == 1 << 20
    assert fwcfg(ET.fromstring(result["xml"])) == {"opt/ovmf/X-PciMmio64Mb": "1048576"}
    conn.lookupByName(args["name"]).undefine()
    assert run_module(tenant_domain.main, dict(args, mmio_window_mb=0), host=a100_tree)["mmio_window_mb"] is None


def test_bios_tenant_has_no_window(conn, args, a100_tree):
    del args["mmio_window_mb"]
    args["firmware"] = "bios"
    assert run_module(tenant_domain.main, args, host=a100_tree)["mmio_window_mb"] is None
    root = xml_of(conn, args["name"])
    assert root.find("os").get("firmware") is None and fwcfg(root) == {}


# --------------------------------------------------------------------------- <maxphysaddr> gated on the host's libvirt
LIBVIRTD_2204 = os.path.join(FIXTURES, "hypervisor", "libvirtd-version_ubuntu-22.04_libvirt-8.0.0.txt")


def maxphysaddr_run(args, host):
    """A KVM tenant in check mode (libvirt's test driver defines only its own domain type): the
    definition it would write, and the call's warnings about <maxphysaddr>."""
    result = run_module(tenant_domain.main, dict(args, domain_type="kvm", arch="x86_64"), check_mode=True, host=host)
    assert result["changed"] and not result.get("failed"), result
    said = [w for w in result.get("warnings", []) if "maxphysaddr" in w]
    return ET.fromstring(result["xml"]).find("cpu/maxphysaddr") is not None, said


def test_a_capture_of_libvirt_8_0_leaves_maxphysaddr_out_and_says_so(args, tmp_path):
    with open(LIBVIRTD_2204, encoding="utf-8") as handle:
        (tmp_path / ".capture").mkdir()
        (tmp_path / ".capture" / "libvirtd-version.txt").write_text(handle.read(), encoding="utf-8")
    written, said = maxphysaddr_run(args, Host(str(tmp_path), commands=RecordedCommands()))
    assert not written
    assert len(said) == 1 and "libvirt 8.0.0 on this host predates <maxphysaddr> (libvirt 8.7.0)" in said[0]
    assert args["name"] in said[0] and "physical address bits" in said[0]


def test_a_capture_without_versions_writes_maxphysaddr_and_says_the_version_is_unknown(args, tmp_path):
    written, said = maxphysaddr_run(args, Host(str(tmp_path), commands=RecordedCommands()))
    assert written
    assert len(said) == 1 and "the libvirt version of this host is unknown" in said[0] and args["name"] in said[0]


def test_on_the_running_host_libvirt_answers_for_its_version(args):
    """The running host (root /): the version comes from the connection (getLibVersion)."""
    written, said = maxphysaddr_run(args, None)
    supported = libvirt.getVersion() >= 8007000
    assert written == supported
    assert bool(said) == (not supported)


def test_firmware_is_kept_on_an_existing_domain(conn, args):
    run_module(tenant_domain.main, dict(args, firmware="bios"))
    result = run_module(tenant_domain.main, args)
    assert not result["changed"]
    assert any("keeps its bios firmware" in w for w in result["warnings"])
    assert xml_of(conn, args["name"]).find("os").get("firmware") is None


def interfaces(root):
    return [(i.find("mac").get("address"), [t.get("id") for t in i.findall("vlan/tag")],
             "%s:%s:%s.%s" % tuple(i.find("source/address").get(k)[2:] for k in ("domain", "bus", "slot", "function")))
            for i in root.findall("devices/interface[@type='hostdev']")]


@pytest.mark.parametrize("network_vfs, mac, vlan, expected", [
    # the tenant's MAC for the first VF, a derived one for the second; the tenant's VLAN on both
    ([VF1, VF2], "52:54:00:00:00:0a", 100, [("52:54:00:00:00:0a", ["100"], VF1), ("derived 1", ["100"], VF2)]),
    # no MAC given: each VF its own derived MAC
    ([VF1, VF2], None, None, [("derived 0", [], VF1), ("derived 1", [], VF2)]),
    # a VF's own MAC and VLAN win
    ([{"address": VF1, "mac": "02:00:00:00:00:01", "vlan": 7}, VF2], None, 100,
     [("02:00:00:00:00:01", ["7"], VF1), ("derived 1", ["100"], VF2)]),
])
def test_each_network_vf_its_own_mac(conn, args, network_vfs, mac, vlan, expected):
    args.update(vfs=[VF1, VF2], network_vfs=network_vfs)
    args.update(dict((k, v) for k, v in (("mac", mac), ("vlan", vlan)) if v is not None))
    assert run_module(tenant_domain.main, args)["changed"]
    want = [(derived_mac(args["name"], int(m.split()[1])) if m.startswith("derived") else m, tags, vf) for m, tags, vf in expected]
    assert sorted(interfaces(xml_of(conn, args["name"])), key=lambda i: i[2]) == want
    assert hostdevs(xml_of(conn, args["name"])) == [EDU]
    assert not run_module(tenant_domain.main, args)["changed"]


@pytest.mark.parametrize("network_vfs, mac, message", [
    ([VF1], "01:00:5e:00:00:01", "multicast"),
    ([{"address": VF1, "mac": "52:54:00:00:00:01"}, {"address": VF2, "mac": "52:54:00:00:00:01"}], None, "share MAC"),
    ([{"address": VF1, "vlan": 5000}], None, "not a VLAN id"),
    (["0000:81:00.7"], None, "not listed in vfs"),
])
def test_interface_input_errors(conn, args, network_vfs, mac, message):
    args.update(vfs=[VF1, VF2], network_vfs=network_vfs)
    if mac:
        args["mac"] = mac
    result = run_module(tenant_domain.main, args)
    assert result.get("failed") and message in result["msg"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])


# --------------------------------------------------------------------------- one device, one domain
@pytest.mark.parametrize("running", [False, True])
def test_devices_of_another_domain_are_refused(conn, args, running):
    other = "other-" + uuid.uuid4().hex[:6]
    # a domain the collection did not make, holding VF1 as a network interface
    domain = conn.defineXML("<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
                            "<os><type arch='i686'>hvm</type></os><devices><interface type='hostdev'><source>"
                            "<address type='pci' domain='0x0000' bus='0x81' slot='0x00' function='0x1'/></source>"
                            "</interface></devices></domain>" % other)
    if running:
        domain.create()
    try:
        result = run_module(tenant_domain.main, args)
        assert result.get("failed") and "0000:81:00.1 held by domain %s" % other in result["msg"]
        assert result["held_by"] == {other: [VF1]}
        with pytest.raises(libvirt.libvirtError):
            conn.lookupByName(args["name"])
        # check mode says so and goes on (a removal earlier in the same run may free the device)
        check = run_module(tenant_domain.main, args, check_mode=True)
        assert check["changed"] and any("held by domain %s" % other in w for w in check["warnings"])
        # without the device, the tenant is defined
        assert run_module(tenant_domain.main, dict(args, vfs=[VF2]))["created"]
    finally:
        # the test driver's domains outlive a test while a connection stays open: later tests
        # must not find these holding the same devices
        for name in (other, args["name"]):
            run_module(tenant_domain.main, {"name": name, "uri": URI, "state": "absent", "force_off": True,
                                            "shutdown_timeout": 0})


# --------------------------------------------------------------------------- preview: the host model under root
def test_preview_checks_pins_against_the_captured_host(conn, args, tmp_path):
    """A preview: uri is libvirt's test driver, root a captured tree with more CPUs than the
    test driver's host: the pins are checked against the tree, and the XML is in the diff."""
    tree = FakeHost(tmp_path)
    tree.add_numa_node(0, list(range(0, 64)), hugepages={"2048kB": (1024, 1024)})
    tree.add_numa_node(1, list(range(64, 128)), hugepages={"2048kB": (1024, 1024)})
    pins = dict(args, vcpu_pins={"0": "100", "1": "101"}, emulator_cpus="102", nodeset="1")
    outside = run_module(tenant_domain.main, pins, check_mode=True)
    assert outside.get("failed") and "not on this host" in outside["msg"]
    host = Host(str(tmp_path), commands=RecordedCommands())
    preview = run_module(tenant_domain.main, pins, check_mode=True, diff=True, host=host)
    assert preview["changed"] and preview["created"], preview
    after = preview["diff"][0]["after"]
    assert '<vcpupin vcpu="1" cpuset="101" />' in after and 'firmware="efi"' in after
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])
    # a CPU the captured host does not have is still refused
    beyond = run_module(tenant_domain.main, dict(pins, emulator_cpus="200"), check_mode=True, host=host)
    assert beyond.get("failed") and "CPU(s) 200 are not on this host" in beyond["msg"]


# --------------------------------------------------------------------------- autostart: running tenants come back at boot
def autostart_of(conn, name):
    return bool(conn.lookupByName(name).autostart())


@pytest.mark.parametrize("state, autostart, expected", [
    ("running", None, True),
    ("defined", None, False),
    ("defined", True, True),
    ("running", False, False),
])
def test_autostart_follows_the_state_unless_given(conn, args, state, autostart, expected):
    args["state"] = state
    if autostart is not None:
        args["autostart"] = autostart
    result = run_module(tenant_domain.main, args)
    assert result["changed"] and result["autostart"] is expected
    assert autostart_of(conn, args["name"]) is expected
    assert not run_module(tenant_domain.main, args)["changed"]


def test_autostart_change_is_honest_in_check_mode_and_diff(conn, args):
    run_module(tenant_domain.main, dict(args, state="running"))
    stopped_at_boot = dict(args, state="defined")
    check = run_module(tenant_domain.main, stopped_at_boot, check_mode=True, diff=True)
    assert check["changed"] and not check["defined"] and check["autostart"] is False
    assert check["diff"][-1] == {"before_header": "%s (autostart)" % args["name"], "after_header": "%s (autostart)" % args["name"],
                                 "before": "autostart: enable\n", "after": "autostart: disable\n"}
    assert autostart_of(conn, args["name"])
    done = run_module(tenant_domain.main, stopped_at_boot, diff=True)
    assert done["changed"] and not autostart_of(conn, args["name"])
    # the state is what it was: defined does not stop a running domain
    assert conn.lookupByName(args["name"]).isActive()
    again = run_module(tenant_domain.main, stopped_at_boot, diff=True)
    assert not again["changed"] and all("autostart" not in entry["before_header"] for entry in again["diff"])


def test_removal_takes_an_autostarted_tenant_away(conn, args):
    run_module(tenant_domain.main, dict(args, state="running"))
    gone = run_module(tenant_domain.main, {"name": args["name"], "uri": URI, "state": "absent", "force_off": True,
                                           "shutdown_timeout": 0})
    assert gone["removed"] and gone["autostart"] is False
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])


# --------------------------------------------------------------------------- domains: every tenant in one call
def entry(args, **changes):
    """One entry of ``domains``: a tenant's options without the connection."""
    out = dict((key, value) for key, value in args.items() if key != "uri")
    out.update(changes)
    return out


def test_domains_define_and_start_each_in_one_call(conn, args):
    second = args["name"] + "-b"
    domains = [entry(args, state="running", **PINS), entry(args, name=second, gpus=[], vfs=[VF2], hugepage_size="none")]
    result = run_module(tenant_domain.main, {"uri": URI, "domains": domains}, diff=True)
    assert result["changed"]
    assert list(result["domains"]) == [args["name"], second]
    first = result["domains"][args["name"]]
    assert first["name"] == args["name"] and first["created"] and first["powered_on"] and first["autostart"]
    assert result["domains"][second]["created"] and not result["domains"][second]["powered_on"]
    assert result["created"] == [args["name"], second] and result["powered_on"] == [args["name"]]
    assert result["autostart"] == [args["name"]] and result["restart_required"] == [] and result["removed"] == []
    assert pins_of(xml_of(conn, args["name"]))[:2] == ([("0", "2"), ("1", "3")], "4")
    assert hostdevs(xml_of(conn, second)) == [VF2]
    assert conn.lookupByName(args["name"]).isActive() and not conn.lookupByName(second).isActive()
    assert [entry["before_header"] for entry in result["diff"]] == [
        "%s (persistent XML)" % args["name"], "%s (autostart)" % args["name"], "%s (persistent XML)" % second]
    again = run_module(tenant_domain.main, {"uri": URI, "domains": domains})
    assert not again["changed"] and again["created"] == [] and again["powered_on"] == []
    assert all(not r["changed"] for r in again["domains"].values())


def test_domains_in_check_mode_change_nothing(conn, args):
    result = run_module(tenant_domain.main, {"uri": URI, "domains": [entry(args, state="running")]}, check_mode=True)
    assert result["changed"] and result["created"] == [args["name"]] and result["powered_on"] == [args["name"]]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(args["name"])


def test_domains_act_in_order_so_a_removal_frees_devices(conn, args):
    run_module(tenant_domain.main, args)
    successor = args["name"] + "-next"
    domains = [{"name": args["name"], "state": "absent"}, entry(args, name=successor)]
    result = run_module(tenant_domain.main, {"uri": URI, "domains": domains})
    assert result["removed"] == [args["name"]] and result["created"] == [successor]
    assert sorted(result["released_devices"]) == sorted([EDU, VF1])
    assert hostdevs(xml_of(conn, successor)) == sorted([EDU, VF1])


@pytest.mark.parametrize("change, message", [
    ({"vcpus": None}, "state is defined but all of the following are missing: vcpus"),
    ({"vcpus": "many"}, "vcpus"),
    ({"state": "paused"}, "state"),
    ({"colour": "blue"}, "colour"),
    ({"vlan": 5000}, "vlan: 5000 is not a VLAN id"),
    ({"shutdown_timeout": -1}, "shutdown_timeout: -1 is negative"),
    # checked against the host before the first domain is defined
    ({"vcpu_pins": {"0": "99"}}, "vcpu_pins[0]: CPU(s) 99 are not on this host"),
    ({"vcpu_pins": {"5": "2"}}, "vcpu_pins: vCPU(s) 5 do not exist"),
])
def test_a_bad_entry_names_itself_and_nothing_changes(conn, args, change, message):
    bad = args["name"] + "-bad"
    broken = entry(args, name=bad, gpus=[], vfs=[])
    for key, value in change.items():
        if value is None:
            del broken[key]
        else:
            broken[key] = value
    result = run_module(tenant_domain.main, {"uri": URI, "domains": [entry(args), broken]})
    assert result.get("failed") and not result["changed"], result
    assert result["msg"].startswith("domains[1] (%s): " % bad) and message in result["msg"], result["msg"]
    for name in (args["name"], bad):
        with pytest.raises(libvirt.libvirtError):
            conn.lookupByName(name)


@pytest.mark.parametrize("module_args, message", [
    ({"domains": [{"name": "a", "state": "absent"}], "name": "a"}, "mutually exclusive: domains|name"),
    ({"domains": [{"name": "a", "state": "absent"}], "live": True}, "mutually exclusive: domains|live"),
    ({"domains": [{"name": "a", "state": "absent"}, {"name": "a", "state": "absent"}]}, "domains[1] (a): name a is also domains[0]"),
    ({"domains": [{"state": "absent"}]}, "domains[0]: missing required arguments: name"),
    ({}, "one of the following is required: name, domains"),
])
def test_domains_form_errors(conn, module_args, message):
    result = run_module(tenant_domain.main, dict(module_args, uri=URI))
    assert result.get("failed") and message in result["msg"], result["msg"]
    del conn


def test_a_device_another_domain_holds_is_refused_before_the_first_entry_is_defined(conn, args):
    other = "other-" + uuid.uuid4().hex[:6]
    conn.defineXML("<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
                   "<os><type arch='i686'>hvm</type></os><devices><hostdev mode='subsystem' type='pci'><source>"
                   "<address domain='0x0000' bus='0x81' slot='0x00' function='0x2'/></source></hostdev></devices></domain>" % other)
    late = args["name"] + "-late"
    domains = [entry(args), entry(args, name=late, gpus=[], vfs=[VF2])]
    try:
        result = run_module(tenant_domain.main, {"uri": URI, "domains": domains})
        assert result.get("failed") and "0000:81:00.2 held by domain %s" % other in result["msg"], result
        assert result["msg"].startswith("domains[1] (%s): " % late) and result["held_by"] == {other: [VF2]}
        assert not result["changed"]
        with pytest.raises(libvirt.libvirtError):
            conn.lookupByName(args["name"])
        # listed for removal first, the other domain frees the VF for the later entry
        freed = run_module(tenant_domain.main, {"uri": URI, "domains": [{"name": other, "state": "absent"}] + domains})
        assert not freed.get("failed") and freed["created"] == [args["name"], late], freed
    finally:
        for name in (other, args["name"], late):
            run_module(tenant_domain.main, {"name": name, "uri": URI, "state": "absent", "force_off": True, "shutdown_timeout": 0})


# --------------------------------------------------------------------------- the tenants' VF settings in the same call
@pytest.fixture
def cx4_host(tmp_path, monkeypatch):
    """The ConnectX-4 Lx tree with its 4 VFs made; ``ip`` is the stand-in of tests/unit/fakes/standins
    on PATH (VF settings kept in a state file, read back with ``vf_state``); -> a Host over the tree."""
    tree, kernel = cx4lx_no_acs_host(tmp_path / "root")
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", tree.root)
    monkeypatch.setenv("PATH", STANDINS + os.pathsep + os.environ["PATH"])
    # the running host's: under a capture ip is not asked
    host = LiveHost(tree.root, kernel=kernel)
    made = run_module(sriov_vfs.main, {"pf": "0000:01:00.0", "num_vfs": 4, "persist": False}, host=host)
    assert not made.get("failed"), made
    return host


def vf_state(tmp_path, index):
    with open(str(tmp_path / "ip.json"), encoding="utf-8") as handle:
        vf = json.load(handle)["enp1s0f0np0"]["vfs"][index]
    return vf["mac"], vf["vlan"]


def vf_settings(mac, vlan):
    return {"pfs": [{"pf": "0000:01:00.0", "persist": False,
                     "vfs": [{"address": "0000:01:00.2", "mac": mac, "vlan": vlan}]}]}


def small(name):
    return {"name": name, "domain_type": "test", "arch": "i686", "firmware": "bios", "vcpus": 1, "memory_mb": 64,
            "state": "running"}


def test_vf_settings_and_domains_in_one_call(conn, cx4_host, tmp_path):
    name = "vfs-" + uuid.uuid4().hex[:6]
    call = {"uri": URI, "sriov_vfs": vf_settings("52:54:00:d0:00:01", 100), "domains": [small(name)]}
    check = run_module(tenant_domain.main, call, check_mode=True, diff=True, host=cx4_host)
    assert check["changed"] and check["sriov_vfs"]["pfs"][0]["pf"] == "0000:01:00.0"
    assert "PF 0000:01:00.0" in [d["before_header"] for d in check["diff"]]
    assert vf_state(tmp_path, 0) == ("00:00:00:00:00:00", 0)
    assert name not in [d.name() for d in conn.listAllDomains(0)]
    done = run_module(tenant_domain.main, call, host=cx4_host)
    assert done["changed"] and done["powered_on"] == [name] and done["sriov_vfs"]["changed"]
    assert vf_state(tmp_path, 0) == ("52:54:00:d0:00:01", 100)
    vf = [v for v in done["sriov_vfs"]["pfs"][0]["vfs"] if v["address"] == "0000:01:00.2"][0]
    assert (vf["settings"]["mac"], vf["settings"]["vlan"], vf["settings"]["spoofchk"]) == ("52:54:00:d0:00:01", 100, True)
    again = run_module(tenant_domain.main, call, host=cx4_host)
    assert again["changed"] is False and again["sriov_vfs"]["changed"] is False


@pytest.mark.parametrize("settings, words", [
    ({"pfs": [{"pf": "0000:01:00.0", "vfs": [{"mac": "52:54:00:d0:00:01"}]}]}, "sriov_vfs: pfs[0]"),
    ({"pfs": [{"pf": "0000:01:00.0", "vfs": [{"address": "0000:01:00.2", "mac": "nope"}]}]}, "sriov_vfs: pfs[0] (0000:01:00.0)"),
    ({"pf": "0000:01:00.0", "pfs": []}, "sriov_vfs: "),
])
def test_bad_vf_settings_fail_before_any_domain_or_vf_changes(conn, cx4_host, tmp_path, settings, words):
    name = "vfs-" + uuid.uuid4().hex[:6]
    result = run_module(tenant_domain.main, {"uri": URI, "sriov_vfs": settings, "domains": [small(name)]}, host=cx4_host)
    assert result["failed"] and words in result["msg"] and not result["changed"], result
    assert vf_state(tmp_path, 0) == ("00:00:00:00:00:00", 0)
    assert name not in [d.name() for d in conn.listAllDomains(0)]


# --------------------------------------------------------------------------- isolation rules wherever devices are assigned
def cleanup(*names):
    for name in names:
        run_module(tenant_domain.main, {"name": name, "uri": URI, "state": "absent", "force_off": True, "shutdown_timeout": 0})


def defined(conn, name):
    return name in [d.name() for d in conn.listAllDomains(0)]


@pytest.fixture
def v100(tmp_path):
    """The 6x V100 tree: GPUs in IOMMU groups of two (no ACS between the two of a switch)."""
    tree, _kernel = v100_pairs_host(tmp_path / "root")

    def vendor(address):
        with open(tree.p(tree.pci_paths[address] + "/vendor"), encoding="utf-8") as handle:
            return handle.read().strip()
    gpus = sorted(a for a in tree.pci_paths if vendor(a) == "0x10de")
    return Host(tree.root, commands=RecordedCommands()), gpus


def tenant(name, **options):
    return dict({"name": name, "domain_type": "test", "arch": "i686", "firmware": "bios", "vcpus": 1, "memory_mb": 64}, **options)


def test_two_gpus_of_one_iommu_group_never_go_to_two_tenants(conn, v100):
    host, gpus = v100
    a, b = "grp-a-" + uuid.uuid4().hex[:6], "grp-b-" + uuid.uuid4().hex[:6]
    try:
        both = run_module(tenant_domain.main, {"uri": URI, "domains": [tenant(a, gpus=[gpus[0]]), tenant(b, gpus=[gpus[1]])]},
                          host=host)
        assert both["failed"] and not both["changed"], both
        assert both["msg"].startswith("domains[1] (%s): " % b) and "share IOMMU group 20" in both["msg"]
        assert not defined(conn, a) and not defined(conn, b)
        # in separate calls: the first tenant holds the group, the second is refused (a warning in check mode)
        assert run_module(tenant_domain.main, dict(tenant(a, gpus=[gpus[0]]), uri=URI), host=host)["created"]
        later = run_module(tenant_domain.main, dict(tenant(b, gpus=[gpus[1]]), uri=URI), host=host)
        assert later["failed"] and "share IOMMU group 20" in later["msg"] and "domain %s" % a in later["msg"], later
        assert not defined(conn, b)
        check = run_module(tenant_domain.main, dict(tenant(b, gpus=[gpus[1]]), uri=URI), host=host, check_mode=True)
        assert check["changed"] and any("share IOMMU group 20" in w for w in check["warnings"])
        # the whole group to one tenant is fine
        whole = run_module(tenant_domain.main, dict(tenant(a, gpus=gpus[:2]), uri=URI), host=host)
        assert whole["changed"] and not whole.get("failed"), whole
    finally:
        cleanup(a, b)


@pytest.fixture
def lab_vfs(tmp_path):
    tree, _kernel = lab_host_with_vfs(tmp_path / "root", num_vfs=2)
    return Host(tree.root, commands=RecordedCommands())


def test_a_pf_and_its_vfs_are_never_split(conn, lab_vfs):
    a, b = "pf-a-" + uuid.uuid4().hex[:6], "pf-b-" + uuid.uuid4().hex[:6]
    pf, vf1, vf2 = "0000:81:00.0", "0000:81:00.1", "0000:81:00.2"
    try:
        split = run_module(tenant_domain.main, {"uri": URI, "domains": [tenant(a, gpus=[pf]), tenant(b, vfs=[vf1])]},
                           host=lab_vfs)
        assert split["failed"] and not split["changed"] and split["msg"].startswith("domains[0] (%s): " % a), split
        # the PF's VFs stay with the host (and one goes to b): never split
        assert "PF 0000:81:00.0 (%s) has VFs 0000:81:00.1, 0000:81:00.2 that stay with" % a in split["msg"]
        alone = run_module(tenant_domain.main, dict(tenant(a, gpus=[pf]), uri=URI), host=lab_vfs)
        assert alone["failed"] and "stay with the host" in alone["msg"] and not alone["changed"]
        vf_first = run_module(tenant_domain.main, {"uri": URI, "domains": [tenant(b, vfs=[vf1]), tenant(a, gpus=[pf, vf1, vf2])]},
                              host=lab_vfs)
        assert vf_first["failed"] and "0000:81:00.1 is also given to %s" % b in vf_first["msg"], vf_first
        assert not defined(conn, a) and not defined(conn, b)
        # the PF with all its VFs to one tenant is one unit
        assert run_module(tenant_domain.main, dict(tenant(a, gpus=[pf], vfs=[vf1, vf2]), uri=URI), host=lab_vfs)["created"]
    finally:
        cleanup(a, b)


def test_a_mac_goes_to_one_vf_across_tenants_and_calls(conn, lab_vfs):
    a, b = "mac-a-" + uuid.uuid4().hex[:6], "mac-b-" + uuid.uuid4().hex[:6]
    vf1, vf2 = "0000:81:00.1", "0000:81:00.2"
    mac = "52:54:00:3c:00:01"
    try:
        one_call = run_module(tenant_domain.main, {"uri": URI, "domains": [
            tenant(a, vfs=[vf1], network_vfs=[vf1], mac=mac), tenant(b, vfs=[vf2], network_vfs=[vf2], mac=mac.upper())]},
            host=lab_vfs)
        assert one_call["failed"] and not one_call["changed"], one_call
        assert "MAC %s of VF %s is also the MAC of VF %s (%s)" % (mac, vf2, vf1, a) in one_call["msg"]
        assert run_module(tenant_domain.main, dict(tenant(a, vfs=[vf1], network_vfs=[vf1], mac=mac), uri=URI), host=lab_vfs)["created"]
        later = run_module(tenant_domain.main, dict(tenant(b, vfs=[vf2], network_vfs=[vf2], mac=mac), uri=URI), host=lab_vfs)
        assert later["failed"] and "already the MAC of an interface of domain %s" % a in later["msg"] and not later["changed"]
        assert not defined(conn, b)
    finally:
        cleanup(a, b)


def test_a_data_nic_mac_goes_to_one_interface_across_tenants_and_calls(conn):
    a, b = "nic-a-" + uuid.uuid4().hex[:6], "nic-b-" + uuid.uuid4().hex[:6]
    mac = "02:54:00:3c:00:0a"
    try:
        nic = {"network": "default", "mac": mac}
        one_call = run_module(tenant_domain.main, {"uri": URI, "domains": [
            tenant(a, data_nic=nic), tenant(b, data_nic=dict(nic, mac=mac.upper()))]})
        assert one_call["failed"] and not one_call["changed"], one_call
        assert "MAC %s of data NIC is also the MAC of data NIC (%s)" % (mac, a) in one_call["msg"]
        made = run_module(tenant_domain.main, dict(tenant(a, data_nic=nic), uri=URI))
        assert made["created"] and made["guest"]["data_nic"] == {"network": "default", "bridge": None, "mac": mac, "vlan": None}
        # another domain's NIC has it: refused before anything changes, naming that domain
        later = run_module(tenant_domain.main, dict(tenant(b, data_nic={"bridge": "br-data", "mac": mac}), uri=URI))
        assert later["failed"] and "already the MAC of an interface of domain %s" % a in later["msg"] and not later["changed"]
        assert not defined(conn, b)
    finally:
        cleanup(a, b)


def test_the_same_gpu_in_two_entries_is_refused_before_the_first_is_defined(conn, args):
    other = args["name"] + "-2"
    result = run_module(tenant_domain.main, {"uri": URI, "domains": [entry(args), entry(args, name=other, vfs=[])]})
    assert result["failed"] and not result["changed"], result
    assert result["msg"] == ("domains[1] (%s): 0000:82:00.0 is also given to %s; a PCI device goes to one tenant only: give it "
                             "to one of them" % (other, args["name"]))
    assert not defined(conn, args["name"]) and not defined(conn, other)


@pytest.mark.parametrize("settings, relax, words", [
    ({"spoofchk": False}, False, "spoof checking off for VF 0000:01:00.2 of tenant"),
    ({"trust": True}, False, "trust on for VF 0000:01:00.2 of tenant"),
    ({"spoofchk": False, "trust": True}, True, None),
])
def test_spoof_check_off_or_trust_on_only_with_the_tenants_opt_in(conn, cx4_host, tmp_path, settings, relax, words):
    name = "spoof-" + uuid.uuid4().hex[:6]
    vf = dict({"address": "0000:01:00.2", "mac": "52:54:00:d0:00:07"}, **settings)
    call = {"uri": URI, "sriov_vfs": {"pfs": [{"pf": "0000:01:00.0", "persist": False, "vfs": [vf]}]},
            "domains": [dict(small(name), state="defined", vfs=["0000:01:00.2"], relax_vf_isolation=relax)]}
    try:
        result = run_module(tenant_domain.main, call, host=cx4_host)
        if words:
            assert result["failed"] and not result["changed"] and words in result["msg"], result
            assert "set relax_vf_isolation: true on that tenant" in result["msg"]
            assert vf_state(tmp_path, 0) == ("00:00:00:00:00:00", 0) and not defined(conn, name)
        else:
            assert result["changed"] and not result.get("failed"), result
            assert any("has spoof checking off and trust on" in w for w in result["warnings"])
    finally:
        cleanup(name)


@pytest.mark.parametrize("change, message", [
    ({"vcpus": 100000}, "vcpus: 100000 is more than the 16 CPUs of this host"),
    ({"vcpus": 2, "max_vcpus": 64}, "max_vcpus: 64 is more than the 16 CPUs of this host"),
    ({"memory_mb": 1024 ** 3}, "memory_mb: 1073741824 MiB is more than the 6144 MiB of memory this host has"),
    ({"machine": "pc\x01"}, "machine: 'pc\\x01' is not a name"),
    ({"machine": "q35 <x>"}, "machine: "),
    ({"arch": "x86_64\n"}, "arch: "),
    ({"mac": "00:00:00:00:00:00", "network_vfs": [VF1]}, "mac: 00:00:00:00:00:00 is the all-zero address"),
    ({"vlan": 4095}, "vlan: 4095 is not a VLAN id"),
])
def test_sizes_bound_by_the_host_and_names_refused(conn, args, change, message):
    args.update(change)
    result = run_module(tenant_domain.main, args)
    assert result.get("failed") and message in result["msg"] and not result["changed"], result
    assert not defined(conn, args["name"])


# --------------------------------------------------------------------------- guest image, seed, management NIC
GUEST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDAw ops@example"


@pytest.fixture
def guest_host(tmp_path):
    from fakes.system_commands import SystemCommands  # pylint: disable=import-error,import-outside-toplevel
    base = tmp_path / "srv" / "base.qcow2"
    base.parent.mkdir()
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "1G"], check=True)
    return Host(str(tmp_path), commands=SystemCommands())


def guest_args(args, **extra):
    out = dict(args, vfs=[VF1], gpus=[], network_vfs=[VF1], mac="52:54:00:00:00:0a", vlan=100, machine=None,
               image={"base": "/srv/base.qcow2", "size_gb": 2},
               cloud_init={"ssh_authorized_keys": [GUEST_KEY], "rdma_address": "10.20.0.11/24"},
               management={"network": "default", "address": "192.168.150.11/24", "gateway": "192.168.150.1"})
    out.update(extra)
    return out


def test_a_tenant_with_an_image_gets_its_disk_seed_and_management_nic(conn, args, guest_host):
    result = run_module(tenant_domain.main, guest_args(args), host=guest_host)
    assert result["changed"] and result["created"], result
    name = args["name"]
    guest = result["guest"]
    assert guest["disk"] == "/var/lib/libvirt/images/gpuvirt/tenants/%s/disk.qcow2" % name
    assert guest["console_log"] == "/var/log/libvirt/qemu/%s-console.log" % name
    assert os.path.isfile(guest_host.path(guest["disk"])) and os.path.isfile(guest_host.path(guest["seed"]))
    root = xml_of(conn, name)
    disk = [d for d in root.findall("devices/disk") if d.get("device") == "disk"]
    assert [d.find("source").get("file") for d in disk] == [guest["disk"]]
    assert disk[0].find("driver").get("io") == "threads" and disk[0].find("target").attrib == {"dev": "vda", "bus": "virtio"}
    cdrom = [d for d in root.findall("devices/disk") if d.get("device") == "cdrom"]
    assert [d.find("source").get("file") for d in cdrom] == [guest["seed"]] and cdrom[0].find("readonly") is not None
    nic = [i for i in root.findall("devices/interface") if i.get("type") == "network"]
    assert [(i.find("source").get("network"), i.find("mac").get("address"), i.find("model").get("type")) for i in nic] == [
        ("default", guest["management"]["mac"], "virtio")]
    assert root.find("devices/serial/log").get("file") == guest["console_log"]
    again = run_module(tenant_domain.main, guest_args(args), host=guest_host)
    assert not again["changed"], again


def test_a_bad_image_fails_before_any_domain_or_file(conn, args, guest_host):
    result = run_module(tenant_domain.main, guest_args(args, image={"base": "/srv/base.qcow2", "size_gb": 0}), host=guest_host)
    assert result.get("failed") and "image.size_gb: 0" in result["msg"]
    entry = dict((k, v) for k, v in guest_args(args).items() if k != "uri")
    missing = run_module(tenant_domain.main, {"uri": URI, "domains": [
        dict(entry, name=args["name"] + "-b", vfs=[VF2], network_vfs=[VF2], mac="52:54:00:00:00:0b"),
        dict(entry, image={"base": "/srv/missing.qcow2"})]}, host=guest_host)
    assert missing.get("failed") and "domains[1] (%s): image.base: /srv/missing.qcow2 is not a file" % args["name"] in missing["msg"]
    assert args["name"] not in conn.listDefinedDomains() and args["name"] + "-b" not in conn.listDefinedDomains()
    assert not os.path.exists(guest_host.path("/var/lib/libvirt/images/gpuvirt"))


def test_no_tenant_is_given_another_tenants_or_domains_file(conn, args, guest_host):
    a, b = args["name"], args["name"] + "-b"
    entry_a = dict((k, v) for k, v in guest_args(args).items() if k != "uri")
    entry_b = dict(entry_a, name=b, vfs=[VF2], network_vfs=[VF2], mac="52:54:00:00:00:0b",
                   cloud_init=dict(entry_a["cloud_init"], rdma_address="10.20.0.12/24"),
                   management=dict(entry_a["management"], address="192.168.150.12/24"))
    disk_a = "/var/lib/libvirt/images/gpuvirt/tenants/%s/disk.qcow2" % a
    try:
        # in one call: B's extra disk is A's overlay
        same = run_module(tenant_domain.main, {"uri": URI, "domains": [entry_a, dict(entry_b, disks=[{"path": disk_a}])]},
                          host=guest_host)
        assert same.get("failed") and not same["changed"], same
        assert "domains[1] (%s): %s is also a file of tenant %s" % (b, disk_a, a) in same["msg"]
        assert not defined(conn, a) and not os.path.exists(guest_host.path("/var/lib/libvirt/images/gpuvirt"))
        assert run_module(tenant_domain.main, guest_args(args), host=guest_host)["created"]
        before = sorted(os.listdir(guest_host.path("/var/lib/libvirt/images/gpuvirt/tenants")))
        # B's overlay on A's disk, which A writes
        backed = run_module(tenant_domain.main, {"uri": URI, "domains": [entry_a, dict(entry_b, image={"base": disk_a})]},
                            host=guest_host)
        assert backed.get("failed") and "image.base: %s is a disk of tenant %s, which writes it" % (disk_a, a) in backed["msg"]
        # across calls: A is another domain now
        later = run_module(tenant_domain.main, dict(guest_args(dict(args, name=b), vfs=[VF2], network_vfs=[VF2],
                                                               mac="52:54:00:00:00:0b"), disks=[{"path": disk_a}]),
                           host=guest_host)
        assert later.get("failed") and "%s is a disk of domain %s" % (disk_a, a) in later["msg"], later
        assert not defined(conn, b)
        assert sorted(os.listdir(guest_host.path("/var/lib/libvirt/images/gpuvirt/tenants"))) == before
    finally:
        cleanup(a, b)


def test_removing_the_tenant_deletes_its_guest_files(conn, args, guest_host):
    made = run_module(tenant_domain.main, guest_args(args), host=guest_host)["guest"]
    check = run_module(tenant_domain.main, {"name": args["name"], "uri": URI, "state": "absent"}, host=guest_host,
                       check_mode=True)
    assert check["changed"] and made["disk"] in check["guest_files_removed"]
    assert os.path.isfile(guest_host.path(made["disk"]))
    removed = run_module(tenant_domain.main, {"name": args["name"], "uri": URI, "state": "absent"}, host=guest_host)
    assert removed["removed"] and made["seed"] in removed["guest_files_removed"]
    assert not os.path.exists(guest_host.path(os.path.dirname(made["disk"])))
    assert os.path.isfile(guest_host.path("/srv/base.qcow2"))


def _world(conn, host):
    from fakes.interrupt import tree_state  # pylint: disable=import-error,import-outside-toplevel
    return tree_state(host.root), sorted((d.name(), d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)) for d in conn.listAllDomains(0))


def test_removing_a_tenant_never_breaks_another_that_reads_its_files(conn, args, guest_host):
    """A's disk is the backing file of a domain defined apart (made by hand), or the base or disk
    of a tenant of the same call: removing A is refused naming both, in check mode too, and the world (files,
    links, libvirt's domains) is as before; removed together, both go."""
    a, held, b = args["name"], args["name"] + "-held", args["name"] + "-b"
    made = run_module(tenant_domain.main, guest_args(args), host=guest_host)["guest"]
    overlay = "/srv/%s.qcow2" % held
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", guest_host.path(made["disk"]),
                    guest_host.path(overlay)], check=True)
    conn.defineXML("<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='i686'>hvm"
                   "</type></os><devices><disk type='file' device='disk'><source file='%s'/><target dev='vda' bus='virtio'/>"
                   "</disk></devices></domain>" % (held, overlay))
    entry_b = dict((k, v) for k, v in guest_args(dict(args, name=b), vfs=[VF2], network_vfs=[VF2], mac="52:54:00:00:00:0b",
                                                 management={"network": "default", "address": "192.168.150.12/24"}).items()
                   if k != "uri")
    fix = "A removal never breaks another tenant; nothing was changed. Remove %s first (or in the same call), or give it a disk " \
          "of its own (qemu-img convert makes one without the backing file)"
    try:
        before = _world(conn, guest_host)
        for check_mode in (True, False):
            result = run_module(tenant_domain.main, {"name": a, "uri": URI, "state": "absent"}, host=guest_host,
                                check_mode=check_mode)
            assert result.get("failed") and not result["changed"], result
            assert result["msg"] == ("removing tenant %s would delete %s, which domain %s reads through its image %s (a backing "
                                     "file of it). " % (a, made["disk"], held, overlay)) + fix % ("domain " + held)
            assert _world(conn, guest_host) == before
        conn.lookupByName(held).undefine()
        before = _world(conn, guest_host)
        # a tenant of the same call given A's disk as its base, or as its disk, while A goes
        for given in ({"image": {"base": made["disk"]}}, {"disks": [{"path": made["disk"]}], "image": None, "cloud_init": None,
                                                          "management": None}):
            result = run_module(tenant_domain.main, {"uri": URI, "domains": [{"name": a, "state": "absent"}, dict(entry_b, **given)]},
                                host=guest_host)
            assert result.get("failed") and not result["changed"], result
            assert result["msg"] == ("domains[0] (%s): removing tenant %s would delete %s, which tenant %s reads as its file %s. "
                                     % (a, a, made["disk"], b, made["disk"])) + fix % ("tenant " + b)
            assert _world(conn, guest_host) == before
        # with nobody reading its files, the removal goes
        assert run_module(tenant_domain.main, {"name": a, "uri": URI, "state": "absent"}, host=guest_host)["removed"]
        assert not os.path.exists(guest_host.path(made["disk"]))
    finally:
        if defined(conn, held):
            conn.lookupByName(held).undefine()
        cleanup(a, b)


def test_the_management_network_is_defined_started_and_set_to_autostart(conn, args, guest_host):
    network = "gpuvirt-" + uuid.uuid4().hex[:6]
    call = guest_args(args, management={"network": network, "address": "192.168.150.11/24", "gateway": "192.168.150.1"},
                      management_network={"name": network, "address": "192.168.150.1/24"})
    check = run_module(tenant_domain.main, call, host=guest_host, check_mode=True)
    assert check["changed"] and check["management_network"]["defined"] and network not in conn.listNetworks()
    result = run_module(tenant_domain.main, call, host=guest_host)
    assert result["management_network"] == {"name": network, "address": "192.168.150.1/24", "forward": "nat", "defined": True,
                                            "started": True, "autostart_set": True, "changed": True}
    handle = conn.networkLookupByName(network)
    assert handle.isActive() and handle.autostart()
    root = ET.fromstring(handle.XMLDesc(0))
    assert root.find("forward").get("mode") == "nat" and root.find("ip").get("address") == "192.168.150.1"
    assert root.find("dhcp") is None
    assert not run_module(tenant_domain.main, call, host=guest_host)["changed"]


def test_a_network_of_that_name_with_other_settings_is_refused(conn, args, guest_host):
    # the test driver's own network "default" is 192.168.122.1/24
    call = guest_args(args, management_network={"name": "default", "address": "192.168.150.1/24"})
    result = run_module(tenant_domain.main, call, host=guest_host)
    assert result.get("failed") and "libvirt network default exists with forward nat, address 192.168.122.1/24" in result["msg"]
    assert args["name"] not in conn.listDefinedDomains()
    assert not os.path.exists(guest_host.path("/var/lib/libvirt/images/gpuvirt"))


def test_a_running_tenant_given_a_management_nic_keeps_it_for_its_restart(conn, args):
    running = dict(args, state="running", gpus=[], vfs=[])
    run_module(tenant_domain.main, running)
    result = run_module(tenant_domain.main, dict(running, management={"network": "default"}))
    assert result["changed"] and result["restart_required"]
    assert any("keeps its devices until it is restarted" in reason for reason in result["restart_reasons"]), result
    nic = xml_of(conn, args["name"]).find("devices/interface")
    assert nic.get("type") == "network" and nic.find("source").get("network") == "default"


def test_multi_cell_tenant_defined_then_unchanged(conn, args):
    """A tenant spanning two host nodes (numa_cells, as the tenants stage passes a numa: spread
    placement): libvirt takes the definition with two guest cells, a memnode per cell, hugepages in
    both and each device on a root port of its cell's pcie-expander-bus; the same call again,
    against what libvirt stored, changes nothing."""
    cells = [{"node": 0, "vcpus": "0", "memory_kib": 51200, "devices": [EDU]},
             {"node": 1, "vcpus": "1", "memory_kib": 51200, "devices": [VF1]}]
    args = dict(args, machine="q35", numa_cells=cells, nodeset="0-1", vcpu_pins={"0": "0", "1": "4"}, emulator_cpus="1")
    first = run_module(tenant_domain.main, args)
    assert first["changed"] and first["created"]
    root = xml_of(conn, args["name"])
    assert [(c.get("id"), c.get("cpus"), c.get("memory")) for c in root.findall("cpu/numa/cell")] == [
        ("0", "0", "51200"), ("1", "1", "51200")]
    assert [(m.get("cellid"), m.get("nodeset")) for m in root.findall("numatune/memnode")] == [("0", "0"), ("1", "1")]
    assert root.find("memoryBacking/hugepages/page").get("nodeset") == "0-1"
    controllers = dict((c.get("index"), c) for c in root.findall("devices/controller[@type='pci']"))
    for element, cell in ((root.find("devices/hostdev"), "0"), (root.find("devices/interface[@type='hostdev']"), None)):
        if element is None:
            continue
        port = controllers[str(int(element.find("address").get("bus"), 16))]
        expander = controllers[str(int(port.find("address").get("bus"), 16))]
        assert (port.get("model"), expander.get("model")) == ("pcie-root-port", "pcie-expander-bus")
        assert cell is None or expander.find("target/node").text == cell
    before = conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    again = run_module(tenant_domain.main, args)
    assert not again["changed"], again
    assert conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before
    # numa_pin with the same pins, and hugepages in both cells, keeps the memnodes and changes nothing
    pins = {"name": args["name"], "uri": URI, "vcpu_pins": args["vcpu_pins"], "emulator_cpus": "1", "nodeset": "0-1",
            "hugepages": {"size": "2M", "nodeset": "0-1"}}
    assert not run_module(numa_pin.main, pins)["changed"]
    assert conn.lookupByName(args["name"]).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before
    # running, its cells moved (the devices swap cells): the definition changes, the running domain
    # keeps its cells until it is restarted
    conn.lookupByName(args["name"]).create()
    swapped = [dict(cells[0], devices=[VF1]), dict(cells[1], devices=[EDU])]
    moved = run_module(tenant_domain.main, dict(args, numa_cells=swapped, state="running"))
    assert moved["changed"] and moved["restart_required"]
    assert any("guest NUMA cells" in warning for warning in moved.get("warnings", [])), moved


def test_a_running_one_node_tenant_keeps_its_layout_until_restarted(conn, args):
    """A tenant on one node defined before its devices got a guest cell (no cells, each device placed
    by libvirt), running: given its one cell (as the tenants stage now gives a one-node tenant with
    GPUs or VFs), the definition changes (one cell, one memnode, its devices on the cell's
    expander) and the running domain keeps its layout until it is restarted; the same call then
    changes nothing."""
    one = dict(args, machine="q35", nodeset="1", vcpu_pins={"0": "4", "1": "5"}, emulator_cpus="6", state="running")
    assert run_module(tenant_domain.main, one)["created"]
    assert xml_of(conn, args["name"]).find("cpu/numa") is None
    cell = [{"node": 1, "vcpus": "0-1", "memory_kib": 102400, "devices": [EDU, VF1]}]
    moved = run_module(tenant_domain.main, dict(one, numa_cells=cell))
    assert moved["changed"] and moved["restart_required"], moved
    assert any("guest NUMA cells" in warning for warning in moved.get("warnings", [])), moved
    root = xml_of(conn, args["name"])
    assert [(c.get("id"), c.get("cpus")) for c in root.findall("cpu/numa/cell")] == [("0", "0-1")]
    assert [(m.get("cellid"), m.get("mode"), m.get("nodeset")) for m in root.findall("numatune/memnode")] == [("0", "strict", "1")]
    assert [e.find("target/node").text for e in root.findall("devices/controller[@model='pcie-expander-bus']")] == ["0"]
    assert not run_module(tenant_domain.main, dict(one, numa_cells=cell))["changed"]
    # the cell's memory bound as the domain's memory mode says: a new mode for the running domain waits for its restart
    preferred = run_module(tenant_domain.main, dict(one, numa_cells=cell, memory_mode="preferred"))
    assert preferred["changed"] and preferred["restart_required"], preferred
    assert any("guest NUMA cells" in warning for warning in preferred.get("warnings", [])), preferred
    assert [m.get("mode") for m in xml_of(conn, args["name"]).findall("numatune/memnode")] == ["preferred"]


SPANNING = [{"node": 0, "vcpus": "0", "memory_kib": 51200, "devices": [EDU]},
            {"node": 1, "vcpus": "1", "memory_kib": 51200, "devices": [VF1]}]


def all_definitions(conn):
    return sorted((d.name(), d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)) for d in conn.listAllDomains())


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("cells, nodeset, message", [
    ([SPANNING[0], dict(SPANNING[1], node=7)], "0,7", "numa_cells[1]: host NUMA node 7 of {name} is not a node of this host "
     "(nodes 0-1); give each cell one of them"),
    ([dict(SPANNING[0], node=2), SPANNING[1]], None, "numa_cells[0]: host NUMA node 2 of {name} is not a node of this host"),
    (SPANNING, "0", "nodeset: 0 contradicts the host nodes of {name}'s numa_cells (0-1); give nodeset 0-1, the cells' nodes"),
    (SPANNING, "1", "nodeset: 1 contradicts the host nodes of {name}'s numa_cells (0-1)"),
    (SPANNING, "0-2", "nodeset: 0-2 contradicts the host nodes of {name}'s numa_cells (0-1)"),
])
def test_cells_on_nodes_the_host_lacks_or_against_the_nodeset_are_refused(conn, args, cells, nodeset, message, batch):
    """A guest cell on a host node the host does not have, or a nodeset that is not the cells' host
    nodes: refused naming the tenant (and, in one call for every tenant, its entry), before any
    domain changes (another tenant of the same call is not defined either)."""
    spanning = dict(args, machine="q35", numa_cells=cells, vcpu_pins={"0": "0", "1": "4"}, emulator_cpus="1")
    if nodeset is not None:
        spanning["nodeset"] = nodeset
    before = all_definitions(conn)
    if batch:
        other = entry(args, name=args["name"] + "-a", gpus=[], vfs=[VF2])
        result = run_module(tenant_domain.main, {"uri": URI, "domains": [other, entry(spanning)]})
        message = "domains[1] (%s): %s" % (args["name"], message)
    else:
        result = run_module(tenant_domain.main, spanning)
    assert result.get("failed") and message.format(name=args["name"]) in result["msg"], result
    assert all_definitions(conn) == before
