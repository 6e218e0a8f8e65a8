# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SR-IOV/VFIO stage's desired state, decided on the host (vfio_bind's ``sriov_pfs``,
``tenants`` and ``gpus``): from the inventory's ``gpuvirt_sriov_pfs``, ``gpuvirt_tenants`` and
``gpuvirt_gpus`` as given, and the host model the call reads, it works out

- the one sriov_vfs request: every PF with its VF count, and the MAC, VLAN, spoof check on and
  trust off of each VF a tenant names by address (sriov_vfio/tenant_vfs.py), each such VF checked to be a VF
  of a listed PF once its count is set;
- the PFs whose VFs go to vfio-pci: those with ``num_vfs`` above 0;
- the tenant GPUs and the functions that share their IOMMU groups (placement/pool_groups.py, the
  planner's groups report, as the filter ``tenant_group_devices`` gives it on the controller).

Every input is checked before the first write, each refusal naming the input."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, labelled
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac, duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.pool_groups import pool_groups
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.tenant_vfs import named_vfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import check_settings_reach
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vlan_id import check_vlan

__metaclass__ = type

# The options of an entry of sriov_pfs (gpuvirt_sriov_pfs): link_type is the boot stage's (the
# ConnectX firmware), accepted so that the inventory's list is given as it is.
SRIOV_PF_OPTIONS = dict(
    pf=dict(type="str", required=True),
    num_vfs=dict(type="int", required=True),
    autoprobe=dict(type="bool"),
    link_type=dict(type="str"),
)


def sriov_request(params, host, topology):
    """The options of the one sriov_vfs call for ``sriov_pfs`` and ``tenants`` (validated as
    that module validates them), or None without ``sriov_pfs``. -> (options, the PFs of
    ``sriov_pfs`` whose VFs go to vfio-pci, as given)."""
    entries = params.get("sriov_pfs")
    if entries is None:
        return None, []
    manager = sriov.SriovManager(host, topology)
    seen, owners, pfs = {}, {}, []
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
        for address in manager.vf_addresses(pf, entry["num_vfs"]):
            owners[address] = pf
        pfs.append({"pf": entry["pf"], "num_vfs": entry["num_vfs"],
                    "autoprobe": params["autoprobe"] if entry.get("autoprobe") is None else entry["autoprobe"],
                    "persist": params["persist"], "force": params["force"]})
    ethernet = set(manager.resolve_pf(entry["pf"]) for entry in entries if entry.get("link_type") == "eth")
    for tenant in params.get("tenants") or []:
        if stays(tenant) and isinstance(tenant.get("vfs"), (list, tuple)):
            named = [normalize_address(vf.get("address") if isinstance(vf, dict) else vf) for vf in tenant["vfs"]]
            check_settings_reach(topology, tenant.get("name"), [a for a in named if a], owners, tenant.get("mac"), tenant.get("vlan"),
                                 ethernet)
    request = {"pfs": pfs, "vf_settings": tenant_settings(params.get("tenants") or [], owners)}
    options = nested_params("sriov_pfs", "gpuvirt.tenancy.sriov_vfs", sriov.MODULE_ARGS, request)
    return options, [entry["pf"] for entry in entries if entry["num_vfs"] > 0]


def tenant_settings(tenants, owners):
    """The ``vf_settings`` of sriov_vfs for the VFs ``tenants`` name by address, each checked:
    a PCI address, a VF of a listed PF with its VF count (``owners``: VF address -> its PF),
    named by one tenant, its MAC (given or derived) one VF's, its VLAN a VLAN id."""
    for position, tenant in enumerate(tenants):
        if not stays(tenant):
            continue
        vfs = tenant.get("vfs")
        for index, vf in enumerate(vfs if isinstance(vfs, (list, tuple)) else []):
            address = vf.get("address") if isinstance(vf, dict) else vf
            if normalize_address(address) is None:
                raise InputError("tenants[%d] (%s).vfs[%d]: %r is not a PCI address; name a VF by its address (0000:41:00.2), "
                                 "as {address, mac, vlan}, or give the tenant a VF count" % (position, tenant.get("name"), index, address))
    settings, named, macs = [], {}, []
    for where, _name, wanted in named_vfs(tenants):
        address = normalize_address(wanted["address"])
        if address not in owners:
            raise InputError("%s: %s is not a VF of the PFs of sriov_pfs with their VF counts (%s); list its PF in sriov_pfs "
                             "(gpuvirt_sriov_pfs) with num_vfs that make it, or name a VF of one"
                             % (where, address, ", ".join(sorted(set(owners.values()))) or "no PF with VFs"))
        if address in named:
            raise InputError("%s: VF %s is also %s's; a VF goes to one tenant" % (where, address, named[address]))
        named[address] = where.rsplit(".vfs[", 1)[0]
        entry = dict(wanted, address=address)
        if entry["mac"] is not None:
            entry["mac"] = check_mac(entry["mac"], where + ".mac")
            macs.append((entry["mac"], "%s (%s)" % (where, address)))
        entry["vlan"] = check_vlan(entry["vlan"], where + ".vlan", none_is_zero=True)
        settings.append(entry)
    for mac, whos in duplicates(macs):
        raise InputError("tenants: MAC %s is given to %s; a MAC belongs to one VF: give each its own" % (mac, " and ".join(whos)))
    return settings


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
