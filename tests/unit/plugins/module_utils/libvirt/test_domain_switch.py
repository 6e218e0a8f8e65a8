# -*- coding: utf-8 -*-
"""The emulated PCIe switch of a tenant (libvirt/domain_switch): the pcie_switches option checked,
a new definition built and an existing one brought to it (each group's devices on the downstream
ports of one switch on a root port), libvirt's schema accepting it, and what is right left alone."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_switch import check_switches, switch_layout
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import parse_xml, to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import TenantSpec

GPU, GPU2, VF, VF2 = "0000:10:00.0", "0000:20:00.0", "0000:18:00.1", "0000:28:00.1"


def options(**extra):
    base = {"name": "t", "vcpus": 4, "memory_mb": 4096, "machine": "q35", "gpus": [GPU, GPU2], "vfs": [VF, VF2],
            "firmware": "efi", "pcie_switches": [[GPU, VF]]}
    base.update(extra)
    return base


def models(root):
    return dict((c.get("index"), c.get("model")) for c in root.findall("devices/controller[@type='pci']"))


def chain(root, address):
    """The models from a device up to the root bus: [its port, ..., the root port]."""
    by_index = dict((c.get("index"), c) for c in root.findall("devices/controller[@type='pci']"))
    element = next(e for e in root.findall("devices/hostdev") if
                   "%04x:%02x:%02x.%x" % tuple(int(e.find("source/address").get(k), 16)
                                               for k in ("domain", "bus", "slot", "function")) == address)
    out = []
    while element.find("address") is not None:
        element = by_index.get(str(int(element.find("address").get("bus"), 16)))
        if element is None:
            break
        out.append(element.get("model"))
    return out


def test_a_gpu_and_its_vf_sit_under_one_switch_and_validate(tmp_path):
    root = TenantSpec(options()).build()
    assert chain(root, GPU) == chain(root, VF) == ["pcie-switch-downstream-port", "pcie-switch-upstream-port", "pcie-root-port"]
    # the devices in no switch keep libvirt's placement (no address of ours)
    assert chain(root, GPU2) == [] and chain(root, VF2) == []
    assert sorted(models(root).values()) == ["pcie-root-port", "pcie-switch-downstream-port", "pcie-switch-downstream-port",
                                             "pcie-switch-upstream-port"]
    assert switch_layout(root) == [[GPU, VF]]
    path = tmp_path / "t.xml"
    path.write_text(to_text(root), encoding="utf-8")
    check = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr + to_text(root)
    assert not TenantSpec(options()).update(parse_xml(to_text(root)))


def test_without_switches_the_definition_is_as_before():
    plain = TenantSpec(options(pcie_switches=[])).build()
    assert models(plain) == {} and switch_layout(plain) == []
    assert all(e.find("address") is None for e in plain.findall("devices/hostdev"))


def test_an_existing_definition_is_brought_to_its_switches_and_back():
    root = TenantSpec(options(pcie_switches=[])).build()
    both = options(pcie_switches=[[GPU, VF], [GPU2, VF2]])
    assert TenantSpec(both).update(root)
    assert switch_layout(root) == [[GPU, VF], [GPU2, VF2]]
    assert not TenantSpec(both).update(root)
    # regrouped: the old switches out, the new one in
    regrouped = options(pcie_switches=[[GPU, GPU2, VF]])
    assert TenantSpec(regrouped).update(root)
    assert switch_layout(root) == [[GPU, VF, GPU2]] and chain(root, VF2) == []
    assert list(models(root).values()).count("pcie-root-port") == 1
    assert not TenantSpec(regrouped).update(root)
    # none: the switches and the addresses on them leave
    assert TenantSpec(options(pcie_switches=[])).update(root)
    assert models(root) == {} and all(e.find("address") is None for e in root.findall("devices/hostdev"))


def test_a_switch_of_other_devices_is_left_alone():
    root = TenantSpec(options(pcie_switches=[])).build()
    other = parse_xml(to_text(root).replace(
        "<devices>", "<devices><controller type='pci' index='7' model='pcie-root-port'/>"
        "<controller type='pci' index='8' model='pcie-switch-upstream-port'><address type='pci' bus='0x07' slot='0x00'/></controller>"
        "<controller type='pci' index='9' model='pcie-switch-downstream-port'><address type='pci' bus='0x08' slot='0x00'/></controller>"))
    assert not TenantSpec(options(pcie_switches=[])).update(other)
    assert TenantSpec(options()).update(other)
    assert sorted(models(other)) == ["10", "11", "12", "13", "7", "8", "9"]


@pytest.mark.parametrize("switches, machine, message", [
    ([[GPU, "0000:99:00.0"]], "q35", "pcie_switches[0]: 0000:99:00.0 is not one of the tenant's GPUs or VFs"),
    ([[GPU, VF], [VF, GPU2]], "q35", "pcie_switches[1]: 0000:18:00.1 is in more than one switch"),
    ([[GPU]], "q35", "pcie_switches[0]: a switch holds 2 to 32 devices (got 1)"),
    ([[GPU, VF]], "pc", "pcie_switches: an emulated PCIe switch needs a q35 machine (machine: pc)"),
    ("0000:10:00.0", "q35", "pcie_switches: expected a list of device lists"),
    ([GPU], "q35", "pcie_switches[0]: expected a list of PCI addresses"),
])
def test_a_bad_switch_list_is_refused_naming_it(switches, machine, message):
    with pytest.raises(InputError) as error:
        check_switches(switches, [GPU, GPU2, VF, VF2], machine)
    assert str(error.value).startswith(message), str(error.value)


def test_a_switch_across_guest_cells_is_refused():
    cells = [{"node": 1, "vcpus": "0-1", "memory_kib": 2 << 20, "devices": [GPU, VF]},
             {"node": 3, "vcpus": "2-3", "memory_kib": 2 << 20, "devices": [GPU2, VF2]}]
    with pytest.raises(InputError) as error:
        TenantSpec(options(numa_cells=cells, pcie_switches=[[GPU, VF2]]))
    assert "pcie_switches[0]: 0000:10:00.0, 0000:28:00.1 are in different numa_cells (0, 1)" in str(error.value)
    root = TenantSpec(options(numa_cells=cells, pcie_switches=[[GPU, VF], [GPU2, VF2]])).build()
    assert chain(root, GPU) == ["pcie-switch-downstream-port", "pcie-switch-upstream-port", "pcie-root-port", "pcie-expander-bus"]
