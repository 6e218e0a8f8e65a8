# -*- coding: utf-8 -*-
"""The domain XML built and read (domain_xml), without libvirt: only the managed elements
change, namespaced metadata keeps its prefix, and what is written reads back the same."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.device_use import usage_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import PinRequest, apply_pinning
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import (
    firmware_of, held_resources, host_cpus, mmio_window_of, read_assignment, read_pinning)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import QEMU_NS, parse_xml, to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import TenantSpec
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac

from fakes.host_tree import FakeHost  # pylint: disable=import-error

DOMAIN = """<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>t</name>
  <memory unit='GiB'>1</memory>
  <vcpu placement='static'>4</vcpu>
  <cputune>
    <shares>1024</shares>
    <vcpupin vcpu='0' cpuset='0-1'/>
    <vcpupin vcpu='3' cpuset='7'/>
  </cputune>
  <numatune>
    <memory mode='interleave' nodeset='0-1'/>
    <memnode cellid='0' mode='strict' nodeset='0'/>
  </numatune>
  <memoryBacking><locked/></memoryBacking>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x82' slot='0x00' function='0x0'/></source></hostdev>
    <interface type='hostdev'><source><address type='pci' domain='0x0000' bus='0x81' slot='0x00' function='0x2'/></source></interface>
  </devices>
  <qemu:commandline><qemu:arg value='-no-shutdown'/></qemu:commandline>
