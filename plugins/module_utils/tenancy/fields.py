# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One tenant's fields, each checked by one function wherever it arrives (the tenant record,
``tenancy/record.py``, and ``tenant_domain``'s options): its size (vCPUs, their maximum, memory;
bound by what the host has), firmware, machine and architecture, domain type, MAC and VLAN, and
the one whole-number reader. A message names the input (``where`` or ``what``) and the fix."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac, duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vlan_id import check_vlan

__metaclass__ = type

# a tenant boots with UEFI (OVMF) unless it asks for SeaBIOS: the one place this default is written
DEFAULT_FIRMWARE = "efi"
FIRMWARES = ("efi", "bios")
# A QEMU machine type (pc, q35, pc-q35-8.2, virt-9.0, ...), a libvirt architecture (x86_64,
# aarch64, i686, ...) and a libvirt domain type (kvm, qemu, test, ...): names, nothing more. A
# control character would reach the stored definition, which then no longer parses as XML.
MACHINE_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
ARCH_RE = re.compile(r"\A[a-z0-9][a-z0-9_]{0,31}\Z")
DOMAIN_TYPE_RE = re.compile(r"\A[a-z][a-z0-9]{0,15}\Z")


def whole(value, what, minimum=None):
    """``value`` as an int (an int, or its decimal text); InputError naming ``what``."""
    # the usual case, an int at or above the minimum (not a bool: its class is bool), taken as it is
    if value.__class__ is int and (minimum is None or value >= minimum):
        return value
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
    if not limits:
        # nothing known of the host (the tenant record's own check): every size fits
        return None
    cpus = limits.get("cpus")
    if cpus and (vcpus > cpus or max_vcpus > cpus):
        # the first of them beyond the host's CPUs is named
        key, value = ("vcpus", vcpus) if vcpus > cpus else ("max_vcpus", max_vcpus)
        return ("%s: %d is more than the %d CPUs of this host; give at most %d (each vCPU is pinned to a host CPU of "
                "its own)" % (key, value, cpus, cpus))
    memory = limits.get("memory_mb")
    if memory and memory_mb > memory:
        return "memory_mb: %d MiB is more than the %d MiB of memory this host has; give less" % (memory_mb, memory)
    return None


def check_firmware(value, what="firmware"):
    """``efi`` or ``bios``; None -> efi (the default)."""
    if value is None or value == "":
        return DEFAULT_FIRMWARE
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
