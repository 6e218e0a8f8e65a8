# -*- coding: utf-8 -*-
"""module_utils/sriov_vfio/projection.py: the host model of a bare capture as the host stages will leave it."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import (
    check_vf_addresses, connectx_vf_layout, finish, project)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
from placement_topologies import LAB_EDU, LAB_PF, lab  # noqa: E402  pylint: disable=import-error,wrong-import-position
from fakes.kernel import lab_host  # noqa: E402  pylint: disable=import-error,wrong-import-position
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

LAB_BARE = lab_capture("bare")
LAB_IDS = {"gpu_ids": ["1234:11e8"], "nic_ids": ["1b36:0010"]}
PREDICTED = {LAB_PF: [{"index": i, "address": "0000:81:00.%d" % (i + 1)} for i in range(4)]}


def bare_lab():
    """The real capture of the bare lab VM (IOMMU off, no VFs, no hugepages)."""
    return read_topology(LAB_BARE, ["1234:11e8"], ["1b36:0010"])


def test_bare_capture_is_planned_as_the_stages_leave_it():
    before = bare_lab()
    projected = project(before, [{"pf": LAB_PF, "num_vfs": 2}], [{"size": "2M", "count": 64, "node": 1}])
    topo, notes = finish(before, projected, [LAB_EDU], PREDICTED)
    assert topo["iommu"]["enabled"] is True and before["iommu"]["enabled"] is False
    assert topo["pci_devices"][LAB_PF]["virtfns"] == ["0000:81:00.1", "0000:81:00.2"]
    vf = topo["pci_devices"]["0000:81:00.1"]
    assert vf["address"] == "0000:81:00.1" and vf["physfn"] == LAB_PF and vf["driver"] == "vfio-pci"
    assert not any("/vf" in address for address in topo["pci_devices"])
    assert topo["pci_devices"][LAB_EDU]["driver"] == "vfio-pci"
    assert [g["driver"] for g in topo["gpus"]] == ["vfio-pci"]
    assert topo["numa_nodes"][1]["hugepages"]["2048kB"]["total"] == 64
    assert notes[0].startswith("PREVIEW: the tenants are planned on the host as")
    assert any(n.startswith("IOMMU off on the capture") for n in notes)
    assert "node 1: 64 x 2M hugepages (now 0), reserved by the boot stage" in notes
    assert "%s: 2 VF(s) to be created by the SR-IOV stage: 0000:81:00.1, 0000:81:00.2" % LAB_PF in notes
    assert "on vfio-pci after the VFIO stage: %s (no driver)" % LAB_EDU in notes


def test_without_the_sriov_stages_prediction_the_pfs_offset_and_stride_name_the_vfs():
    before = bare_lab()
    topo, notes = finish(before, project(before, [{"pf": LAB_PF, "num_vfs": 2}], []), [], {})
    assert topo["pci_devices"][LAB_PF]["virtfns"] == ["0000:81:00.1", "0000:81:00.2"]
    assert "%s: 2 VF(s) to be created by the SR-IOV stage: 0000:81:00.1, 0000:81:00.2" % LAB_PF in notes


@pytest.mark.parametrize("predicted, offset, expect", [
    ({}, None, "no address known for %s/vf0" % LAB_PF),  # nothing predicted, no offset/stride in the capture
    ({LAB_PF: [{"index": 0, "address": LAB_EDU}]}, 1, "no address known for %s/vf0" % LAB_PF),  # taken by a real function
])
def test_planned_vfs_without_a_usable_address_keep_their_placeholder(predicted, offset, expect):
    before = bare_lab()
    before["pci_devices"][LAB_PF]["sriov_offset"] = offset
    topo, notes = finish(before, project(before, [{"pf": LAB_PF, "num_vfs": 1}], []), [], predicted)
    assert topo["pci_devices"][LAB_PF]["virtfns"] == ["%s/vf0" % LAB_PF]
    assert any(expect in note for note in notes)


def test_a_host_as_wanted_needs_no_notes():
    host = lab(pages_2m=(0, 128))
    topo, notes = finish(host, project(host, [{"pf": LAB_PF, "num_vfs": 4}], [{"size": "2M", "count": 64, "node": 1}]), [LAB_EDU], {})
    assert notes == [] and topo == host


def sriov_off_dgx(tmp_path):
    """The DGX A100-class host with SR-IOV off in its ConnectX firmware: the PFs expose no SR-IOV
    capability, so sysfs has none of the sriov_* attributes."""
    from fakes.servers import build_dgx_a100_class  # pylint: disable=import-error,import-outside-toplevel
    host, _gpus, nics = build_dgx_a100_class(str(tmp_path / "root"))
    pfs = sorted(a for a in nics.values() if os.path.exists(host.p(host.pci_paths[a] + "/sriov_totalvfs")))
    for address in pfs:
        for name in os.listdir(host.p(host.pci_paths[address])):
            if name.startswith("sriov_"):
                os.remove(host.p(host.pci_paths[address] + "/" + name))
    return read_topology(str(tmp_path / "root")), pfs


def test_sriov_off_in_the_firmware_is_planned_as_the_boot_stage_sets_it(tmp_path):
    before, pfs = sriov_off_dgx(tmp_path)
    pf = pfs[0]
    assert before["pci_devices"][pf]["sriov_totalvfs"] is None
    projected = project(before, [{"pf": pf, "num_vfs": 4}], [])
    assert projected["pci_devices"][pf]["sriov_totalvfs"] == 4 and projected["pci_devices"][pf]["sriov_from_firmware"]
    topo, notes = finish(before, projected, [], {})
    base = int(pf.split(":")[1], 16)
    assert topo["pci_devices"][pf]["virtfns"] == ["0000:%02x:00.%d" % (base, i + 1) for i in range(4)]
    assert any("SR-IOV is off in its firmware; VF addresses assumed at offset 1, stride 1" in n for n in notes)


@pytest.mark.parametrize("functions, index, num_vfs, layout", [
    # the dual-port ConnectX-4 Lx of linux-rdma 2019-04-30 (lspci -vvv, Total VFs 8): 0b:00.0 "VF offset: 2,
    # stride: 1", 0b:00.1 "VF offset: 9, stride: 1"
    (2, 0, 8, (2, 1)), (2, 1, 8, (9, 1)),
    # a single-port ConnectX-4 after sriov_numvfs (pci/lspci_connectx4_pf+8vf_after-sriov_numvfs.txt): VFs from PF+1
    (1, 0, 8, (1, 1)),
    # no real capture of other shapes: not guessed
    (4, 0, 8, None), (2, 2, 8, None), (2, -1, 8, None),
])
def test_the_connectx_vf_layout_is_the_real_cards(functions, index, num_vfs, layout):
    assert connectx_vf_layout(functions, index, num_vfs) == layout


def test_sriov_off_on_a_dual_port_connectx_plans_each_ports_vfs_by_its_address(tmp_path):
    """The DGX tree's storage card (two functions, 0000:a1:00.0/.1) with SR-IOV off: port 0's VFs
    follow the two ports (offset 2), port 1's follow the NUM_OF_VFS port 0 can have (offset 1 + 4),
    as the kernel numbers them (routing ID + offset + index * stride), and the notes say so."""
    before, _pfs = sriov_off_dgx(tmp_path)
    ports = ["0000:a1:00.0", "0000:a1:00.1"]
    assert all(before["pci_devices"][pf]["sriov_totalvfs"] is None for pf in ports)
    projected = project(before, [{"pf": ports[0], "num_vfs": 4}, {"pf": ports[1], "num_vfs": 3}], [])
    topo, notes = finish(before, projected, [], {})
    assert topo["pci_devices"][ports[0]]["virtfns"] == ["0000:a1:00.2", "0000:a1:00.3", "0000:a1:00.4", "0000:a1:00.5"]
    assert topo["pci_devices"][ports[1]]["virtfns"] == ["0000:a1:00.6", "0000:a1:00.7", "0000:a1:01.0"]
    assert all(topo["pci_devices"][vf]["physfn"] == pf for pf in ports for vf in topo["pci_devices"][pf]["virtfns"])
    assert "%s: SR-IOV is off in its firmware; VF addresses assumed at offset 5, stride 1 from the PF (port 2 of 2 of a " \
           "ConnectX card with NUM_OF_VFS=4, as the boot stage sets it; the run reads them again once the host has " \
           "rebooted)" % ports[1] in notes
    for pf in ports:
        check_vf_addresses(topo, "t", topo["pci_devices"][pf]["virtfns"])
    # port 1 alone: its VFs still follow the 4 VFs NUM_OF_VFS gives port 0 too
    topo, _notes = finish(before, project(before, [{"pf": ports[1], "num_vfs": 4}], []), [], {})
    assert topo["pci_devices"][ports[1]]["virtfns"][0] == "0000:a1:00.6"


def test_sriov_off_on_a_card_of_more_functions_keeps_placeholders_and_the_tenant_is_refused(tmp_path):
    before, _pfs = sriov_off_dgx(tmp_path)
    for function in (2, 3):
        extra = dict(before["pci_devices"]["0000:a1:00.1"], address="0000:a1:00.%d" % function)
        before["pci_devices"][extra["address"]] = extra
    topo, _notes = finish(before, project(before, [{"pf": "0000:a1:00.0", "num_vfs": 2}], []), [], {})
    assert topo["pci_devices"]["0000:a1:00.0"]["virtfns"] == ["0000:a1:00.0/vf0", "0000:a1:00.0/vf1"]
    with pytest.raises(InputError, match=r"tenant t: VF 0000:a1:00.0/vf0 has no PCI address yet: .* its card has 4 functions"):
        check_vf_addresses(topo, "t", ["0000:a1:00.0/vf0"])


def test_a_preview_plans_such_vfs_by_count_and_says_so(tmp_path):
    """Where a VF's address cannot be known before the boot stage's reboot (SR-IOV
    off in the firmware of a card of four functions), a preview plans the tenant by count and says
    so, defining no domain for it; a run (no preview) refuses it as above."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_stage import DEFAULT_PRIORITIES  # pylint: disable=import-outside-toplevel
    before, _pfs = sriov_off_dgx(tmp_path)
    for function in (2, 3):
        extra = dict(before["pci_devices"]["0000:a1:00.1"], address="0000:a1:00.%d" % function)
        before["pci_devices"][extra["address"]] = extra
    topo, _notes = finish(before, project(before, [{"pf": "0000:a1:00.0", "num_vfs": 2}], []), [], {})
    tenants = [{"name": "t", "vcpus": 2, "memory_mb": 1024, "vfs": 1, "hugepage_size": "none"},
               {"name": "u", "vcpus": 2, "memory_mb": 1024, "hugepage_size": "none"}]
    found = tenant_plan.plan(topo, tenants, {"vf_pfs": ["0000:a1:00.0"]}, [])
    assert found["placements"]["t"]["vfs"] == ["0000:a1:00.0/vf0"]
    settings = {"domain_type": "kvm", "memory_mode": "strict", "priorities": DEFAULT_PRIORITIES, "firmware": "efi",
                "topology": topo, "live": None}
    with pytest.raises(InputError, match="tenant t: VF 0000:a1:00.0/vf0 has no PCI address yet"):
        tenant_plan.tenant_domains(found, tenants, settings)
    notes = []
    domains = tenant_plan.tenant_domains(found, tenants, dict(settings, preview_notes=notes))
    assert [d["name"] for d in domains] == ["u"]
    assert len(notes) == 1 and notes[0].startswith("tenant t: planned with 1 VF(s) (0000:a1:00.0/vf0) whose PCI addresses "
                                                   "are known only after the boot stage's reboot"), notes
    assert "its card has 4 functions" in notes[0]


