# -*- coding: utf-8 -*-
"""The domain XML edits of libvirt_domain, without a connection: only the managed elements
change, namespaced metadata keeps its prefix, and what is written reads back the same; and
the removal of a guest that ignores the power button (libvirt's test driver)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_domain import (
    PinRequest, TenantDomain, TenantSpec, apply_pinning, parse_xml, read_assignment, read_pinning, to_text)

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


# --------------------------------------------------------------------------- removal of a guest that ignores shutdown
class _DeafDomain:
    """A libvirt test-driver domain whose guest ignores the ACPI power button (as the lab's
    diskless tenants do): shutdown() is accepted and nothing happens."""

    def __init__(self, domain):
        self._domain = domain
        self.shutdowns = 0

    def shutdown(self):
        self.shutdowns += 1
        return 0

    def __getattr__(self, name):
        return getattr(self._domain, name)


class _Conn:
    def __init__(self, conn):
        self._conn = conn
        self.domain = None

    def lookupByName(self, name):  # pylint: disable=invalid-name
        self.domain = _DeafDomain(self._conn.lookupByName(name))
        return self.domain

    def __getattr__(self, name):
        return getattr(self._conn, name)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def deaf_running_domain():
    libvirt = pytest.importorskip("libvirt")
    libvirt.registerErrorHandler(lambda *_: None, None)
    conn = libvirt.open("test:///default")
    spec = TenantSpec({"name": "deaf", "domain_type": "test", "arch": "i686", "vcpus": 1, "memory_mb": 16})
    conn.defineXML(to_text(spec.build())).create()
    yield libvirt, conn
    try:
        domain = conn.lookupByName("deaf")
        if domain.isActive():
            domain.destroy()
        domain.undefine()
    except libvirt.libvirtError:
        pass
    conn.close()


def test_removal_waits_then_refuses_without_force(deaf_running_domain):
    libvirt, conn = deaf_running_domain
    clock = _Clock()
    wrapped = _Conn(conn)
    tenant = TenantDomain(wrapped, "test:///default", TenantSpec.named("deaf"), "absent", shutdown_timeout=30,
                          clock=clock, sleep=clock.sleep)
    with pytest.raises(StateError, match=r"deaf did not shut down within 30s .*force_off"):
        tenant.apply()
    assert wrapped.domain.shutdowns == 1 and clock.now >= 30
    assert conn.lookupByName("deaf").isActive()
    assert conn.lookupByName("deaf").isPersistent()
    del libvirt


def test_removal_forces_off_only_when_allowed(deaf_running_domain):
    libvirt, conn = deaf_running_domain
    clock = _Clock()
    tenant = TenantDomain(_Conn(conn), "test:///default", TenantSpec.named("deaf"), "absent", shutdown_timeout=5, force_off=True,
                          clock=clock, sleep=clock.sleep)
    tenant.apply()
    assert tenant.result()["forced_off"] and tenant.result()["removed"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName("deaf")
