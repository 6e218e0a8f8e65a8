# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's request checked once, the same way wherever it arrives: the planner
(``placement``), ``tenant_domain`` (``tenant_spec``, ``tenant_domain_one``) and the filters.

Two halves, both pure:

- one tenant's own inputs: its size (vCPUs, their maximum, memory; bound by what the host has),
  firmware, machine and architecture, domain type, MAC and VLAN;
- the isolation rules over every device assignment at once: a PCI device goes to one tenant;
  an IOMMU group goes whole to one tenant or to none; a PF and its VFs are never split between
  tenants, nor between the host and a tenant; a MAC belongs to one VF; spoof checking off or
  trust on only for a tenant that opts in (``relax_vf_isolation``), and then with a warning.

A message names the input (``where`` is the entry's label, such as ``tenants[1] (b): ``) and
the fix."""

from __future__ import absolute_import, division, print_function

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac, duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vlan_id import check_vlan

__metaclass__ = type

FIRMWARES = ("efi", "bios")
# A QEMU machine type (pc, q35, pc-q35-8.2, virt-9.0, ...), a libvirt architecture (x86_64,
# aarch64, i686, ...) and a libvirt domain type (kvm, qemu, test, ...): names, nothing more. A
# control character would reach the stored definition, which then no longer parses as XML.
MACHINE_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
ARCH_RE = re.compile(r"\A[a-z0-9][a-z0-9_]{0,31}\Z")
DOMAIN_TYPE_RE = re.compile(r"\A[a-z][a-z0-9]{0,15}\Z")
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


# --------------------------------------------------------------------------- one tenant's inputs
def whole(value, what, minimum=None):
    """``value`` as an int (an int, or its decimal text); InputError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError("%s: %r is not a whole number" % (what, value))
    try:
        number = int(value)
    except ValueError:
        raise InputError("%s: %r is not a whole number" % (what, value))
    if minimum is not None and number < minimum:
        raise InputError("%s: must be at least %d, got %d" % (what, minimum, number))
    return number


def check_size(vcpus, memory_mb, max_vcpus=None, limits=None, where=""):
    """A tenant's vCPUs, their maximum (None: ``vcpus``) and its memory in MiB -> (vcpus,
    max_vcpus, memory_mb). ``limits``: what the host has (``limits_of_*``); a size above it can
    never run there and is refused."""
    if vcpus is None:
        raise InputError("%svcpus: required (the number of guest vCPUs)" % where)
    if memory_mb is None:
        raise InputError("%smemory_mb: required (the guest memory in MiB)" % where)
    vcpus = whole(vcpus, where + "vcpus", 1)
    memory_mb = whole(memory_mb, where + "memory_mb", 1)
    max_vcpus = vcpus if max_vcpus is None else whole(max_vcpus, where + "max_vcpus", 1)
    if max_vcpus < vcpus:
        raise InputError("%smax_vcpus: %d is below vcpus %d; raise max_vcpus (the most vCPUs the tenant may grow to without a "
                         "restart) or leave it out" % (where, max_vcpus, vcpus))
    beyond = over_host(vcpus, max_vcpus, memory_mb, limits)
    if beyond:
        raise InputError(where + beyond)
    return vcpus, max_vcpus, memory_mb


def over_host(vcpus, max_vcpus, memory_mb, limits):
    """Why a size is more than the host has (``limits``), naming the input; None when it fits."""
    limits = limits or {}
    cpus = limits.get("cpus")
    if cpus:
        for key, value in (("vcpus", vcpus), ("max_vcpus", max_vcpus)):
            if value > cpus:
                return ("%s: %d is more than the %d CPUs of this host; give at most %d (each vCPU is pinned to a host CPU of "
                        "its own)" % (key, value, cpus, cpus))
    memory = limits.get("memory_mb")
    if memory and memory_mb > memory:
        return "memory_mb: %d MiB is more than the %d MiB of memory this host has; give less" % (memory_mb, memory)
    return None


def check_firmware(value, what="firmware"):
    """``efi`` or ``bios``; None -> efi (the default)."""
    if value is None or value == "":
        return "efi"
    if value not in FIRMWARES:
        raise InputError("%s: %r is not one of %s" % (what, value, ", ".join(FIRMWARES)))
    return value


def _name(value, pattern, what, example):
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not pattern.match(value):
        raise InputError("%s: %r is not a name such as %s (letters, digits, and . _ - only)" % (what, value, example))
    return value


def check_machine(value, what="machine"):
    """A QEMU machine type or None (the hypervisor's default)."""
    return _name(value, MACHINE_RE, what, "q35 or pc-q35-8.2")


def check_arch(value, what="arch"):
    return _name(value, ARCH_RE, what, "x86_64")


def check_domain_type(value, what="domain_type"):
    return _name(value, DOMAIN_TYPE_RE, what, "kvm")


def check_tenant_mac(value, what="mac"):
    """A tenant's ``mac``: one MAC (its first network VF's) or a list (one per network VF, a
    null entry derived) -> the same, lower case; None when not given."""
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)):
        macs = [None if mac is None else check_mac(mac, "%s[%d]" % (what, index)) for index, mac in enumerate(value)]
        for mac, whos in duplicates([(mac, index) for index, mac in enumerate(macs)]):
            raise InputError("%s: %s is listed %d times (%s); each VF gets its own MAC"
                             % (what, mac, len(whos), ", ".join("%s[%d]" % (what, i) for i in whos)))
        return macs
    return check_mac(value, what)


def check_tenant_vlan(value, what="vlan"):
    """A tenant's VLAN (1-4094) or None (no VLAN)."""
    return check_vlan(value, what)


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