def test_a_pf_that_is_not_connectx_without_sriov_is_not_given_vfs(tmp_path):
    before = bare_lab()
    before["pci_devices"][LAB_PF]["sriov_totalvfs"] = None
    assert project(before, [{"pf": LAB_PF, "num_vfs": 2}], [])["pci_devices"][LAB_PF].get("sriov_from_firmware") is None


def test_the_captured_hypervisor_versions_are_said_with_the_maxphysaddr_gate():
    """A capture holding libvirt's and QEMU's versions: the notes say them and whether <maxphysaddr>
    (libvirt 8.7.0) is available; a capture without them adds no note."""
    before = bare_lab()
    assert before["hypervisor"] == {"libvirt": None, "qemu": None, "captured": False}
    for libvirt, word in (("8.0.0", "not available"), ("10.0.0", "available")):
        host = dict(before, hypervisor={"libvirt": libvirt, "qemu": "6.2.0", "captured": True})
        _topo, notes = finish(host, host, [], {})
        assert [n for n in notes if n.startswith("hypervisor on the capture: libvirt %s, QEMU 6.2.0;" % libvirt)
                and n.endswith(" " + word)], notes


def test_projection_adds_planned_vfs_and_pools_without_touching_the_input():
    topo = read_topology(LAB_BARE, **LAB_IDS)
    before = json.dumps(topo, sort_keys=True)
    projected = project(topo, [{"pf": "0000:81:00.0", "num_vfs": 9}], [{"size": "2M", "count": 64, "node": 1}])
    assert json.dumps(topo, sort_keys=True) == before
    pf = projected["pci_devices"]["0000:81:00.0"]
    assert pf["virtfns"] == ["0000:81:00.0/vf%d" % i for i in range(4)]  # capped at sriov_totalvfs
    assert all(projected["pci_devices"][vf]["planned"] and projected["pci_devices"][vf]["numa_node"] == 1 for vf in pf["virtfns"])
    assert projected["numa_nodes"][1]["hugepages"]["2048kB"]["total"] == 64


