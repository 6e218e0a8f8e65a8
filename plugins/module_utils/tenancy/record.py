# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenant contract: the tenants as the inventory gives them (``gpuvirt_tenants``, the tenants
stage's ``tenants``) read once into normalised, read-only records, and the rules over the list.

:func:`tenant_records` is the one entry point: each entry checked (its name, state, size, device
counts or addresses, placement choices, MACs, VLAN, firmware, machine, domain type, the guest's
addresses), every default written once (``tenancy/defaults.py``; the placement choices left out are
the policy's, ``None`` in the record), then :func:`check_tenant_list` over all of them: no name,
device, MAC or address to two tenants, nor a tenant address that is the host's or another
domain's. A message names the tenant (``tenants[1] (b)``), the option and the fix.

A record reads as a mapping of the entry's keys (the given ones and the defaulted ones; a value
read so is a plain copy) and by attribute (the frozen value). Keys the contract does not read
(``qos``, ``disks``, the options of ``image`` and ``data_nic``, ``guest.packages``, ...) are kept as
given for the code that reads them (tenant_domain validates them where the tenants stage passes
them on)."""

from __future__ import absolute_import, division, print_function

import ipaddress
from collections.abc import Mapping
from types import MappingProxyType

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_name import check_domain_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.ipv4 import check_ipv4
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac, duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import (
    EMULATOR_CHOICES, NO_HUGEPAGES, NUMA_CHOICES, PRIORITIES, TENANT_DEFAULTS, TENANT_STATES)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import (
    check_domain_type, check_firmware, check_machine, check_size, check_tenant_mac, check_tenant_vlan, whole)

__metaclass__ = type


# the types a tenant's value most often is, which freeze and thaw as they are (checked by exact
# type, before the slower checks against the abstract Mapping)
_PLAIN = frozenset((str, int, bool, float, type(None)))


def _freeze(value):
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType(dict((key, _freeze(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(item) for item in value)
    return value


def thaw(value):
    """A frozen value as plain data (dicts and lists), a copy."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return dict((key, thaw(item)) for key, item in value.items())
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


class Tenant(Mapping):
    """One tenant, checked and normalised; read only. ``index`` and ``label`` say where it was
    in the list; ``present`` whether it stays (its state is not absent)."""

    __slots__ = ("_data", "index", "_option", "present", "_flat")

    def __init__(self, fields, index, option, present):
        # ``fields``: a dict the record takes as its own (tenant_record builds one per record, so it
        # is not copied again); most values are plain (names, numbers) and a record of plain values
        # only (most) keeps them as they are, without a call each
        flat = set(map(type, fields.values())) <= _PLAIN
        if not flat:
            fields = {k: v if type(v) in _PLAIN else _freeze(v) for k, v in fields.items()}
        _SET_DATA(self, MappingProxyType(fields))
        _SET_FLAT(self, flat)
        _SET_INDEX(self, index)
        _SET_OPTION(self, option)
        _SET_PRESENT(self, present)

    def __setattr__(self, name, value):
        raise AttributeError("a tenant record is read only (tenant %s)" % self._data.get("name"))

    __delattr__ = __setattr__

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._data.get(name)

    def __getitem__(self, key):
        return thaw(self._data[key])

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __repr__(self):
        return "Tenant(%s)" % ", ".join("%s=%r" % (k, thaw(v)) for k, v in sorted(self._data.items()))

    @property
    def label(self):
        """How messages name the tenant: ``tenants[1] (b)``, ``fabric_vm (svc)``; put together when
        a message needs it."""
        return _label(self.index, self._option, self._data["name"])

    def plain(self):
        """The record as a plain dict (its values copied as plain data): ``dict(record)`` in one pass."""
        if self._flat:
            return self._data.copy()
        return {key: value if type(value) in _PLAIN else thaw(value) for key, value in self._data.items()}


def _label(index, option, name):
    """How messages name an entry: ``tenants[1] (b)``, or by ``option`` for one not in the list
    (``fabric_vm (svc)``)."""
    return "%s (%s)" % (option or "tenants[%d]" % index, name)


