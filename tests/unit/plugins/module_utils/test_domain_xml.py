# -*- coding: utf-8 -*-
"""The domain XML built and read (domain_xml), without libvirt: only the managed elements
change, namespaced metadata keeps its prefix, and what is written reads back the same."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_xml import (
    PinRequest, TenantSpec, apply_pinning, host_cpus, parse_xml, read_assignment, read_pinning, to_text)

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
