# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU host's PCIe link facts of each placed tenant, for the NCCL topology file its guest writes
(guest.nccl_topo): the link of its GPUs, of its VFs' PFs and of the switch they share, each the lower
of the device's ``max_link_speed`` and its parent port's, the same for ``max_link_width``. That is how
NCCL reads a NIC's or a bridge's link on bare metal (``ncclTopoGetXmlFromSys``, NVIDIA/nccl
``src/graph/xml.cc``); a GPU's it reads there from NVML's current link, so for a GPU the file gives
the most its slot trained to rather than what NVML reports at that moment. And the plan's
distance between them (``pcie_affinity``). A link the host model cannot give is said per
kind, never guessed: the guest's file then leaves it to NCCL's own reading (guest.nccl_topo). Pure
function of the plan and the host model."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import nearest_shared_bridge
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import vf_function

__metaclass__ = type


def _speed(text):
    match = re.match(r"^\s*([0-9.]+) GT/s", text or "")
    return float(match.group(1)) if match else None


def nccl_link(pci, address):
    """{link_speed, link_width} of ``address`` from the host's sysfs (the lower of its and its parent port's), or (None, why)."""
    device = pci.get(address)
    if device is None:
        return None, "%s is not in the host model" % address
    if device.get("max_link_speed") is None or device.get("max_link_width") is None:
        return None, ("the host model has no max_link_speed/max_link_width for %s (a capture or host model taken before they "
                      "were read)" % address)
    speed, width = device["max_link_speed"], device["max_link_width"]
    if _speed(speed) is None or not 1 <= width <= 32:
        # a conventional PCI function (the kernel prints "Unknown" and 255): no PCIe link to give NCCL
        return None, "%s has no PCIe link the host can name (max_link_speed %r, max_link_width %r)" % (address, speed, width)
    parent = pci.get((device.get("upstream") or [None])[0])
    # NCCL: sscanf "%f GT/s" of both, FLT_MAX where the port has none; the lower one's string, the lower width
    if parent is not None and parent.get("max_link_speed") is not None:
        mine, port = _speed(speed), _speed(parent["max_link_speed"])
        if port is not None and (mine is None or port < mine):
            speed = parent["max_link_speed"]
    if parent is not None and parent.get("max_link_width") is not None:
        width = min(width, parent["max_link_width"])
    return {"link_speed": speed, "link_width": width}, None


def _one(pci, addresses, what):
    links, reasons = [], []
    for address in addresses:
        link, why = nccl_link(pci, address)
        if link is None:
            reasons.append(why)
        elif link not in links:
            links.append(link)
    if reasons:
        return None, "; ".join(reasons)
    if len(links) != 1:
        return None, "the tenant's %s have different links on the host (%s)" % (
            what, ", ".join("%s x%s" % (link["link_speed"], link["link_width"]) for link in links))
    return links[0], None


def _shared_bridges(pci, gpus, pfs):
    """The nearest bridge each GPU shares with a PF of the tenant (the switch of PIX)."""
    bridges = []
    for gpu in gpus:
        chain = (pci.get(gpu) or {}).get("upstream") or []
        met = [nearest_shared_bridge(chain, (pci.get(pf) or {}).get("upstream") or []) for pf in pfs]
        # the nearest to the GPU of the bridges where its path meets a PF's
        bridge = next((b for b in chain if b in met), None)
        if bridge is not None and bridge not in bridges:
            bridges.append(bridge)
    return bridges


# the host switch levels a PXB file names (guest.nccl_topo): the switch the GPUs and PFs share, and each side's below it
PXB_KINDS = ("shared_switch", "gpu_switch", "nic_switch")


def _side_switches(pci, devices, shared):
    """The switch below each of ``shared`` on the paths of ``devices`` up to it, as NCCL reads a switch (its upstream port:
    ncclTopoGetXmlFromSys takes a device's parent two sysfs levels up, skipping the downstream port), or (None, why)."""
    found = []
    for device in devices:
        chain = (pci.get(device) or {}).get("upstream") or []
        top = next((index for index, bridge in enumerate(chain) if bridge in shared), None)
        if top is None or top < 2:
            return None, "%s has no switch of its own below the shared one on the host" % device
        # chain[top - 1] is the shared switch's downstream port, chain[top - 2] the upstream port of the switch below it
        if chain[top - 2] not in found:
            found.append(chain[top - 2])
    return found, None


