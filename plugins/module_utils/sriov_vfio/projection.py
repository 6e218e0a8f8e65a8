# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host model as the boot and SR-IOV/VFIO stages will leave it: what the preflight report
and a preview plan the tenants on (docs/preview.md).

Pure. ``project`` adds to a host model each wanted PF's VFs (those still to be created named
``<pf>/vfN``, ``planned: true``) and each node's wanted hugepage pools; ``finish`` makes of it
the preview's model: each planned VF gets the PCI address the SR-IOV stage predicts for it (the
kernel's rule, drivers/pci/iov.c pci_iov_virtfn_bus/devfn: the PF's routing ID plus the SR-IOV
capability's First VF Offset plus VF Stride times the VF's number, PCIe SR-IOV spec 3.3.10 and
3.3.11; with SR-IOV off in a ConnectX firmware, the card's layout: ``connectx_vf_layout``), the
IOMMU is on, the tenants' GPUs and VFs sit on vfio-pci, and ``notes`` say, line by line, what
was assumed.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx.pf_lookup import resolve_pf
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.captured_programs import hypervisor_note
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, copy_model
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SYSFS_NAMES, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address, vf_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import ethernet_netdev

__metaclass__ = type

PLANNED_VF = "%s/vf%d"


def page_size(value, what="gpuvirt_hugepages"):
    try:
        return size_name(value, what)
    except InputError:
        raise InputError("%s: size %r is not a hugepage size; use 2M or 1G" % (what, value))


def wanted_pages(topology, hugepages):
    """{node: {"2M": count, "1G": count}} from gpuvirt_hugepages ([{size, count, node}])."""
    nodes = [int(n["id"]) for n in topology.get("numa_nodes") or []]
    wanted = dict((node, {}) for node in nodes)
    unknown = []
    for index, item in enumerate(hugepages or []):
        if not isinstance(item, dict):
            raise InputError("gpuvirt_hugepages[%d]: expected {size, count, node}, got %r" % (index, item))
        size = page_size(item.get("size", "2M"), "gpuvirt_hugepages[%d]" % index)
        try:
            count = int(item.get("count", 0))
        except (TypeError, ValueError):
            raise InputError("gpuvirt_hugepages[%d]: count %r is not a number" % (index, item.get("count")))
        node = item.get("node", "all")
        targets = nodes if str(node) == "all" else [int(node)] if re.match(r"^\d+$", str(node)) else None
        if targets is None:
            raise InputError("gpuvirt_hugepages[%d]: node %r is not a NUMA node number or 'all'" % (index, node))
        for target in targets:
            if target not in wanted:
                unknown.append(target)
                continue
            wanted[target][size] = wanted[target].get(size, 0) + count
    return wanted, sorted(set(unknown))


