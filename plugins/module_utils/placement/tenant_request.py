# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What bounds a tenant on a host and the isolation rules over every device assignment, pure. A
tenant's own fields are checked by the tenant record (``tenancy/record.py``, ``tenancy/fields.py``).

- what the host has: its online CPUs and memory (``limits_of_topology``, ``limits_of_capabilities``);
- the isolation rules over every device assignment at once against the host model: a PCI device
  goes to one tenant; an IOMMU group goes whole to one tenant or to none; a PF and its VFs are never
  split between tenants, nor between the host and a tenant; a MAC belongs to one VF; spoof checking
  off or trust on only for a tenant that opts in (``relax_vf_isolation``), and then with a warning.

A message names the input and the fix."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import DANGLING_GROUP, dangling_group, group_endpoints

__metaclass__ = type

# The per-tenant opt-in to VF settings that weaken isolation.
RELAX_OPTION = "relax_vf_isolation"


# --------------------------------------------------------------------------- what the host has
def limits_of_topology(topology):
    """{"cpus": online CPUs, "memory_mb": memory of all NUMA nodes} of the host model; a count
    the model does not give is None (not bound)."""
    cpus = [cpu for cpu in topology.get("cpus") or [] if cpu.get("online", True) is not False]
    count = len(cpus) or sum(len(node.get("cpus") or []) for node in topology.get("numa_nodes") or [])
    memory = sum(int(node.get("memory_mb") or 0) for node in topology.get("numa_nodes") or [])
    return {"cpus": count or None, "memory_mb": memory or None}


