# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether PCI devices can go to different tenants (their IOMMU groups) and whether a tenant
holds one right now (``/dev/vfio/N`` open, or a libvirt domain's host device), for every
feature that hands devices to tenants or takes them away (vfio_bind, sriov_vfs, preflight)."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import xml_device_addresses
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address

__metaclass__ = type

VFIO_HOLDERS = ("vfio-pci", "pci-stub")
# Defined domains, then the status files of running ones.
LIBVIRT_XML_DIRS = ("/etc/libvirt/qemu", "/run/libvirt/qemu")


def pci_function_of(topology, text):
    """The PCI address a user named: an address in any accepted form, or the name of a
    netdev of a PCI function; None when it is neither."""
    address = normalize_address(text)
    if address is None:
        netdev = (topology.get("netdevs") or {}).get(text)
        address = netdev and netdev.get("pci_address")
    return address or None


# ---------------------------------------------------------------------------- in use
def vfio_files_open(fs):
    """(pid, name) for each ``/dev/vfio/<name>`` a process holds open, from the /proc/<pid>/fd
    links (:meth:`Sysfs.fd_links`: each link read, not resolved; a host has thousands of them)."""
    for pid, target in fs.fd_links("/dev/vfio/"):
        yield pid, target[len("/dev/vfio/"):]


def vfio_group_holders(fs, group):
    """PIDs holding ``/dev/vfio/<group>`` open."""
    if group is None:
        return []
    return sorted(set(pid for pid, name in vfio_files_open(fs) if name == str(group)))


def libvirt_domains_using(fs, address):
    """Names of libvirt domains (defined or running) holding ``address``, as a PCI hostdev
    or as a hostdev network interface (an SR-IOV VF with its MAC/VLAN)."""
    names = set()
    for directory in LIBVIRT_XML_DIRS:
        for entry in fs.listdir(directory):
            if entry.endswith(".xml"):
                text = fs.read("%s/%s" % (directory, entry))
                if text and address in xml_device_addresses(text):
                    names.add(entry[:-4])
    return sorted(names)


def usage_of(fs, topology, address):
    """Why a device is in use by a tenant right now: a list of reasons (empty if free)."""
    dev = topology["pci_devices"].get(address) or {}
    reasons = []
    if dev.get("driver") == "vfio-pci":
        pids = vfio_group_holders(fs, dev.get("iommu_group"))
        if pids:
            reasons.append("/dev/vfio/%s is held open by pid %s" % (dev.get("iommu_group"), ", ".join(str(p) for p in pids)))
    domains = libvirt_domains_using(fs, address)
    if domains:
        reasons.append("attached to libvirt domain %s" % ", ".join(domains))
    return reasons


def vfio_groups_held(fs):
    """The IOMMU groups (as text) whose ``/dev/vfio/<group>`` some process holds open: one walk of
    /proc/<pid>/fd for every group, where :func:`vfio_group_holders` walks it for one."""
    return set(name for _pid, name in vfio_files_open(fs))


def domain_device_addresses(fs):
    """The PCI addresses every libvirt domain (defined or running) holds: each domain file read
    once, where :func:`libvirt_domains_using` reads them all for one address."""
    held = set()
    for directory in LIBVIRT_XML_DIRS:
        for entry in fs.listdir(directory):
            if entry.endswith(".xml"):
                held.update(xml_device_addresses(fs.read("%s/%s" % (directory, entry)) or ""))
    return held


def pfs_kept_for_vfs(fs, topology, call_pfs):
    """{PF: why the host keeps it}: the SR-IOV PFs whose VFs go to tenants, ``call_pfs`` (those
    of this call's SR-IOV part and ``vfs_of``) and every PF with a VF a tenant holds now (in use
    as :func:`usage_of` says, with /proc and the domain files read once for all VFs). A PF
    keeps its host driver for its VFs to exist (another driver on it removes them), so it is
    never taken, named or along with its IOMMU group, not even with ``force``."""
    pci = topology["pci_devices"]
    kept = {}
    for pf in call_pfs:
        if pf in pci and pf not in kept:
            kept[pf] = "an SR-IOV PF whose VFs this call makes or binds for tenants, so it stays on its host driver"
    vfs = [address for address in sorted(pci) if pci[address].get("physfn")]
    if not vfs:
        return kept
    groups_open, in_domains = vfio_groups_held(fs), domain_device_addresses(fs)
    for address in vfs:
        dev = pci[address]
        pf = dev["physfn"]
        held_open = dev.get("driver") == "vfio-pci" and dev.get("iommu_group") is not None and str(dev["iommu_group"]) in groups_open
        if pf not in kept and (held_open or address in in_domains):
            kept[pf] = "an SR-IOV PF whose VF %s a tenant holds, so it stays on its host driver" % address
    return kept


# ---------------------------------------------------------------------------- groups
def isolation(topology, addresses, host_needed=None):
    """Can each of ``addresses`` go to a different tenant? Not viable when two of them
    share an IOMMU group (no ACS isolation between them), when a group also holds a
    device the host needs or one on a host driver, or without an IOMMU. Group peers that
    are driverless or on vfio-pci/pci-stub only go along (``notes``).
    Returns {viable, groups: {address: group}, reasons: [...], notes: [...]}."""
    pci = topology["pci_devices"]
    host_needed = host_needed or {}
    reasons, notes = [], []
    groups = {}
    if not topology["iommu"]["enabled"]:
        return {"viable": False, "groups": dict((a, None) for a in addresses), "notes": [],
                "reasons": ["the IOMMU is off: no device can be isolated"]}
    selected = set(addresses)
    for address in addresses:
        group = (pci.get(address) or {}).get("iommu_group")
        groups[address] = group
        if group is None:
            reasons.append("%s has no IOMMU group" % address)
            continue
        others = group_endpoints(topology, address)
        shared = [o for o in others if o in selected]
        if shared:
            reasons.append("%s shares IOMMU group %s with %s (no ACS isolation between them): "
                           "they can only go to the same tenant" % (address, group, ", ".join(shared)))
        for other in others:
            if other in selected:
                continue
            if other in host_needed:
                reasons.append("IOMMU group %s of %s holds %s, which the host needs" % (group, address, other))
            elif (pci.get(other) or {}).get("driver") not in VFIO_HOLDERS + (None,):
                reasons.append("IOMMU group %s of %s holds %s, bound to the host driver %s"
                               % (group, address, other, pci[other]["driver"]))
            else:
                notes.append("%s goes along with %s to its tenant (IOMMU group %s)" % (other, address, group))
    return {"viable": not reasons, "groups": groups, "reasons": reasons, "notes": notes}
