# -*- coding: utf-8 -*-
"""numa_pin against libvirt's built-in test driver (conftest ``libvirt_conn``): a real libvirt, in
process, with a host of 2 NUMA cells (CPUs 0-7 and 8-15; CPU maps 8 wide) and page sizes
4K/8K/2M/1G. Its state lives while a connection is open, so each test holds one."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.modules import numa_pin

from conftest import LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error

BASE_XML = """<domain type='test' xmlns:gv='https://example.invalid/gpuvirt'>
  <name>{name}</name>
  <metadata><gv:note role='tenant'>keep me</gv:note></metadata>
  <memory unit='KiB'>131072</memory>
  <currentMemory unit='KiB'>131072</currentMemory>
  <vcpu placement='static'>2</vcpu>
  <cputune><shares>2048</shares></cputune>
  <os><type arch='i686'>hvm</type><boot dev='hd'/></os>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <disk type='file' device='disk'><source file='/guest/{name}.img'/><target dev='vda' bus='virtio'/></disk>
    <interface type='network'><mac address='aa:bb:cc:dd:ee:01'/><source network='default'/></interface>
  </devices>
</domain>"""


@pytest.fixture
def domain(libvirt_conn):
    name = "pin-" + uuid.uuid4().hex[:8]
    return libvirt_conn.defineXML(BASE_XML.format(name=name))


def inactive(dom):
    return dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)


def without_managed(xml_text):
    """The domain XML with the elements numa_pin manages removed, for 'nothing else changed'."""
    root = ET.fromstring(xml_text)
    cputune = root.find("cputune")
    if cputune is not None:
        for child in list(cputune):
            if child.tag in ("vcpupin", "emulatorpin"):
                cputune.remove(child)
    for tag in ("numatune", "memoryBacking"):
        for element in root.findall(tag):
            root.remove(element)
    return ET.canonicalize(ET.tostring(root, encoding="unicode"), strip_text=True)


PIN = {"vcpu_pins": {"0": "2", "1": 3}, "emulator_cpus": "4", "nodeset": "0", "hugepages": {"size": "2M"}}


def test_pins_the_persistent_definition_and_keeps_the_rest(domain):
    before = inactive(domain)
    result = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI))
    assert result["changed"] and result["config_changed"] and not result["live_changed"]
    after = inactive(domain)
    root = ET.fromstring(after)
    assert [(p.get("vcpu"), p.get("cpuset")) for p in root.findall("cputune/vcpupin")] == [("0", "2"), ("1", "3")]
    assert root.find("cputune/emulatorpin").get("cpuset") == "4"
    assert root.find("cputune/shares").text == "2048"
    assert root.find("numatune/memory").attrib == {"mode": "strict", "nodeset": "0"}
    assert root.find("memoryBacking/hugepages/page").attrib == {"size": "2048", "unit": "KiB"}
    assert without_managed(after) == without_managed(before)
    metadata = before[before.index("<metadata"):before.index("</metadata>")]
    assert "keep me" in metadata and metadata in after
    assert result["vcpu_pins"] == {"0": "2", "1": "3"} and result["nodeset"] == "0"


def test_runs_on_an_injected_host(domain, tmp_path):
    """The one host seam: a Host over a temporary tree, nothing patched; libvirt from ``uri``."""
    host = Host(str(tmp_path), commands=RecordedCommands())
    result = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI), host=host)
    assert result["changed"] and result["vcpu_pins"] == {"0": "2", "1": "3"}
    assert ET.fromstring(inactive(domain)).find("numatune/memory").get("nodeset") == "0"
    assert host.commands.calls == []


def test_second_run_changes_nothing(domain):
    run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI))
    xml = inactive(domain)
    again = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI))
    assert not again["changed"]
    assert inactive(domain) == xml


def test_check_mode_and_diff_change_nothing(domain):
    before = inactive(domain)
    result = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI), check_mode=True, diff=True)
    assert result["changed"]
    assert inactive(domain) == before
    persistent = result["diff"][0]
    assert "vcpupin" not in persistent["before"] and "<vcpupin vcpu=\"0\" cpuset=\"2\" />" in persistent["after"]
    changed_lines = set(persistent["after"].splitlines()) ^ set(persistent["before"].splitlines())
    assert all(any(tag in line for tag in ("vcpupin", "emulatorpin", "numatune", "memory mode", "memoryBacking", "hugepages", "page "))
               for line in changed_lines), changed_lines


@pytest.mark.parametrize("mode", ["strict", "preferred", "interleave"])
def test_memory_modes(domain, mode):
    result = run_module(numa_pin.main, {"name": domain.name(), "uri": URI, "nodeset": "1", "memory_mode": mode})
    assert result["changed"]
    assert ET.fromstring(inactive(domain)).find("numatune/memory").get("mode") == mode
    assert not run_module(numa_pin.main, {"name": domain.name(), "uri": URI, "nodeset": "1", "memory_mode": mode})["changed"]


def test_changing_a_pin_replaces_all_vcpupins(domain):
    run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI))
    result = run_module(numa_pin.main, {"name": domain.name(), "uri": URI, "vcpu_pins": {"0": "5-6"}})
    assert result["changed"]
    root = ET.fromstring(inactive(domain))
    assert [(p.get("vcpu"), p.get("cpuset")) for p in root.findall("cputune/vcpupin")] == [("0", "5-6")]
    assert root.find("cputune/emulatorpin").get("cpuset") == "4"


@pytest.mark.parametrize("args, message", [
    ({"vcpu_pins": {"0": "99"}}, "vcpu_pins[0]: CPU(s) 99 are not on this host"),
    ({"vcpu_pins": {"0": "x"}}, "vcpu_pins[0]"),
    ({"vcpu_pins": {"5": "1"}}, "vcpu_pins: vCPU(s) 5 do not exist; the domain has 2"),
    ({"emulator_cpus": "0-200"}, "emulator_cpus: CPU(s)"),
    ({"nodeset": "3"}, "nodeset: NUMA node(s) 3 do not exist on this host (nodes 0-1)"),
    ({"hugepages": {"size": "3M"}}, "hugepages.size"),
    ({"hugepages": {"size": "2M", "nodeset": "0"}}, "hugepages.nodeset: guest NUMA cell(s) 0 are not defined"),
])
def test_bad_input_fails_and_changes_nothing(domain, args, message):
    before = inactive(domain)
    result = run_module(numa_pin.main, dict(args, name=domain.name(), uri=URI))
    assert result.get("failed"), result
    assert message in result["msg"]
    assert inactive(domain) == before


def test_unknown_domain(libvirt_conn):
    del libvirt_conn
    result = run_module(numa_pin.main, {"name": "no-such-domain", "uri": URI, "nodeset": "0"})
    assert result["failed"] and "name: no domain no-such-domain on test:///default" in result["msg"]


def test_unreachable_uri():
    result = run_module(numa_pin.main, {"name": "x", "uri": "test:///nonexistent/path.xml"})
    assert result["failed"] and result["msg"].startswith("uri: cannot connect to test:///nonexistent/path.xml")


def live_pins(dom):
    info = dom.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)
    return [[cpu for cpu, on in enumerate(cpus) if on] for cpus in info]


def test_live_applies_to_the_running_domain(domain):
    domain.create()
    result = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI, live=True), diff=True)
    assert result["changed"] and result["live_changed"] and result["active"]
    assert live_pins(domain) == [[2], [3]]
    assert [c for c, on in enumerate(domain.emulatorPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)) if on] == [4]
    assert domain.numaParameters(libvirt.VIR_DOMAIN_AFFECT_LIVE)["numa_nodeset"] == "0"
    assert result["diff"][1]["after"] == "vcpu 0: 2\nvcpu 1: 3\nemulator: 4\nnodeset: 0\n"
    # hugepage backing of a running domain waits for its restart
    assert result["restart_required"]
    again = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI, live=True))
    assert not again["changed"]


def test_without_live_the_running_domain_is_left_alone(domain):
    domain.create()
    before = live_pins(domain)
    result = run_module(numa_pin.main, {"name": domain.name(), "uri": URI, "vcpu_pins": {"0": "6"}})
    assert result["changed"] and not result["live_changed"] and result["restart_required"]
    assert live_pins(domain) == before
    assert ET.fromstring(inactive(domain)).find("cputune/vcpupin").get("cpuset") == "6"


def test_live_check_mode_touches_nothing(domain):
    domain.create()
    before = live_pins(domain)
    result = run_module(numa_pin.main, dict(PIN, name=domain.name(), uri=URI, live=True), check_mode=True)
    assert result["changed"] and result["live_changed"]
    assert live_pins(domain) == before


def test_check_mode_pins_of_vcpus_the_domain_gets_first_are_a_warning(domain):
    # a resize in check mode: tenant_domain would add vCPU 2 before numa_pin pins it
    before = inactive(domain)
    args = {"name": domain.name(), "uri": URI, "vcpu_pins": {"0": "1", "1": "2", "2": "3"}}
    result = run_module(numa_pin.main, args, check_mode=True, diff=True)
    assert not result.get("failed") and result["changed"]
    assert any("vCPU(s) 2 are not in the definition yet" in w for w in result["warnings"]), result
    assert 'vcpu="2"' in result["diff"][0]["after"]
    assert inactive(domain) == before
    real = run_module(numa_pin.main, args)
    assert real.get("failed") and "vCPU(s) 2 do not exist" in real["msg"]