# a record's slots set through their descriptors (the class's own __setattr__ refuses): half the
# work of object.__setattr__, which looks the slot up again on each call
_SET_DATA, _SET_INDEX, _SET_OPTION, _SET_PRESENT, _SET_FLAT = (Tenant.__dict__[slot].__set__ for slot in Tenant.__slots__)


# the entry's options that are names, each with its check
_NAMES = (("machine", check_machine), ("domain_type", check_domain_type))


def _choice(value, choices, where, option, left_out):
    if value is None or value == "":
        return None
    if value not in choices:
        raise InputError("%s: %s %r is not one of %s (%s)" % (where, option, value, ", ".join(choices), left_out))
    return value


def _count_or_addresses(value, prefix, option):
    """``gpus``: a count or PCI addresses (a list, each once) -> int or [address]. ``prefix``: how
    messages name the entry (``tenants[1] (b): ``)."""
    # a plain value (a count, the usual) is no list: known without isinstance's slower failing check
    if type(value) not in _PLAIN and isinstance(value, (list, tuple)):
        addresses = [str(address) for address in value]
        if len(set(a.lower() for a in addresses)) != len(addresses):
            raise InputError("%s%s lists an address twice; list each device once" % (prefix, option))
        return addresses
    return whole(TENANT_DEFAULTS[option] if value is None else value, prefix + option, 0)


def _guest(value, where):
    """The addresses and MAC of a tenant's ``guest`` (the rest is the guest code's), checked."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError("%s: guest: expected a dict (address, rdma_address, hostname, packages, management_mac), got %s"
                         % (where, type(value).__name__))
    guest = dict(value)
    for key in ("address", "rdma_address"):
        if guest.get(key):
            check_ipv4(guest[key], "%s: guest.%s" % (where, key), True)
    if guest.get("management_mac"):
        guest["management_mac"] = check_mac(str(guest["management_mac"]), "%s: guest.management_mac" % where)
    return guest


def _options(value, where, option, keys):
    """A tenant's dict of options (``image``, ``data_nic``) or None; anything else is refused."""
    if value is None or isinstance(value, Mapping):
        return value
    raise InputError("%s: %s: expected a dict (%s), got %s" % (where, option, keys, type(value).__name__))


def _data_nic(value, where):
    if _options(value, where, "data_nic", "network or bridge, mac, vlan") is None:
        return None
    nic = dict(value)
    if nic.get("mac"):
        nic["mac"] = check_mac(str(nic["mac"]), "%s: data_nic.mac" % where)
    return nic


def _vf_count(vfs, prefix):
    """A tenant's ``vfs``: a count. VFs named (addresses, or dicts with their own MAC and VLAN)
    are refused with the contract's fix: the planner picks them, the tenant's mac/vlan set them."""
    # a plain value (a count, the usual) is none of these: known without the abstract Mapping's check
    if type(vfs) not in _PLAIN and isinstance(vfs, (list, tuple, Mapping)):
        count = 1 if isinstance(vfs, Mapping) else len(vfs)
        raise InputError("%svfs: %r names VFs by address, but a tenant's vfs is a count: give the number of VFs "
                         "(vfs: %d); the planner picks the tenant's VFs near its GPU, and each gets its MAC and VLAN from "
                         "the tenant's mac (one, or a list of one per VF) and vlan" % (prefix, vfs, count))
    return whole(TENANT_DEFAULTS["vfs"] if vfs is None else vfs, prefix + "vfs", 0)


def tenant_record(raw, index, firmware=None, option=None):
    """One entry of the list -> its :class:`Tenant`. ``firmware``: what a tenant that gives none
    boots with (the stage's setting; None: efi). A tenant that leaves (state absent) needs only
    its name: what it held is read from its domain. ``option``: how messages name an entry that
    is not in the list (the service VM: ``fabric_vm``), else ``tenants[index]``."""
    try:
        return _tenant_record(raw, index, firmware, option, False)
    except InputError:
        # a message names the entry and its option (``tenants[1] (b): mac: ...``): put together only
        # for an entry that fails, by reading it again with the names (the same checks in the same
        # order fail the same way)
        return _tenant_record(raw, index, firmware, option, True)