def project(topology, sriov_pfs=(), hugepages=()):
    """The host model as the host stages will leave it: each wanted PF with its wanted VFs
    (VFs still to be created get placeholder names ``<pf>/vfN`` and ``planned: true``), and
    each node's hugepage pools at least the wanted counts. For the planner."""
    topo = copy_model(topology)
    pci = topo.setdefault("pci_devices", {})
    for item in sriov_pfs or []:
        pf = resolve_pf(topo, (item or {}).get("pf"))
        dev = pci.get(pf) if pf else None
        if dev is None:
            continue
        if item.get("link_type") == "eth" and not ethernet_netdev(topo, dev):
            # the boot stage's firmware setting makes the port Ethernet, with an Ethernet netdev: its
            # VFs are planned as they will be then (vf_mac.is_network_vf), not as the port is now
            # (InfiniBand: class 0x0207, an IPoIB netdev or none)
            dev["netdev_after_boot"] = True
        if not dev.get("sriov_totalvfs"):
            if not mlx.is_connectx_pf(dev) or not int(item.get("num_vfs") or 0):
                continue
            # SR-IOV off in the ConnectX firmware hides the PF's SR-IOV capability; the boot
            # stage sets SRIOV_EN and NUM_OF_VFS to at least the VFs wanted, so plan with those.
            dev["sriov_totalvfs"] = int(item["num_vfs"])
            dev["sriov_numvfs"] = 0
            dev["sriov_from_firmware"] = True
        want = min(int(item.get("num_vfs") or 0), int(dev["sriov_totalvfs"]))
        existing = list(dev.get("virtfns") or [])
        vfs = []
        for index in range(want):
            if index < len(existing):
                vfs.append(existing[index])
                continue
            address = PLANNED_VF % (pf, index)
            pci[address] = {
                "address": address, "vendor_id": dev.get("vendor_id"), "device_id": None, "class": dev.get("class"),
                "driver": None, "driver_override": None, "numa_node": dev.get("numa_node"), "iommu_group": None,
                "sriov_totalvfs": None, "sriov_numvfs": None, "sriov_drivers_autoprobe": None, "physfn": pf,
                "virtfns": [], "vf_index": index, "netdevs": [], "rdma_devices": [], "upstream": [pf] + list(dev.get("upstream") or []),
                "root_bus": dev.get("root_bus"), "is_bridge": False, "model": None, "planned": True,
            }
            vfs.append(address)
        dev["virtfns"] = vfs
        dev["sriov_numvfs"] = want
    _firmware_vf_counts(pci)
    wanted, _unknown = wanted_pages(topo, hugepages)
    for node in topo.get("numa_nodes") or []:
        for size, count in wanted.get(int(node["id"]), {}).items():
            pools = node.setdefault("hugepages", {})
            pool = pools.setdefault(SYSFS_NAMES[size], {"total": 0, "free": 0, "supported": True})
            if count > (pool.get("total") or 0):
                pool["free"] = (pool.get("free") or 0) + count - (pool.get("total") or 0)
                pool["total"] = count
    return topo


def _card_functions(pci, pf):
    """The functions of ``pf``'s PCI device in the host model (its ports), in address order."""
    device = pf.rsplit(".", 1)[0]
    return sorted(a for a in pci if a.rsplit(".", 1)[0] == device and not (pci[a] or {}).get("planned")
                  and not (pci[a] or {}).get("physfn"))


def _firmware_vf_counts(pci):
    """Each PF whose VFs wait for the boot stage's SRIOV_EN/NUM_OF_VFS gets ``firmware_num_vfs``: the
    NUM_OF_VFS its card will have, the most any of the card's PFs wants (the setting is the card's;
    the boot stage keeps a larger value it finds, mlxconfig.sriov_firmware)."""
    cards = {}
    for address, dev in pci.items():
        if (dev or {}).get("sriov_from_firmware"):
            cards.setdefault(address.rsplit(".", 1)[0], []).append(address)
    for pfs in cards.values():
        count = max(int(pci[pf].get("sriov_totalvfs") or 0) for pf in pfs)
        for pf in pfs:
            pci[pf]["firmware_num_vfs"] = count


def connectx_vf_layout(functions, index, num_vfs):
    """(First VF Offset, VF Stride) a ConnectX PF will have once its firmware offers ``num_vfs``
    VFs per PF (NUM_OF_VFS): ``index`` is the PF's place among its card's ``functions`` (1 or 2
    ports). The VFs follow the PFs, port 1's after the VFs port 0 can have: offset
    ``functions - index + index * num_vfs``, stride 1. As a real dual-port ConnectX-4 Lx with
    NUM_OF_VFS 8 shows them (lspci -vvv, linux-rdma, 2019-04-30, "mlx5_core failed to load with
    5.1.0-rc7-next-20190430+": 0b:00.0 "VF offset: 2, stride: 1", 0b:00.1 "VF offset: 9, stride:
    1", Total VFs 8 on each) and the single-port ConnectX-4 after sriov_numvfs (VFs at PF+1,
    PF+2, ...). None for other shapes (more than two functions): not known before the firmware
    is set."""
    if functions not in (1, 2) or not 0 <= index < functions or num_vfs < 0:
        return None
    return functions - index + index * num_vfs, 1


