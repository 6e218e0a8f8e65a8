# -*- coding: utf-8 -*-
"""lab/nested_pci.py, the nested stage's check gpu_switch: the bridge chain a domain's XML gives a
device against the one its guest reads in sysfs.

The domain is the one the collection builds (libvirt/tenant_spec) for the nested stage's nest-a: one
guest cell with the lab's GPU 0 (edu, 0000:83:00.0) and its first VF (0000:84:10.0) in one
pcie_switches group. The guest's lines are built from that XML's own numbers (the root bus is the
expander's busNr; the buses below it are the ones a firmware numbering depth-first gives), not
typed in; the check must pass on them and fail on each way they can be wrong."""

from __future__ import annotations

import importlib.util
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import TenantSpec

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GPU, VF = "0000:83:00.0", "0000:84:10.0"
GPU_ID, VF_ID = "0x1234:0x11e8", "0x8086:0x10ca"


@pytest.fixture(name="pci")
def fixture_pci():
    spec = importlib.util.spec_from_file_location("nested_pci", os.path.join(REPO_ROOT, "lab", "nested_pci.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def domain(switches=True):
    options = {"name": "nest-a", "vcpus": 1, "memory_mb": 256, "machine": "q35", "gpus": [GPU], "vfs": [VF],
               "firmware": "bios", "pcie_switches": [[GPU, VF]] if switches else [],
               "numa_cells": [{"node": 1, "vcpus": "0", "memory_kib": 256 << 10, "devices": [GPU, VF]}]}
    return to_text(TenantSpec(options).build())


def guest_view(chains):
    """The guest's sysfs paths and ids for two domain chains: the root bus is the expander's busNr;
    below it buses are numbered depth-first, one per bridge, as a firmware enumerating the tree
    does; each level's slot and function and each bridge's id are the domain's."""
    paths, ids, buses = [], {}, {}
    ids_of = {"pcie-root-port": "0x1b36:0x000c", "x3130-upstream": "0x104c:0x8232",
              "xio3130-downstream": "0x104c:0x8233"}
    next_bus = chains[0][0]["root_bus"] + 1
    for chain, device_id in zip(chains, (GPU_ID, VF_ID)):
        bus = chain[0]["root_bus"]
        path = ["pci0000:%02x" % bus]
        for depth, level in enumerate(chain[1:], start=1):
            address = "0000:%02x:%02x.%x" % (bus, level["slot"], level["function"])
            path.append(address)
            ids[address] = device_id if level["model"] == "device" else ids_of[level["qemu"]]
            if level["model"] != "device":
                key = tuple(path)
                if key not in buses:
                    buses[key] = next_bus
                    next_bus += 1
                bus = buses[key]
        paths.append("/".join(path))
    return paths, ids


def test_the_collections_nest_a_passes(pci):
    xml = domain()
    chains = [pci.xml_chain(xml, GPU), pci.xml_chain(xml, VF)]
    assert [level["model"] for level in chains[0]] == [
        "pcie-expander-bus", "pcie-root-port", "pcie-switch-upstream-port", "pcie-switch-downstream-port", "device"]
    assert chains[0][0]["node"] == 0
    (gpu_path, vf_path), ids = guest_view(chains)
    guest = [pci.guest_chain(gpu_path, ids), pci.guest_chain(vf_path, ids)]
    assert pci.chain_problems(chains[0], guest[0], GPU_ID) == []
    assert pci.chain_problems(chains[1], guest[1], VF_ID) == []
    assert pci.shared_switch(chains[0], chains[1], guest[0], guest[1]) == []
    assert "x3130-upstream 00.0" in pci.chain_text(chains[0])


def test_a_guest_that_reads_another_tree_fails(pci):
    xml = domain()
    chains = [pci.xml_chain(xml, GPU), pci.xml_chain(xml, VF)]
    (gpu_path, vf_path), ids = guest_view(chains)
    # the VF on the GPU's downstream port
    moved = gpu_path.rsplit("/", 1)[0] + "/" + vf_path.rsplit("/", 1)[1]
    guest = [pci.guest_chain(gpu_path, ids), pci.guest_chain(moved, ids)]
    assert any("domain slot 01.0" in p for p in pci.chain_problems(chains[1], guest[1], VF_ID))
    assert any("one downstream port" in p for p in pci.shared_switch(chains[0], chains[1], guest[0], guest[1]))
    # another root bus than the expander's
    on_main = "pci0000:00" + gpu_path[len("pci0000:fb"):]
    assert pci.chain_problems(chains[0], pci.guest_chain(on_main, ids), GPU_ID)[0].startswith("root bus: domain 0xfb")
    # a bridge of another kind (a root port where the upstream port should be)
    upstream = gpu_path.split("/")[2]
    wrong = dict(ids, **{upstream: "0x1b36:0x000c"})
    assert any("expected 0x104c:0x8232" in p
               for p in pci.chain_problems(chains[0], pci.guest_chain(gpu_path, wrong), GPU_ID))
    # the device at the GPU's place is not the one expected there
    assert any("guest id 0x1234:0x11e8" in p and "expected 0x8086:0x10ca" in p for p in pci.chain_problems(chains[0], pci.guest_chain(gpu_path, ids), VF_ID))
    # a level missing
    short = "/".join(gpu_path.split("/")[:2] + gpu_path.split("/")[-1:])
    assert "level(s) below the root bus" in pci.chain_problems(chains[0], pci.guest_chain(short, ids), GPU_ID)[0]


def test_a_domain_without_the_switch_fails(pci):
    xml = domain(switches=False)
    chains = [pci.xml_chain(xml, GPU), pci.xml_chain(xml, VF)]
    problems = pci.shared_switch(chains[0], chains[1], chains[0], chains[1])
    assert problems and all("below no switch" in p for p in problems)


@pytest.mark.parametrize("path", ["", "0000:fb:00.0/0000:fc:00.0", "pci0000:fb", "pci0000:fb/fb:00.0"])
def test_a_path_of_another_shape_is_refused(pci, path):
    with pytest.raises(ValueError):
        pci.guest_chain(path, {})


def test_a_device_the_domain_lacks_is_named(pci):
    with pytest.raises(ValueError, match="the domain has no host device 0000:99:00.0"):
        pci.xml_chain(domain(), "0000:99:00.0")
