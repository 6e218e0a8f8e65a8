# -*- coding: utf-8 -*-
"""The host's PCIe link facts of a placed tenant (planning/pci_links), taken as NCCL takes a link on
bare metal (src/graph/xml.cc ncclTopoGetXmlFromSys: the lower of the device's max_link_speed /
max_link_width and its parent port's), on the lab's real capture (tests/fixtures/lab/bare.tar, whose
sysfs holds max_link_*: PCIe functions at 2.5 GT/s x1 under 16 GT/s x32 root ports, a conventional
PCI function with "Unknown" and 255, a device without the files) and on the DGX A100-class host
model, built from captures that hold no link files (an older capture: the facts are said to be
missing, never guessed)."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo import check_links
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning.pci_links import guest_layouts, nccl_link, plan_links, tenant_links

from fakes.captured_trees import lab_capture  # pylint: disable=import-error
from placement_topologies import dgx_a100  # pylint: disable=import-error

LAB = read_topology(lab_capture("bare"), ["1234:11e8"], ["1b36:0010"])
X1 = {"link_speed": "2.5 GT/s PCIe", "link_width": 1}


def test_the_lower_of_the_device_and_its_port_as_nccl_reads_it():
    pci = LAB["pci_devices"]
    assert pci["0000:83:00.0"]["max_link_speed"] == "2.5 GT/s PCIe" and pci["0000:80:02.0"]["max_link_width"] == 32
    assert nccl_link(pci, "0000:83:00.0") == (X1, None)
    # a port alone on its root bus: its own link
    assert nccl_link(pci, "0000:80:02.0") == ({"link_speed": "16.0 GT/s PCIe", "link_width": 32}, None)


def test_no_pcie_link_is_said():
    pci = LAB["pci_devices"]
    link, why = nccl_link(pci, "0000:00:05.0")
    assert link is None and "max_link_speed 'Unknown', max_link_width 255" in why
    link, why = nccl_link(pci, "0000:82:00.0")
    assert link is None and "no max_link_speed/max_link_width for 0000:82:00.0" in why
    assert nccl_link(pci, "0000:99:00.0") == (None, "0000:99:00.0 is not in the host model")


def test_a_tenant_with_known_links():
    placement = {"gpus": ["0000:83:00.0"], "vfs": ["0000:81:00.2"], "vf_pfs": {"0000:81:00.2": "0000:81:00.0"}, "pcie_affinity": "PHB"}
    assert tenant_links(placement, LAB) == {"level": "PHB", "gpu": X1, "nic": X1, "switch": None, "missing": None, "unknown": {}}


def test_the_lab_gpu_stand_in_has_no_link():
    placement = {"gpus": ["0000:82:00.0"], "vfs": ["0000:81:00.2"], "vf_pfs": {"0000:81:00.2": "0000:81:00.0"}, "pcie_affinity": "PHB"}
    links = tenant_links(placement, LAB)
    # the distance and the NIC's link stay known; only the GPU's is left to NCCL in the guest
    assert links["gpu"] is None and links["level"] == "PHB" and links["missing"] is None and links["nic"] == X1
    assert list(links["unknown"]) == ["gpu"] and "0000:82:00.0" in links["unknown"]["gpu"]


def test_an_older_capture_gives_no_links_and_says_so():
    plan = {"placements": {
        "a": {"gpus": ["0000:10:00.0"], "vfs": ["0000:18:00.1"], "vf_pfs": {"0000:18:00.1": "0000:18:00.0"}, "pcie_affinity": "PXB"},
        "cpu-only": {"gpus": [], "vfs": ["0000:28:00.2"], "pcie_affinity": None},
        "no-distance": {"gpus": ["0000:20:00.0"], "vfs": ["0000:28:00.2"], "pcie_affinity": None}}}
    links = plan_links(plan, dgx_a100())
    assert sorted(links) == ["a", "no-distance"]
    assert links["a"]["level"] == "PXB" and links["a"]["missing"] is None and links["a"]["gpu"] is None and links["a"]["nic"] is None
    assert "no max_link_speed/max_link_width for 0000:10:00.0" in links["a"]["unknown"]["gpu"]
    assert "0000:18:00.0" in links["a"]["unknown"]["nic"] and "switch" not in links["a"]["unknown"]
    assert links["no-distance"]["missing"] == "the plan gives no distance between the tenant's GPUs and VFs"


def test_gpus_with_different_links_are_not_averaged():
    placement = {"gpus": ["0000:83:00.0", "0000:80:02.0"], "vfs": ["0000:81:00.2"], "vf_pfs": {"0000:81:00.2": "0000:81:00.0"},
                 "pcie_affinity": "PHB"}
    links = tenant_links(placement, LAB)
    assert links["gpu"] is None and links["nic"] == X1
    assert links["unknown"] == {"gpu": "the tenant's GPUs have different links on the host (2.5 GT/s PCIe x1, 16.0 GT/s PCIe x32)"}


def test_pix_needs_a_bridge_both_sit_under():
    # 0000:81:00.0 and 0000:83:00.0 hang off two root ports of one root bus: no shared bridge to give as the switch
    placement = {"gpus": ["0000:83:00.0"], "vfs": ["0000:81:00.2"], "vf_pfs": {"0000:81:00.2": "0000:81:00.0"}, "pcie_affinity": "PIX"}
    links = tenant_links(placement, LAB)
    assert links["switch"] is None and links["unknown"] == {"switch": "no bridge shared by the GPUs and PFs"}


def test_guest_layouts_follow_the_domain_entries():
    """Each device's guest cell and emulated switch as the tenant_domain entry lays them out; a GPU's companion (its audio
    function, in the entry's gpus and cell) left out; a VF not made yet takes its PF's class; a tenant without VFs none."""
    plan = {"placements": {
        "a": {"gpus": ["0000:83:00.0"], "vfs": ["0000:81:00.2"], "vf_pfs": {"0000:81:00.2": "0000:81:00.0"}},
        "gpu-only": {"gpus": ["0000:82:00.0"], "vfs": []}}}
    entries = [{"name": "a", "gpus": ["0000:83:00.0", "0000:83:00.1"], "vfs": ["0000:81:00.2"],
                "numa_cells": [{"node": 1, "devices": ["0000:83:00.0", "0000:83:00.1", "0000:81:00.2"]}],
                "pcie_switches": [["0000:83:00.0", "0000:81:00.2"]]},
               {"name": "gpu-only", "gpus": ["0000:82:00.0"], "vfs": []}]
    layouts = guest_layouts(plan, entries, LAB)
    assert layouts == {"a": {"gpus": ["0000:83:00.0"], "nics": ["0000:81:00.2"],
                             "classes": {"0000:83:00.0": LAB["pci_devices"]["0000:83:00.0"]["class"],
                                         "0000:81:00.2": LAB["pci_devices"]["0000:81:00.0"]["class"]},
                             "cells": [["0000:83:00.0", "0000:81:00.2"]], "switches": [["0000:83:00.0", "0000:81:00.2"]]}}
    assert "0000:81:00.2" not in LAB["pci_devices"] and layouts["a"]["classes"]["0000:81:00.2"]


def _device(address, upstream, speed, width, cls="0x060400"):
    return {"address": address, "class": cls, "upstream": upstream, "max_link_speed": speed, "max_link_width": width}


def pxb_host():
    """A host model of the PXB layout (a GPU and a ConnectX PF under different switches below a shared one, each switch an
    upstream and downstream ports as sysfs nests them; the link strings as Linux 5.7 and later print them)."""
    gen4, gen5 = "16.0 GT/s PCIe", "32.0 GT/s PCIe"
    pci = dict((d["address"], d) for d in [
        _device("0000:00:01.0", [], gen5, 16),                                                     # root port
        _device("0000:01:00.0", ["0000:00:01.0"], gen5, 16),                                       # shared switch, upstream
        _device("0000:02:00.0", ["0000:01:00.0", "0000:00:01.0"], gen5, 16),                       # its downstream ports
        _device("0000:02:01.0", ["0000:01:00.0", "0000:00:01.0"], gen4, 16),
        _device("0000:03:00.0", ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"], gen5, 16),       # the GPU's switch
        _device("0000:04:00.0", ["0000:03:00.0", "0000:02:00.0", "0000:01:00.0", "0000:00:01.0"], gen5, 16),
        _device("0000:05:00.0", ["0000:04:00.0", "0000:03:00.0", "0000:02:00.0", "0000:01:00.0", "0000:00:01.0"],
                gen4, 16, "0x030200"),                                                             # the GPU
        _device("0000:06:00.0", ["0000:02:01.0", "0000:01:00.0", "0000:00:01.0"], gen5, 8),        # the PF's switch
        _device("0000:07:00.0", ["0000:06:00.0", "0000:02:01.0", "0000:01:00.0", "0000:00:01.0"], gen5, 16),
        _device("0000:08:00.0", ["0000:07:00.0", "0000:06:00.0", "0000:02:01.0", "0000:01:00.0", "0000:00:01.0"],
                gen5, 16, "0x020000"),                                                             # the PF
    ])
    return {"pci_devices": pci}


PXB_PLACEMENT = {"gpus": ["0000:05:00.0"], "vfs": ["0000:08:00.2"], "vf_pfs": {"0000:08:00.2": "0000:08:00.0"}, "pcie_affinity": "PXB"}
GEN4X16 = {"link_speed": "16.0 GT/s PCIe", "link_width": 16}
GEN5X16 = {"link_speed": "32.0 GT/s PCIe", "link_width": 16}


def test_pxb_gives_each_switch_level_as_nccl_reads_it():
    links = tenant_links(PXB_PLACEMENT, pxb_host())
    # each switch is its upstream port, the lower of its link and its parent port's: the shared one's root port; the
    # GPU's switch under a gen5 x16 port; the PF's switch, x8 itself, under a gen4 port
    assert links == {"level": "PXB", "gpu": GEN4X16, "nic": GEN5X16, "switch": None, "missing": None, "unknown": {},
                     "shared_switch": GEN5X16, "gpu_switch": GEN5X16, "nic_switch": {"link_speed": "16.0 GT/s PCIe", "link_width": 8}}


def test_pxb_switch_links_the_host_cannot_give_are_said():
    for address, kind in (("0000:01:00.0", "shared_switch"), ("0000:03:00.0", "gpu_switch"), ("0000:06:00.0", "nic_switch")):
        host = pxb_host()
        host["pci_devices"][address] = dict(host["pci_devices"][address], max_link_speed=None, max_link_width=None)
        links = tenant_links(PXB_PLACEMENT, host)
        assert links[kind] is None and list(links["unknown"]) == [kind], links
        assert "no max_link_speed/max_link_width for %s" % address in links["unknown"][kind]
        assert all(links[other] for other in ("shared_switch", "gpu_switch", "nic_switch") if other != kind)


def test_pxb_without_upstream_chains_says_so():
    """A host model without the bridges above the devices (the DGX A100-class model): no switch level, and why."""
    plan = {"placements": {"a": dict(PXB_PLACEMENT, gpus=["0000:10:00.0"], vfs=["0000:18:00.1"],
                                     vf_pfs={"0000:18:00.1": "0000:18:00.0"})}}
    links = plan_links(plan, dgx_a100())["a"]
    assert [links[kind] for kind in ("shared_switch", "gpu_switch", "nic_switch")] == [None] * 3
    assert all(links["unknown"][kind] == "no bridge shared by the GPUs and PFs" for kind in ("shared_switch", "gpu_switch", "nic_switch"))


def test_pxb_links_are_what_the_guest_stage_reads():
    """The tenants stage's PXB result as nccl_env takes it (guest.nccl_topo.check_links): every switch level's link kept;
    one unknown level makes the guest's file a reason naming it (other levels' results keep their keys: see
    test_a_tenant_with_known_links)."""
    checked = check_links(tenant_links(PXB_PLACEMENT, pxb_host()))
    assert [checked[kind] for kind in ("shared_switch", "gpu_switch", "nic_switch")] == [
        GEN5X16, GEN5X16, {"link_speed": "16.0 GT/s PCIe", "link_width": 8}] and checked["unknown"] == {}
    host = pxb_host()
    host["pci_devices"]["0000:06:00.0"] = dict(host["pci_devices"]["0000:06:00.0"], max_link_speed=None)
    checked = check_links(tenant_links(PXB_PLACEMENT, host))
    assert checked["nic_switch"] is None and "0000:06:00.0" in checked["unknown"]["nic_switch"]