def limits_of_capabilities(capabilities_xml):
    """The same from libvirt's capabilities XML (its NUMA cells' CPUs and memory)."""
    caps = ET.fromstring(capabilities_xml)
    cells = caps.findall("./host/topology/cells/cell")
    count = sum(len(cell.findall("./cpus/cpu")) for cell in cells)
    kib = 0
    for cell in cells:
        memory = cell.find("memory")
        if memory is not None and (memory.text or "").strip().isdigit():
            factor = {"kib": 1, "mib": 1024, "gib": 1024 * 1024}.get((memory.get("unit") or "KiB").lower(), 1)
            kib += int(memory.text) * factor
    return {"cpus": count or None, "memory_mb": kib // 1024 or None}


# --------------------------------------------------------------------------- isolation over all assignments
class Claims:
    """Who gets which PCI devices and VF MACs, claim by claim in the order they are made: the
    tenants of this request (``add``, then ``check`` of that tenant) and, apart, what other
    domains hold now (``hold``; ``release`` when the request removes or redefines one). The
    rules are checked against the host model (``topology``); a device it does not know is only
    checked for being given twice."""

    def __init__(self, topology=None):
        self.topology = topology or {}
        self.pci = self.topology.get("pci_devices") or {}
        self.owner = {}        # address -> tenant of this request
        self.held = {}         # address -> another domain
        self.macs = []         # [(mac, (tenant, VF address))] of this request
        self.held_macs = []    # [(mac, domain)]
        self.labels = {}       # tenant -> how a message names it

    def add(self, tenant, addresses, label=None, macs=None):
        """The devices (and interface MACs, {VF address or NIC role: mac}) one tenant of this request takes.
        A device another tenant of the request took is refused here."""
        self.labels[tenant] = label or tenant
        for address in addresses:
            other = self.owner.get(address)
            if other is not None and other != tenant:
                raise InputError("%s is also given to %s; a PCI device goes to one tenant only: give it to one of them"
                                 % (address, self.labels[other]))
            self.owner[address] = tenant
        for address, mac in sorted((macs or {}).items()):
            self.macs.append((mac, (tenant, address)))

    def hold(self, domain, addresses, macs=()):
        """What another domain holds now."""
        for address in addresses:
            self.held.setdefault(address, domain)
        for mac in macs:
            self.held_macs.append((mac, domain))

    def release(self, domain):
        """A domain the request removes or redefines: what it held is free."""
        self.held = dict((a, d) for a, d in self.held.items() if d != domain)
        self.held_macs = [(m, d) for m, d in self.held_macs if d != domain]

    def _who(self, address, tenant):
        """Who else has ``address``, seen from ``tenant``: ("tenant", name), ("domain", name) or None."""
        other = self.owner.get(address)
        if other is not None and other != tenant:
            return ("tenant", other)
        if other is None and address in self.held:
            return ("domain", self.held[address])
        return None

    def _name(self, who):
        if who is None:
            return "the host"
        kind, name = who
        return self.labels.get(name, name) if kind == "tenant" else "domain %s" % name

    def check(self, tenant):
        """The rules for the devices and MACs ``tenant`` took -> (errors, conflicts with other
        domains): the first with other tenants of this request, the second with domains
        defined apart, which a removal earlier in the run may free (the caller decides)."""
        errors, others = [], []
        label = self.labels[tenant]

        def found(who, message):
            (others if who[0] == "domain" else errors).append(message)

        for address in sorted(a for a, t in self.owner.items() if t == tenant):
            dev = self.pci.get(address) or {}
            group = dev.get("iommu_group")
            if dangling_group(self.topology, address) is not None:
                errors.append("%s (%s): %s" % (address, label, DANGLING_GROUP % (group, address)))
                continue
            for other in group_endpoints(self.topology, address) if group is not None else []:
                who = self._who(other, tenant)
                if who is not None:
                    found(who, "%s (%s) and %s (%s) share IOMMU group %s: a group goes whole to one tenant or to none (no ACS "
                               "isolation between them); give both to one tenant, or enable ACS on the PCIe ports above them"
                          % (address, label, other, self._name(who), group))
            pf = dev.get("physfn")
            who = self._who(pf, tenant) if pf else None
            if who is not None:
                found(who, "VF %s (%s) and its PF %s (%s) are split: a PF and its VFs go to one tenant; keep the PF with the "
                           "host, or give the tenant both" % (address, label, pf, self._name(who)))
            elsewhere = [vf for vf in dev.get("virtfns") or [] if self.owner.get(vf) != tenant]
            if elsewhere:
                parties = [self._who(vf, tenant) for vf in elsewhere]
                kind = "domain" if all(who is not None and who[0] == "domain" for who in parties) else "tenant"
                found((kind, None), "PF %s (%s) has VFs %s that stay with %s: a PF and its VFs are never split; remove its VFs "
                                    "first (gpuvirt.tenancy.sriov_vfs num_vfs: 0) or give the tenant a device without VFs"
                      % (address, label, ", ".join(elsewhere), ", ".join(sorted(set(self._name(who) for who in parties)))))
        mine = [(mac, vf) for mac, (owner, vf) in self.macs if owner == tenant]
        for mac, vf in mine:
            earlier = [(owner, address) for other_mac, (owner, address) in self.macs if other_mac == mac and (owner, address) != (tenant, vf)]
            if earlier:
                owner, address = earlier[0]
                errors.append("MAC %s of %s is also the MAC of %s (%s); a MAC belongs to one interface: give each its own (or "
                              "leave it out to have one derived)" % (mac, _interface(vf), _interface(address), self.labels[owner]))
            domains = sorted(set(domain for held_mac, domain in self.held_macs if held_mac == mac))
            if domains:
                others.append("MAC %s of %s (%s) is already the MAC of an interface of domain %s; a MAC belongs to one "
                              "interface: give another" % (mac, _interface(vf), label, ", ".join(domains)))
        return _unique(errors), _unique(others)


def _interface(key):
    """How a message names an interface of a tenant: a VF by its PCI address, a virtio NIC by its role."""
    return "VF %s" % key if ":" in key else key


def _unique(messages):
    out = []
    for message in messages:
        if message not in out:
            out.append(message)
    return out


def vf_security(settings, owners, relaxed):
    """The VF settings that weaken isolation (spoof checking off, trust on). ``settings``:
    [(label, VF address, settings dict)]; ``owners``: VF address -> tenant; ``relaxed``: the
    tenants that opted in. -> warnings; InputError for a VF whose tenant did not opt in."""
    warnings = []
    for label, address, wanted in settings:
        weak = [text for key, bad, text in (("spoofchk", False, "spoof checking off"), ("trust", True, "trust on"))
                if wanted.get(key) is bad]
        if not weak:
            continue
        tenant = owners.get(address)
        if tenant is not None and tenant not in relaxed:
            raise InputError("%s: %s for VF %s of tenant %s lets its guest send with another MAC or VLAN (or ask the PF "
                             "for promiscuous mode); keep spoofchk on and trust off, or set %s: true on that tenant to "
                             "accept it" % (label, " and ".join(weak), address, tenant, RELAX_OPTION))
        warnings.append("VF %s%s has %s: its guest can send with another MAC or VLAN (or ask the PF for promiscuous mode)"
                        % (address, " (tenant %s, %s: true)" % (tenant, RELAX_OPTION) if tenant else "", " and ".join(weak)))
    return warnings