def test_projection_keeps_existing_vfs(tmp_path):
    host, kernel = lab_host(tmp_path)
    kernel.write("/sys/bus/pci/devices/0000:81:00.0/sriov_numvfs", "2")
    topo = read_topology(host.root, **LAB_IDS)
    existing = topo["pci_devices"]["0000:81:00.0"]["virtfns"]
    projected = project(topo, [{"pf": "0000:81:00.0", "num_vfs": 3}])
    assert projected["pci_devices"]["0000:81:00.0"]["virtfns"] == existing + ["0000:81:00.0/vf2"]


def test_a_pf_without_netdev_that_the_boot_stage_sets_to_ethernet_gets_one(tmp_path):
    """link_type eth: the boot stage's firmware setting gives the port an Ethernet netdev, which the tenants' VF
    settings go through (vf_mac.is_network_vf); without it the PF stays without one."""
    tree, _kernel = lab_host(tmp_path / "root")
    topology = read_topology(tree.root)
    pf = "0000:81:00.0"
    assert not project(topology, [{"pf": pf, "num_vfs": 2}])["pci_devices"][pf].get("netdev_after_boot")
    assert project(topology, [{"pf": pf, "num_vfs": 2, "link_type": "eth"}])["pci_devices"][pf]["netdev_after_boot"] is True


