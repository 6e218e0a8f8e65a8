# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SR-IOV/VFIO stage's desired state, decided on the host (vfio_bind's ``sriov_pfs`` and
``gpus``): from the inventory's ``gpuvirt_sriov_pfs`` and ``gpuvirt_gpus`` as given, and the host
model the call reads, it works out

- the one sriov_vfs request: every PF with its VF count (:func:`pf_request`, which the standalone
  host_sriov role's call builds on the controller too);
- the PFs whose VFs go to vfio-pci: those with ``num_vfs`` above 0;
- the tenant GPUs and the functions that share their IOMMU groups (placement/pool_groups.py, the
  planner's groups report, as the filter ``tenant_group_devices`` gives it on the controller).

The tenants' VFs get their MAC, VLAN, spoof check and trust from the tenants stage, which picks
them (planning/tenant_plan.plan_vf_settings): this stage reads no tenant.

Every input is checked before the first write, each refusal naming the input."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, labelled
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.pool_groups import pool_groups

__metaclass__ = type

# The options of an entry of sriov_pfs (gpuvirt_sriov_pfs): link_type is the boot stage's (the
# ConnectX firmware), accepted so that the inventory's list is given as it is.
SRIOV_PF_OPTIONS = dict(
    pf=dict(type="str", required=True),
    num_vfs=dict(type="int", required=True),
    autoprobe=dict(type="bool"),
    link_type=dict(type="str"),
)


def pf_request(pfs, autoprobe=False, persist=True, force=False):
    """The options of ``gpuvirt.tenancy.sriov_vfs`` for every PF of ``pfs`` (``[{pf, num_vfs,
    autoprobe}]``, as gpuvirt_sriov_pfs) in one call: ``{pfs: [{pf, num_vfs, autoprobe, persist,
    force}]}``. A PF's own ``autoprobe`` wins over ``autoprobe``. Pure: the shape is checked, the
    host is not read."""
    if not isinstance(pfs, list) or any(not isinstance(p, dict) or "pf" not in p or "num_vfs" not in p for p in pfs):
        raise InputError("expected the PF list [{pf, num_vfs, autoprobe}] (gpuvirt_sriov_pfs), got %r" % (pfs,))
    return {"pfs": [{"pf": p["pf"], "num_vfs": p["num_vfs"],
                     "autoprobe": p["autoprobe"] if p.get("autoprobe") is not None else autoprobe,
                     "persist": persist, "force": force} for p in pfs]}


def sriov_request(params, host, topology):
    """The options of the one sriov_vfs call for ``sriov_pfs`` (validated as that module
    validates them), each PF found on the host and its count within its ``sriov_totalvfs``, or
    None without ``sriov_pfs``. -> (options, the PFs of ``sriov_pfs`` whose VFs go to vfio-pci,
    as given)."""
    entries = params.get("sriov_pfs")
    if entries is None:
        return None, []
    manager = sriov.SriovManager(host, topology)
    seen = {}
    for index, entry in enumerate(entries):
        label = "sriov_pfs[%d] (%s)" % (index, entry["pf"])
        with labelled(label):
            pf = manager.resolve_pf(entry["pf"])
            total = manager.pci[pf]["sriov_totalvfs"]
            if not 0 <= entry["num_vfs"] <= total:
                raise InputError("num_vfs: %d is outside 0-%d (sriov_totalvfs of %s; 0: no VFs); raise NUM_OF_VFS in the "
                                 "firmware for more" % (entry["num_vfs"], total, pf))
        if pf in seen:
            raise InputError("%s: PF %s is also sriov_pfs[%d]; list each PF once" % (label, pf, seen[pf]))
        seen[pf] = index
    request = pf_request(list(entries), params["autoprobe"], params["persist"], params["force"])
    options = nested_params("sriov_pfs", "gpuvirt.tenancy.sriov_vfs", sriov.MODULE_ARGS, request)
    return options, [entry["pf"] for entry in entries if entry["num_vfs"] > 0]


def tenant_gpus(topology, gpus):
    """``gpus`` (the tenant GPU pool) checked against the host model, and the functions that
    share their IOMMU groups and go along with them (:func:`pool_groups.pool_groups`, as the
    filter ``tenant_group_devices`` answers for the same host model). -> (addresses, companions)."""
    if gpus is None:
        return [], []
    pci = topology["pci_devices"]
    known = set(gpu["address"] for gpu in topology.get("gpus") or [])
    addresses = []
    for text in gpus:
        address = normalize_address(text)
        if address is None:
            raise InputError("gpus: %r is not a PCI address (use the form 0000:82:00.0)" % (text,))
        if address not in pci:
            raise InputError("gpus: no PCI device %s on this host (see lspci -D)" % address)
        if address not in known:
            ids = ":".join(str(pci[address][key] or "?").replace("0x", "") for key in ("vendor_id", "device_id"))
            raise InputError("gpus: %s (%s) is not a GPU of the host model: give its vendor:device in gpu_ids "
                             "(gpuvirt_gpu_pci_ids), or list it in devices" % (address, ids))
        if address not in addresses:
            addresses.append(address)
    try:
        groups = pool_groups(topology, gpus=addresses)
    except InputError as exc:
        raise InputError("gpus: the IOMMU groups of the tenant GPUs: %s" % exc)
    # the planner's rule, in its words: a GPU whose group holds what the host keeps (an SR-IOV PF,
    # a NIC, a storage controller) goes to no tenant, so it is not bound either, nor is its group
    left_out = [groups["left_out"][address] for address in addresses if address in groups["left_out"]]
    if left_out:
        raise InputError("gpus: %s. Nothing was changed" % "; ".join(left_out))
    return addresses, groups["companions"]