def _pxb_links(pci, gpus, pfs):
    """{shared_switch, gpu_switch, nic_switch} links and {kind: why} of those the host cannot give."""
    links, unknown = {}, {}
    shared = _shared_bridges(pci, gpus, pfs)
    if not shared:
        links["shared_switch"], unknown["shared_switch"] = None, "no bridge shared by the GPUs and PFs"
    else:
        links["shared_switch"], why = _one(pci, shared, "shared switches")
        if why:
            unknown["shared_switch"] = why
    for kind, devices, what in (("gpu_switch", gpus, "GPUs' switches"), ("nic_switch", pfs, "PFs' switches")):
        bridges, why = _side_switches(pci, devices, shared) if shared else (None, "no bridge shared by the GPUs and PFs")
        links[kind] = None
        if bridges:
            links[kind], why = _one(pci, bridges, what)
        if why:
            unknown[kind] = why
    return links, unknown


def tenant_links(placement, topology):
    """{level, gpu, nic, switch, missing, unknown} of one placement (its GPUs and VFs), or None for a
    tenant without both: ``missing`` where the plan gives no distance; a link of ``gpu``, ``nic`` or
    ``switch`` (PIX only) None where the host model gives none or the tenant's devices of that kind
    differ, with the reason in ``unknown`` (the guest's NCCL then reads that link itself). A PXB tenant also gets
    ``shared_switch``, ``gpu_switch`` and ``nic_switch``: the links of the host switch its GPUs and PFs share and of
    each side's switch below it, each None with its reason in ``unknown`` where the host cannot give it."""
    gpus, vfs = placement.get("gpus") or [], placement.get("vfs") or []
    if not gpus or not vfs:
        return None
    pci = topology.get("pci_devices") or {}
    level = placement.get("pcie_affinity")
    if level is None:
        return {"level": None, "gpu": None, "nic": None, "switch": None, "unknown": {},
                "missing": "the plan gives no distance between the tenant's GPUs and VFs"}
    # each VF's PF (the host model's, else the plan's for a VF not made yet); a VF without one stands for itself
    pfs = sorted(set(vf_function(pci, vf, (placement.get("vf_pfs") or {}).get(vf))[0] or vf for vf in vfs))
    out = {"level": level, "missing": None, "unknown": {}, "switch": None}
    out["gpu"], why_gpu = _one(pci, gpus, "GPUs")
    out["nic"], why_nic = _one(pci, pfs, "VFs' PFs")
    why_switch = None
    if level == "PIX":
        bridges = _shared_bridges(pci, gpus, pfs)
        out["switch"], why_switch = _one(pci, bridges, "switches") if bridges else (None, "no bridge shared by the GPUs and PFs")
    for kind, why in (("gpu", why_gpu), ("nic", why_nic), ("switch", why_switch)):
        if why:
            out["unknown"][kind] = why
    if level == "PXB":
        links, unknown = _pxb_links(pci, gpus, pfs)
        out.update(links)
        out["unknown"].update(unknown)
    return out


def plan_links(plan, topology):
    """{tenant: tenant_links} of the plan's placements that have GPUs and VFs."""
    out = {}
    for name, placement in sorted(((plan or {}).get("placements") or {}).items()):
        links = tenant_links(placement, topology or {})
        if links is not None:
            out[name] = links
    return out


def guest_layouts(plan, entries, topology):
    """{tenant: {gpus, nics, cells, switches, classes}} of the plan's placements with GPUs or VFs: where its
    guest will see each GPU and VF, as its ``tenant_domain`` entry lays them out (``numa_cells``: the guest
    NUMA cell of each device, its index; ``pcie_switches``: the devices under one emulated switch), and each
    device's PCI class in the host model (a VF not made yet: its PF's), for the preview of the guest's NCCL
    topology file. No guest bus ID: the guest's firmware numbers its buses."""
    pci = (topology or {}).get("pci_devices") or {}
    by_name = dict((entry.get("name"), entry) for entry in entries or [])
    out = {}
    for name, placement in sorted(((plan or {}).get("placements") or {}).items()):
        gpus, vfs = list(placement.get("gpus") or []), list(placement.get("vfs") or [])
        entry = by_name.get(name)
        if not vfs or entry is None:
            continue
        classes = {}
        for address in gpus + vfs:
            own = (pci.get(address) or {}).get("class")
            pf = vf_function(pci, address, (placement.get("vf_pfs") or {}).get(address))[0] if address in vfs else None
            classes[address] = own or (pci.get(pf) or {}).get("class")
        out[name] = {"gpus": gpus, "nics": vfs, "classes": classes,
                     "cells": [[d for d in cell.get("devices") or [] if d in gpus + vfs] for cell in entry.get("numa_cells") or []],
                     "switches": [list(group) for group in entry.get("pcie_switches") or []]}
    return out
