# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MAC address of each of a tenant's SR-IOV VFs, the one place that derives and checks them.

A VF whose MAC is not given gets one derived from the tenant name and the VF's index: the
first six bytes of SHA-256 over ``gpuvirt.tenancy/<tenant name>/<index>``, with the first
byte's multicast bit (0x01) cleared and its locally administered bit (0x02) set. The same
tenant name and index give the same MAC on every run, on every host and on the controller as
on the managed host; 46 bits of hash keep two tenants' VFs apart. The index of a VF is its
position among the tenant's VFs in PCI address order, so the MACs stay with the tenant when
the planner gives it other VFs of the same count.
"""

from __future__ import absolute_import, division, print_function

import hashlib

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import is_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import address_parts

__metaclass__ = type

_SEED = "gpuvirt.tenancy/%s/%d"


def derived_mac(tenant, index):
    """The locally administered unicast MAC of VF ``index`` of tenant ``tenant``."""
    digest = bytearray(hashlib.sha256((_SEED % (tenant, int(index))).encode("utf-8")).digest()[:6])
    digest[0] = (digest[0] & 0xFC) | 0x02
    return ":".join("%02x" % byte for byte in digest)


def is_unicast_local(mac):
    """Whether ``mac`` is a locally administered unicast address (what derived MACs are)."""
    text = str(mac or "").lower()
    if not is_mac(text):
        return False
    first = int(text[:2], 16)
    return not first & 0x01 and bool(first & 0x02)


def vf_order(addresses):
    """The tenant's VF addresses in PCI address order (the order that numbers them)."""
    return sorted(addresses, key=lambda address: address_parts(address) or (address,))


def tenant_vf_macs(tenant, addresses, mac=None, network=None):
    """VF address -> MAC for a tenant's VFs. ``mac``: the tenant's own MAC (one address, for its
    first network VF) or a list (one per network VF, in order; null entries derived); every
    other VF gets :func:`derived_mac` of its index. ``network``: the addresses that are network
    functions (None: all); the others get no MAC (not in the result)."""
    given = [mac] if isinstance(mac, str) else list(mac or [])
    out = {}
    position = 0
    for index, address in enumerate(vf_order(addresses)):
        if network is not None and address not in network:
            continue
        own = given[position] if position < len(given) else None
        out[address] = str(own).lower() if own else derived_mac(tenant, index)
        position += 1
    return out


# /sys/class/net/<dev>/type of an IPoIB netdev (ARPHRD_INFINIBAND, include/uapi/linux/if_arp.h)
ARPHRD_INFINIBAND = 32


def is_network_vf(topology, address, pf=None):
    """Whether the VF at ``address`` is an Ethernet function whose PF has an Ethernet netdev (so
    its MAC, VLAN, spoof check and trust are set through the PF, and the guest gets it as an
    ``<interface type='hostdev'>``), or whose PF the boot stage sets to Ethernet in this run
    (``netdev_after_boot``: planned on the port as the boot stage's firmware change leaves it).
    Read from the host model; a VF not created yet is judged by its PF (``pf``)."""
    _pf, pf_dev, klass = vf_function(topology.get("pci_devices") or {}, address, pf)
    if pf_dev.get("netdev_after_boot"):
        return True
    return ethernet_netdev(topology, pf_dev) and klass.startswith("0x0200")


def vf_function(pci, address, pf=None):
    """(its PF, the PF's entry, its PCI class in lower case) of the VF at ``address`` in the host
    model's ``pci``: its own class, else its PF's (a VF not created yet is judged by ``pf``)."""
    dev = pci.get(address) or {}
    pf = dev.get("physfn") or pf
    pf_dev = pci.get(pf) or {}
    return pf, pf_dev, str(dev.get("class") or pf_dev.get("class") or "").lower()


def ethernet_netdev(topology, pf_dev):
    """Whether a PF is an Ethernet port now: an Ethernet function (PCI class 0x0200) with a
    netdev, none of them IPoIB (an InfiniBand port's netdev takes no VF MAC or VLAN)."""
    netdevs = topology.get("netdevs") or {}
    return (bool(pf_dev.get("netdevs")) and str(pf_dev.get("class") or "").lower().startswith("0x0200")
            and not any((netdevs.get(name) or {}).get("type") == ARPHRD_INFINIBAND for name in pf_dev["netdevs"]))


def _why_not_network(pf, pf_dev):
    if not pf_dev.get("netdevs"):
        return "PF %s has no netdev" % pf
    return "PF %s is an InfiniBand port (PCI class %s, netdev %s), whose netdev takes no VF MAC or VLAN" % (
        pf, pf_dev.get("class"), ", ".join(pf_dev["netdevs"]))


def check_settings_reach(topology, tenant, vfs, vf_pfs=None, mac=None, vlan=None):
    """A tenant that gives ``mac`` or ``vlan`` refused when one of its VFs is a network function (PCI
    class 0x02, as the planner counts it) that would be given as a plain hostdev (not
    :func:`is_network_vf`): the VF's MAC, VLAN and spoof check go through the PF's Ethernet netdev,
    so they would be dropped without a word (a PF with no netdev, or an InfiniBand port). A PF the
    boot stage sets to Ethernet in this run is one already in ``topology`` as the projection shows
    it (sriov_vfio/projection.py)."""
    if not mac and not vlan:
        return
    pci = topology.get("pci_devices") or {}
    lost = {}
    for vf in vfs or []:
        pf, pf_dev, klass = vf_function(pci, vf, (vf_pfs or {}).get(vf))
        if pf and klass.startswith("0x02") and not is_network_vf(topology, vf, pf):
            lost.setdefault(pf, []).append(vf)
    for pf, lost_vfs in sorted(lost.items()):
        raise InputError("tenant %s: its %s cannot be set on VF %s: %s, and a VF's MAC, VLAN and spoof check go through "
                         "the PF's Ethernet netdev (ip link set dev PF vf N), so the VF would be given as a plain hostdev "
                         "without them. Set link_type: eth for %s in gpuvirt_sriov_pfs (the boot stage's firmware settings: "
                         "an InfiniBand port has no Ethernet netdev), or load the PF's netdev driver, or leave vlan and mac "
                         "out of the tenant. Nothing was changed"
                         % (tenant, " and ".join(k for k, v in (("mac", mac), ("vlan", vlan)) if v), ", ".join(sorted(lost_vfs)),
                            _why_not_network(pf, pf_dev), pf))


def tenant_network_vfs(topology, tenant, vfs, vf_pfs=None, mac=None, vlan=None):
    """[{address, pf, mac, vlan}] of a tenant's network VFs (:func:`is_network_vf`), in PCI
    address order, with their MACs (:func:`tenant_vf_macs`) and the tenant's VLAN."""
    vf_pfs = vf_pfs or {}
    check_settings_reach(topology, tenant, vfs, vf_pfs, mac, vlan)
    network = set(vf for vf in vfs if is_network_vf(topology, vf, vf_pfs.get(vf)))
    macs = tenant_vf_macs(tenant, vfs, mac=mac, network=network)
    pci = topology.get("pci_devices") or {}
    return [{"address": vf, "pf": (pci.get(vf) or {}).get("physfn") or vf_pfs.get(vf), "mac": macs[vf], "vlan": vlan}
            for vf in vf_order(vfs) if vf in network]