def _tenant_record(raw, index, firmware, option, named):
    """:func:`tenant_record`; ``named``: whether the messages name the entry (else they say only
    what failed)."""
    if raw.__class__ is not dict and not isinstance(raw, Mapping):
        raise InputError("tenants[%d]: expected a dict with name, vcpus, memory_mb, ... got %r" % (index, raw))
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError("tenants[%d]: name: required, a non-empty string (the tenant's libvirt domain name); got %r"
                         % (index, name))
    if named:
        check_domain_name(name, (option or "tenants[%d]" % index) + ".name")
        where = _label(index, option, name)
        prefix = where + ": "
    else:
        check_domain_name(name, "name")
        where = prefix = ""
    state = str(raw.get("state") or TENANT_DEFAULTS["state"])
    if state not in TENANT_STATES:
        raise InputError("%s: state %r is not one of %s" % (where, raw.get("state"), ", ".join(TENANT_STATES)))
    if state == "absent":
        keep = dict((key, raw[key]) for key in ("shutdown_timeout", "force_off", "guest_dir") if key in raw)
        return Tenant(dict(keep, name=name, state=state), index, option, False)
    data = dict(raw)
    data["name"], data["state"] = name, state
    get = raw.get
    data["gpus"] = _count_or_addresses(get("gpus"), prefix, "gpus")
    data["vfs"] = _vf_count(get("vfs"), prefix)
    data["vcpus"], data["max_vcpus"], data["memory_mb"] = check_size(get("vcpus"), get("memory_mb"), get("max_vcpus"), where=prefix)
    data["mac"] = check_tenant_mac(get("mac"), prefix + "mac")
    data["vlan"] = check_tenant_vlan(get("vlan"), prefix + "vlan")
    data["firmware"] = check_firmware(get("firmware") or firmware, prefix + "firmware")
    for key, check in _NAMES:
        if get(key) is not None:
            data[key] = check(raw[key], prefix + key)
    priority = get("priority") or TENANT_DEFAULTS["priority"]
    if priority not in PRIORITIES:
        raise InputError("%s: priority %r is not one of %s" % (where, priority, ", ".join(PRIORITIES)))
    data["priority"] = priority
    if "hugepage_size" in raw:
        data["hugepage_size"] = size_name(raw["hugepage_size"], prefix + "hugepage_size", allow_none=True) or NO_HUGEPAGES
    data["numa"] = _choice(get("numa"), NUMA_CHOICES, where, "numa", "leave it out for policy.numa")
    data["emulator"] = _choice(get("emulator"), EMULATOR_CHOICES, where, "emulator", "leave it out for policy.emulator")
    data["guest"] = _guest(get("guest"), where)
    data["data_nic"] = _data_nic(get("data_nic"), where)
    data["image"] = _options(get("image"), where, "image", "base or url, checksum, size_gb, copy")
    # the fields without a value (left out, or given as None) are not in the record
    return Tenant({key: value for key, value in data.items() if value is not None}, index, option, True)


def tenant_records(tenants, firmware=None, held=None, host_address=None):
    """The one entry point: ``tenants`` (the inventory's list) -> [:class:`Tenant`], in list
    order, each entry checked, then the list (:func:`check_tenant_list`). A list that is already
    records is returned as it is (parsed once)."""
    if isinstance(tenants, (list, tuple)) and all(isinstance(t, Tenant) for t in tenants):
        return list(tenants)
    if not isinstance(tenants, (list, tuple)):
        raise InputError("tenants: expected a list of tenant dicts (gpuvirt_tenants)")
    records = [tenant_record(raw, index, firmware) for index, raw in enumerate(tenants)]
    check_tenant_list(records, held, host_address)
    return records