</domain>"""


def test_read_pinning():
    state = read_pinning(parse_xml(DOMAIN))
    assert state == {"vcpu_pins": {0: [0, 1], 3: [7]}, "emulator_cpus": None, "memory_mode": "interleave", "nodeset": [0, 1],
                     "hugepages": None}


def test_apply_pinning_touches_only_managed_elements():
    root = parse_xml(DOMAIN)
    request = PinRequest({"0": "2", 1: 3}, "4", "strict", "1", {"size": "1G"})
    assert apply_pinning(root, request)
    text = to_text(root)
    assert '<vcpupin vcpu="0" cpuset="2" />\n    <vcpupin vcpu="1" cpuset="3" />\n    <emulatorpin cpuset="4" />' in text
    assert "<shares>1024</shares>" in text and 'vcpu="3"' not in text
    assert '<memory mode="strict" nodeset="1" />' in text and '<memnode cellid="0" mode="strict" nodeset="0" />' in text
    assert "<locked />" in text and '<page size="1048576" unit="KiB" />' in text
    assert "<qemu:commandline>" in text and 'xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"' in text
    again = parse_xml(text)
    assert not apply_pinning(again, request)


def test_options_left_out_are_left_alone():
    root = parse_xml(DOMAIN)
    assert apply_pinning(root, PinRequest(emulator_cpus="5"))
    state = read_pinning(root)
    assert state["vcpu_pins"] == {0: [0, 1], 3: [7]} and state["memory_mode"] == "interleave" and state["emulator_cpus"] == [5]


@pytest.mark.parametrize("kwargs, message", [
    ({"vcpu_pins": [1, 2]}, "vcpu_pins: expected a dict"),
    ({"vcpu_pins": {"a": "1"}}, "vcpu_pins: key 'a'"),
    ({"vcpu_pins": {"0": ""}}, "vcpu_pins[0]: empty cpuset"),
    ({"memory_mode": "loose"}, "memory_mode"),
    ({"hugepages": {"nodeset": "0"}}, "hugepages: expected a dict with size"),
    ({"hugepages": {"size": "none"}}, "hugepages.size"),
])
def test_bad_pin_requests(kwargs, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        PinRequest(**kwargs)


def test_read_assignment_units_and_devices():
    assignment = read_assignment(parse_xml(DOMAIN))
    assert assignment["hostdevs"] == ["0000:82:00.0", "0000:81:00.2"]
    assert assignment["memory_mb"] == 1024 and assignment["vcpus"] == 4
    assert assignment["numa_node"] is None and assignment["nodeset"] == "0-1"


def test_new_domain_round_trips_through_read_assignment():
    spec = TenantSpec({"name": "t", "domain_type": "kvm", "vcpus": 2, "memory_mb": 1000, "hugepage_size": "1G",
                       "gpus": ["0000:07:00.0"], "vfs": ["0000:0C:00.2"], "network_vfs": ["0000:0c:00.2"], "mac": "52:54:00:00:00:01",
                       "vlan": 7, "disks": [], "machine": "q35", "arch": "x86_64"})
    root = spec.build()
    assert root.find("cpu").get("mode") == "host-passthrough"
    assignment = read_assignment(root)
    assert assignment["hostdevs"] == ["0000:07:00.0", "0000:0c:00.2"]
    assert assignment["memory_mb"] == 1024 and assignment["hugepages"]["size"] == "1G"
    assert not spec.update(parse_xml(to_text(root)))


CAPABILITIES = """<capabilities><host><cpu><pages unit='KiB' size='4'/><pages unit='KiB' size='2048'/></cpu>
  <topology><cells num='2'>
    <cell id='0'><cpus num='2'><cpu id='0'/><cpu id='1'/></cpus></cell>
    <cell id='1'><cpus num='2'><cpu id='2'/><cpu id='3'/></cpus></cell>
  </cells></topology></host></capabilities>"""


@pytest.mark.parametrize("map_length, cpus", [(4, [0, 1, 2, 3]), (3, [0, 1, 2])])
def test_host_cpus_are_bounded_by_the_cpu_map(map_length, cpus):
    host = host_cpus(CAPABILITIES, map_length)
    assert host == {"cells": {0: [0, 1], 1: [2, 3]}, "cpus": cpus, "page_sizes_kb": [4, 2048], "map_length": map_length}


def test_pins_of_a_host_that_lacks_them_are_refused():
    host = host_cpus(CAPABILITIES, 4)
    with pytest.raises(InputError, match=r"hugepages.size: 1048576 KiB pages are not supported by this host"):
        PinRequest(hugepages={"size": "1G"}).validate(host, parse_xml(DOMAIN))
    with pytest.raises(InputError, match=r"vcpu_pins\[0\]: CPU\(s\) 4 are not on this host \(host CPUs 0-3\)"):
        PinRequest({"0": "4"}).validate(host, parse_xml(DOMAIN))


# --------------------------------------------------------------------------- UEFI, MMIO window, VF interfaces, held resources
SPEC = {"name": "t", "domain_type": "kvm", "vcpus": 2, "memory_mb": 4096, "hugepage_size": "1G", "gpus": ["0000:07:00.0"],
        "vfs": ["0000:0c:00.3", "0000:0c:00.2"], "network_vfs": ["0000:0c:00.3", "0000:0c:00.2"], "vlan": 100,
        "machine": "q35", "mmio_window_mb": 262144}


def test_a_new_uefi_domain():
    root = TenantSpec(dict(SPEC)).build()
    text = to_text(root)
    assert root.find("os").get("firmware") == "efi" and root.find("os/type").get("machine") == "q35"
    assert '<feature enabled="no" name="secure-boot" />' in text
    # libvirt refuses opt/ovmf/ names in <sysinfo type='fwcfg'>: QEMU's own -fw_cfg it is
    assert '<qemu:arg value="-fw_cfg" />' in text and '<qemu:arg value="name=opt/ovmf/X-PciMmio64Mb,string=262144" />' in text
    assert 'xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"' in text and "sysinfo" not in text
    assert root.find("cpu/maxphysaddr").get("mode") == "passthrough"
    assert mmio_window_of(root) == 262144 and firmware_of(root) == "efi"


@pytest.mark.parametrize("firmware, window, domain_type, expected", [
    ("bios", None, "kvm", {"firmware": None, "qemu_args": [], "maxphysaddr": True}),
    ("efi", None, "kvm", {"firmware": "efi", "qemu_args": [], "maxphysaddr": True}),
    ("efi", 131072, "qemu", {"firmware": "efi", "qemu_args": ["-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=131072"],
                             "maxphysaddr": False}),   # TCG: no host CPU model
])
def test_firmware_window_and_cpu(firmware, window, domain_type, expected):
    root = TenantSpec(dict(SPEC, firmware=firmware, mmio_window_mb=window, domain_type=domain_type)).build()
    assert root.find("os").get("firmware") == expected["firmware"]
    assert qemu_args(root) == expected["qemu_args"]
    assert (root.find("cpu/maxphysaddr") is not None) == expected["maxphysaddr"]


@pytest.mark.parametrize("supported, written, said", [
    (True, True, "written"),        # libvirt 8.7.0 or later
    (None, True, "written"),        # unknown: written as before (the call says the version is unknown)
    (False, False, "left out"),     # older libvirt (Ubuntu 22.04's 8.0.0) does not know <maxphysaddr>
])
def test_maxphysaddr_follows_the_hosts_libvirt(supported, written, said):
    spec = TenantSpec(dict(SPEC))
    spec.maxphysaddr = supported
    root = spec.build()
    assert (root.find("cpu/maxphysaddr") is not None) == written and spec.phys_bits == said
    assert root.find("cpu").get("mode") == "host-passthrough"
    # an existing definition without it: added where the host takes it, else left alone (no change each run)
    root.find("cpu").clear()
    root.find("cpu").set("mode", "host-passthrough")
    assert spec.update(root) == written and (root.find("cpu/maxphysaddr") is not None) == written
    assert not spec.update(root)


def qemu_args(root):
    return [arg.get("value") for arg in root.findall("{%s}commandline/{%s}arg" % (QEMU_NS, QEMU_NS))]


@pytest.mark.parametrize("before", [
    "",                                                                                  # no window yet
    "<qemu:arg value='-fw_cfg'/><qemu:arg value='name=opt/ovmf/X-PciMmio64Mb,string=65536'/>",  # another size
    "<qemu:arg value='-fw_cfg'/><qemu:arg value='opt/ovmf/X-PciMmio64Mb,string=bad'/>",  # unreadable, no name=
])
def test_the_window_argument_is_ours_alone(before):
    others = "<qemu:arg value='-fw_cfg'/><qemu:arg value='name=opt/com.example/x,string=1'/>"
    xml = DOMAIN.replace("</qemu:commandline>", "%s%s</qemu:commandline>" % (others, before))
    root = parse_xml(xml)
    spec = TenantSpec(dict(SPEC, mmio_window_mb=131072))
    assert spec.update(root)
    assert qemu_args(root) == ["-no-shutdown", "-fw_cfg", "name=opt/com.example/x,string=1",
                               "-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=131072"]
    assert mmio_window_of(parse_xml(to_text(root))) == 131072
    spec = TenantSpec(dict(SPEC, mmio_window_mb=None))
    spec.update(root)
    assert qemu_args(root) == ["-no-shutdown", "-fw_cfg", "name=opt/com.example/x,string=1"]
    assert any("keeps its bios firmware" in note for note in spec.notes)


def test_no_window_leaves_no_empty_commandline():
    root = TenantSpec(dict(SPEC, mmio_window_mb=131072)).build()
    spec = TenantSpec(dict(SPEC, mmio_window_mb=None))
    assert spec.update(root)
    assert root.find("{%s}commandline" % QEMU_NS) is None and mmio_window_of(root) is None


def test_network_vfs_are_interfaces_with_their_own_mac_in_address_order():
    root = TenantSpec(dict(SPEC)).build()
    got = [(i.find("mac").get("address"), i.find("vlan/tag").get("id"), i.get("managed")) for i in root.findall("devices/interface")]
    assert got == [(derived_mac("t", 1), "100", "no"), (derived_mac("t", 0), "100", "no")]
    assert [h.find("source/address").get("bus") for h in root.findall("devices/hostdev")] == ["0x07"]


def test_held_resources_of_a_running_domain():
    persistent = parse_xml(DOMAIN)
    live = parse_xml(DOMAIN.replace("bus='0x82'", "bus='0x83'").replace("<vcpupin vcpu='3' cpuset='7'/>", "<emulatorpin cpuset='9'/>"))
    held = held_resources(persistent, live)
    assert held["hostdevs"] == ["0000:82:00.0", "0000:81:00.2", "0000:83:00.0"]
    assert held["cpus"] == "0-1,7,9" and held["hugepages"] is None and held["numa_node"] is None
    backed = TenantSpec(dict(SPEC, hugepage_size="2M", memory_mb=100)).build()
    assert held_resources(backed)["hugepages"] == {"size": "2M", "node": None, "count": 50}


def test_a_tenant_interface_counts_as_in_use_for_sriov_and_vfio(tmp_path):
    """The definition tenant_domain writes (a VF as <interface type='hostdev'>), defined or
    running (its status file), makes the VF in use for sriov_vfs and vfio_bind (device_use)."""
    tree = FakeHost(tmp_path)
    defined = to_text(TenantSpec(dict(SPEC, name="defined")).build())
    running = "<domstatus state='running'>%s</domstatus>" % to_text(TenantSpec(dict(SPEC, name="running", vfs=["0000:0c:00.4"],
                                                                                    network_vfs=["0000:0c:00.4"])).build())
    tree.write("/etc/libvirt/qemu/defined.xml", defined)
    tree.write("/run/libvirt/qemu/running.xml", running)
    fs = Sysfs(str(tmp_path))
    topology = {"pci_devices": {}}
    assert usage_of(fs, topology, "0000:0c:00.2") == ["attached to libvirt domain defined"]
    assert usage_of(fs, topology, "0000:0c:00.4") == ["attached to libvirt domain running"]
    assert usage_of(fs, topology, "0000:0c:00.5") == []


def _nics(root):
    return [(i.get("type"), i.find("mac").get("address"), i.find("source").attrib, [t.get("id") for t in i.findall("vlan/tag")],
             i.find("model").get("type")) for i in root.findall("devices/interface")]


def test_the_management_and_data_nics_are_virtio_interfaces_found_by_their_mac():
    spec = TenantSpec(dict(SPEC, vfs=[], network_vfs=[]))
    spec.management = {"network": "gpuvirt-mgmt", "mac": "02:00:00:00:00:01"}
    spec.data_nic = {"bridge": "br-data", "mac": "02:00:00:00:00:02", "vlan": 100}
    root = spec.build()
    assert _nics(root) == [("network", "02:00:00:00:00:01", {"network": "gpuvirt-mgmt"}, [], "virtio"),
                           ("bridge", "02:00:00:00:00:02", {"bridge": "br-data"}, ["100"], "virtio")]
    # defined twice: nothing changes
    assert spec.update(root) is False
    # the data NIC moved to another network and lost its tag: that interface alone is replaced
    spec.data_nic = {"network": "gpuvirt-data", "mac": "02:00:00:00:00:02"}
    assert spec.update(root) is True
    assert _nics(root)[1] == ("network", "02:00:00:00:00:02", {"network": "gpuvirt-data"}, [], "virtio")
    assert _nics(root)[0][1] == "02:00:00:00:00:01" and spec.update(root) is False
