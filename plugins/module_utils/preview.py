# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preview's host model: a captured host as the boot, SR-IOV and VFIO stages will leave
it, so that the tenants stage can be planned before any of them ran (docs/preview.md).

Pure: takes the host model in which the wanted VFs and hugepages are already projected
(``preflight.project``: VFs still to be created carry ``planned: true``), and finishes it:
each planned VF gets the PCI address the SR-IOV stage predicted for it, the IOMMU is on, the
tenants' GPUs and VFs sit on vfio-pci. ``notes`` say, line by line, what was assumed.
"""

from __future__ import absolute_import, division, print_function

import copy

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.captured_programs import hypervisor_note
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.hugepage_sizes import size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.pci_address import normalize_address, vf_address

__metaclass__ = type


def _single_function(pci, pf):
    """Whether ``pf`` is the only function of its PCI device in the host model."""
    device = pf.rsplit(".", 1)[0]
    return not any(a != pf and a.rsplit(".", 1)[0] == device for a in pci if not (pci[a] or {}).get("planned"))


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
        elif not predicted and dev.get("sriov_from_firmware") and _single_function(pci, pf):
            # SR-IOV off in the firmware hides the offset and stride; a single-function ConnectX
            # PF puts its VFs right after it (offset 1, stride 1, as the ConnectX capture after
            # sriov_numvfs shows): an assumption, said in the notes.
            predicted = dict((pci[vf]["vf_index"], vf_address(pf, 1, 1, pci[vf]["vf_index"])) for vf in planned)
            notes.append("%s: SR-IOV is off in its firmware; VF addresses assumed at offset 1, stride 1 from the PF "
                         "(known once the boot stage has set the firmware and the host has rebooted)" % pf)
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
    wanted VFs and hugepages (``preflight.project``); ``gpus``: the tenants' GPU addresses;
    ``vf_addresses``: the VFs the SR-IOV stage reported (``host_sriov_vfs``).
    Returns ``(host model, notes)``."""
    topo = copy.deepcopy(projected)
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