def tenant_macs(record):
    """[(MAC, what)] a present tenant gives its interfaces: its ``mac`` (one or per network VF),
    its management NIC's and its data NIC's."""
    out = []
    mac = record.mac
    for index, value in enumerate([mac] if isinstance(mac, str) else (mac or ())):
        if value is not None:
            out.append((value, "mac" if isinstance(mac, str) else "mac[%d]" % index))
    guest, nic = record.guest, record.data_nic
    if guest and guest.get("management_mac"):
        out.append((guest["management_mac"], "guest.management_mac"))
    if isinstance(nic, Mapping) and nic.get("mac"):
        out.append((nic["mac"], "data_nic.mac"))
    return out


def tenant_addresses(record):
    """[(IPv4 address without prefix, option)] of a present tenant's guest."""
    guest = record.guest or {}
    return [(str(ipaddress.ip_interface(u"%s" % guest[key]).ip), "guest.%s" % key)
            for key in ("address", "rdma_address") if guest.get(key)]


def check_tenant_list(records, held=None, host_address=None):
    """The rules over the whole list: a name once; of the present tenants, a PCI device they name,
    a MAC and an address to one tenant only. ``held``: {domain: {"addresses": [...]}} of the
    host's other domains (a tenant's own domain is not another's; their MACs are checked against
    every interface by the domain code, placement/tenant_request.Claims); ``host_address``: the
    host's address on the management network (a tenant address is never the host's)."""
    seen = {}
    # of the present tenants, in one pass: the GPUs they name, those that name a MAC or a guest (its
    # addresses, its management NIC) or a data NIC, and those with a guest
    devices, named, guests = [], [], []
    for record in records:
        # each record's fields read from its view, without an attribute call each
        data = record._data  # pylint: disable=protected-access
        name = data["name"]
        if name in seen:
            raise InputError("%s: name %s is also tenants[%d]; tenant names are domain names: list each tenant once"
                             % (record.label, name, seen[name]))
        seen[name] = record.index
        if not record.present:
            continue
        # a record's GPU addresses are a tuple (frozen as one), its count an int
        if data["gpus"].__class__ is tuple:
            devices.extend((str(address).lower(), record.label) for address in data["gpus"])
        # a present record holds no field without a value: the fields it holds are given
        if "guest" in data:
            guests.append(record)
        if "mac" in data or "guest" in data or "data_nic" in data:
            named.append(record)
    for address, whos in duplicates(devices):
        raise InputError("%s: gpus: %s is also a GPU of %s; a device goes to one tenant only: give each tenant its own"
                         % (whos[-1], address, ", ".join(whos[:-1])))
    macs = [(mac, (record.label, option)) for record in named for mac, option in tenant_macs(record)]
    for mac, whos in duplicates(macs):
        (label, option), others = whos[-1], whos[:-1]
        raise InputError("%s: %s %s is also the MAC of %s; a MAC belongs to one interface: give each tenant its own"
                         % (label, option, mac, ", ".join("%s (%s)" % other if other[0] != label else other[1] for other in others)))
    owners = {}
    # each present tenant's guest addresses, read once for the checks below
    addresses = [(record, tenant_addresses(record)) for record in guests]
    for record, listed in addresses:
        for address, option in listed:
            # the management and the RDMA addresses are on networks of their own: each compared with its kind
            other = owners.setdefault((option, address), record.label)
            if other != record.label:
                raise InputError("%s: %s %s is also the %s of %s; an address belongs to one guest: give each its own"
                                 % (record.label, option, address, option, other))
    host = str(ipaddress.ip_interface(u"%s" % host_address).ip) if host_address else None
    for record, listed in addresses:
        for address, option in listed:
            if address == host:
                raise InputError("%s: %s %s is the host's own address on the management network (%s); give the guest "
                                 "another address in that subnet" % (record.label, option, address, host_address))
        for domain, holds in sorted((held or {}).items()):
            if domain in seen:
                continue
            for address, option in listed:
                if address in (holds.get("addresses") or ()):
                    raise InputError("%s: %s %s is already the address of domain %s; an address belongs to one guest: "
                                     "give another" % (record.label, option, address, domain))
    return records