@pytest.mark.parametrize("pf_class, netdev_type, marked", [
    ("0x020000", 1, False),     # an Ethernet port already: nothing to project
    ("0x020000", 32, True),     # an IPoIB netdev: InfiniBand now, Ethernet after the boot stage
    ("0x020700", 32, True),     # an InfiniBand controller's function
    ("0x020700", None, True),   # ... without IPoIB (no netdev)
])
def test_a_vpi_port_the_boot_stage_sets_to_ethernet_is_planned_as_ethernet(pf_class, netdev_type, marked):
    """link_type eth: the VFs are planned on the port as the boot stage's firmware change leaves it."""
    pf = "0000:19:00.0"
    netdevs = ["ibp0"] if netdev_type else []
    topology = {"pci_devices": {pf: {"address": pf, "class": pf_class, "netdevs": netdevs, "vendor_id": "0x15b3",
                                     "device_id": "0x1017", "sriov_totalvfs": 8, "sriov_numvfs": 0, "virtfns": []}},
                "netdevs": dict((name, {"type": netdev_type}) for name in netdevs), "numa_nodes": []}
    projected = project(topology, [{"pf": pf, "num_vfs": 2, "link_type": "eth"}])
    assert bool(projected["pci_devices"][pf].get("netdev_after_boot")) is marked
    assert not project(topology, [{"pf": pf, "num_vfs": 2}])["pci_devices"][pf].get("netdev_after_boot")