def check_vf_addresses(topology, tenant, vfs):
    """Refuse tenant ``tenant`` when one of its ``vfs`` is a planned VF that kept its placeholder
    name (``<pf>/vfN``): no domain can take a VF before its PCI address is known."""
    pci = topology.get("pci_devices") or {}
    unnamed = [vf for vf in vfs or [] if (pci.get(vf) or {}).get("planned") and vf == PLANNED_VF % (
        (pci.get(vf) or {}).get("physfn"), (pci.get(vf) or {}).get("vf_index"))]
    if not unnamed:
        return
    pf = pci[unnamed[0]]["physfn"]
    if (pci.get(pf) or {}).get("sriov_from_firmware"):
        why = ("SR-IOV is off in its ConnectX firmware (no SR-IOV capability in sysfs), and its card has %d functions, a "
               "layout whose VF offsets are known only once the boot stage has set the firmware and the host has rebooted"
               % len(_card_functions(pci, pf)))
        fix = ("Run the boot stage first (site.yml --tags preflight,boot -e gpuvirt_reboot_ok=true), then plan again on the "
               "host (or a new capture of it); or give the tenant VFs of another PF (gpuvirt_sriov_pfs, the policy's vf_pfs)")
    else:
        why = "the host model lacks the PF's sriov_offset/sriov_stride, which say where the SR-IOV stage's VFs appear"
        fix = ("Capture the host again with playbooks/files/capture_host.py (it takes sriov_offset and sriov_stride), or give the "
               "tenant VFs of another PF (gpuvirt_sriov_pfs, the policy's vf_pfs)")
    raise InputError("tenant %s: VF %s has no PCI address yet: PF %s's VFs do not exist yet and %s. %s. Nothing was changed"
                     % (tenant, ", ".join(unnamed), pf, why, fix))


def _rename_planned_vfs(topo, vf_addresses, notes):
    """Planned VFs take the addresses the SR-IOV stage predicted (``vf_addresses``: PF ->
    [{index, address}], from the PF's sriov_offset/sriov_stride); without one they keep the
    placeholder name, which no domain can use."""
    pci = topo["pci_devices"]
    renamed = {}
    for pf, dev in sorted(pci.items()):
        planned = [vf for vf in dev.get("virtfns") or [] if (pci.get(vf) or {}).get("planned")]
        if not planned:
            continue
        predicted = dict((vf.get("index"), normalize_address(vf.get("address")))
                         for vf in (vf_addresses or {}).get(pf) or [] if isinstance(vf, dict))
        if not predicted and dev.get("sriov_offset") is not None and dev.get("sriov_stride") is not None:
            # the SR-IOV stage could not be checked on the host as it is (the IOMMU off): the
            # PF's own offset and stride say where its VFs will be
            predicted = dict((pci[vf]["vf_index"], vf_address(pf, dev["sriov_offset"], dev["sriov_stride"], pci[vf]["vf_index"]))
                             for vf in planned)
        elif not predicted and dev.get("sriov_from_firmware"):
            # SR-IOV off in the firmware hides the SR-IOV capability (its First VF Offset and VF
            # Stride); a ConnectX card lays its VFs out after its ports (connectx_vf_layout): an
            # assumption the plan says, and the run reads the real addresses after the reboot.
            functions = _card_functions(pci, pf)
            count = int(dev.get("firmware_num_vfs") or dev.get("sriov_totalvfs") or 0)
            layout = connectx_vf_layout(len(functions), functions.index(pf) if pf in functions else -1, count)
            if layout is not None:
                predicted = dict((pci[vf]["vf_index"], vf_address(pf, layout[0], layout[1], pci[vf]["vf_index"])) for vf in planned)
                notes.append("%s: SR-IOV is off in its firmware; VF addresses assumed at offset %d, stride %d from the PF "
                             "(port %d of %d of a ConnectX card with NUM_OF_VFS=%d, as the boot stage sets it; the run "
                             "reads them again once the host has rebooted)" % (pf, layout[0], layout[1], functions.index(pf) + 1,
                                                                               len(functions), count))
        for vf in planned:
            address = predicted.get(pci[vf]["vf_index"])
            if address is None or address in pci:
                continue
            entry = pci.pop(vf)
            entry["address"] = address
            pci[address] = entry
            renamed[vf] = address
        dev["virtfns"] = [renamed.get(vf, vf) for vf in dev["virtfns"]]
        unnamed = [vf for vf in planned if vf not in renamed]
        notes.append("%s: %d VF(s) to be created by the SR-IOV stage: %s%s" % (
            pf, len(planned), ", ".join(renamed.get(vf, vf) for vf in planned),
            " (no address known for %s: the capture lacks the PF's sriov_offset/sriov_stride)" % ", ".join(unnamed) if unnamed else ""))
    for nic in topo.get("nics") or []:
        dev = pci.get(nic.get("address")) or {}
        if "sriov_numvfs" in nic and dev.get("sriov_numvfs") is not None:
            nic["sriov_numvfs"] = dev["sriov_numvfs"]
    for gpu, levels in (topo.get("gpu_nic_affinity") or {}).items():
        for old, new in renamed.items():
            if old in levels:
                levels[new] = levels.pop(old)
    return renamed


def _hugepage_notes(before, after, notes):
    old = dict((node["id"], node.get("hugepages") or {}) for node in before.get("numa_nodes") or [])
    for node in after.get("numa_nodes") or []:
        for size, pool in sorted((node.get("hugepages") or {}).items()):
            was = (old.get(node["id"], {}).get(size) or {}).get("total") or 0
            if (pool.get("total") or 0) > was:
                notes.append("node %s: %d x %s hugepages (now %d), reserved by the boot stage" % (node["id"], pool["total"], size_name(size), was))


def finish(before, projected, gpus=(), vf_addresses=None):
    """``before``: the host model read from the capture; ``projected``: the same with the
    wanted VFs and hugepages (``project``); ``gpus``: the tenants' GPU addresses;
    ``vf_addresses``: the VFs the SR-IOV stage reported (``host_sriov_vfs``).
    Returns ``(host model, notes)``."""
    topo = copy_model(projected)
    notes = []
    iommu = topo.setdefault("iommu", {"enabled": False, "groups": {}})
    if not iommu.get("enabled"):
        iommu["enabled"] = True
        notes.append("IOMMU off on the capture: planned as on, as the boot stage's reboot leaves it (IOMMU groups unknown until then)")
    _hugepage_notes(before, topo, notes)
    renamed = _rename_planned_vfs(topo, vf_addresses, notes)
    pci = topo["pci_devices"]
    moved = []
    for address in list(gpus or []) + sorted(renamed.values()):
        dev = pci.get(address)
        if dev is not None and dev.get("driver") != "vfio-pci":
            if not dev.get("planned"):
                moved.append("%s (%s)" % (address, dev.get("driver") or "no driver"))
            dev["driver"] = "vfio-pci"
    for gpu in topo.get("gpus") or []:
        if gpu.get("address") in (gpus or []):
            gpu["driver"] = "vfio-pci"
    if moved:
        notes.append("on vfio-pci after the VFIO stage: %s" % ", ".join(moved))
    hypervisor = hypervisor_note(topo.get("hypervisor"))
    if hypervisor:
        notes.append(hypervisor)
    if notes:
        notes.insert(0, "PREVIEW: the tenants are planned on the host as the boot, SR-IOV and VFIO stages will leave it, not as captured:")
    return topo, notes
