# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's request (placement/planner.py): its policy, merged with the defaults and checked, and
each tenant's inputs, checked as tenant_domain checks them (placement/tenant_request.py) and read into the
shape the planner works with (``gpu_addresses``/``gpu_count``, ``vf_count``, ``hugepage_size``,
``emulator``, ...; ``refused`` with the reason for one that no node can ever hold). Pure.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_name import check_domain_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import LEVELS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.tenant_request import (
    check_firmware, check_machine, check_size, check_tenant_mac, check_tenant_vlan, over_host)

__metaclass__ = type

# Search nodes the planner may visit per plan before it keeps the best assignment found.
SEARCH_BUDGET = 20000

POLICY_DEFAULTS = {
    "numa": "required",
    "reserved_cpus": [],
    "smt": "whole_cores",
    "emulator": "isolate",
    "pcie_affinity": "prefer",
    "pcie_affinity_level": "PXB",
    "hugepage_size": "2M",
    "gpus": None,
    "vf_pfs": None,
    "reserved_memory_mb": 0,
    "existing": {},
    "strategy": "best_fit",
    "search_budget": SEARCH_BUDGET,
    "host_devices": {},
}
POLICY_CHOICES = {
    "numa": ("required", "preferred", "spread"),
    "smt": ("whole_cores", "threads"),
    "emulator": ("isolate", "housekeeping", "vcpus"),
    "pcie_affinity": ("prefer", "require", "ignore"),
    "pcie_affinity_level": LEVELS,
    "strategy": ("best_fit", "first_fit"),
}
TENANT_KEYS = ("name", "gpus", "vfs", "vcpus", "max_vcpus", "memory_mb", "hugepage_size", "numa", "vlan", "mac", "state",
               "priority", "qos", "emulator", "disks", "domain_type", "start", "shutdown_timeout", "force_off")

PRIORITIES = ("online", "batch")
TENANT_STATES = ("present", "defined", "running", "absent")


def hugepage_size_name(value, what="hugepage_size"):
    """'2M' / '1G' / '2048kB' / 2048 -> '2M' or '1G'; None / 'none' -> None."""
    return size_name(value, what, allow_none=True)


def read_policy(policy):
    """The planner's policy: ``policy`` (a dict, or None) over POLICY_DEFAULTS, each choice checked."""
    policy = dict(policy or {})
    unknown = sorted(set(policy) - set(POLICY_DEFAULTS))
    if unknown:
        raise InputError("policy: unknown key(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(POLICY_DEFAULTS))))
    merged = dict(POLICY_DEFAULTS)
    merged.update(dict((k, v) for k, v in policy.items() if v is not None or k in ("gpus", "vf_pfs")))
    for key, choices in POLICY_CHOICES.items():
        value = merged[key]
        if key == "pcie_affinity_level":
            value = str(value).upper()
            merged[key] = value
        if value not in choices:
            raise InputError("policy.%s: %r is not one of %s" % (key, value, ", ".join(choices)))
    merged["hugepage_size"] = hugepage_size_name(merged["hugepage_size"], "policy.hugepage_size")
    return merged


def check_tenant_macs(tenants):
    """The MACs the tenants give are each one VF's: refused when two tenants give the same."""
    owners = []
    for index, tenant in enumerate(tenants):
        given = tenant.get("mac")
        for mac in [given] if isinstance(given, str) else (given or []):
            owners.append((mac, "tenants[%d] (%s)" % (index, tenant["name"])))
    for mac, whos in duplicates(owners):
        raise InputError("%s: mac %s is also the MAC of %s; a MAC belongs to one VF: give each tenant its own"
                         % (whos[-1], mac, ", ".join(whos[:-1])))


class TenantRequests:
    """The Planner's reading of its tenants (a mixin: it needs ``policy``, ``host``, ``limits``
    and ``reserved``)."""

    def _tenants(self, tenants):
        """The tenants read and checked, in list order; names unique, MACs each one VF's."""
        if not isinstance(tenants, (list, tuple)):
            raise InputError("tenants: expected a list of tenant dicts (gpuvirt_tenants)")
        parsed = []
        names = set()
        for index, raw in enumerate(tenants):
            tenant = self._tenant(raw, index)
            if tenant["name"] in names:
                raise InputError("tenants[%d]: name %s appears twice; tenant names are domain names and must be unique"
                                 % (index, tenant["name"]))
            names.add(tenant["name"])
            parsed.append(tenant)
        check_tenant_macs(parsed)
        return parsed

    def _tenant(self, raw, index):
        if not isinstance(raw, dict):
            raise InputError("tenants[%d]: expected a dict with name, vcpus, memory_mb, ... got %r" % (index, raw))
        name = raw.get("name")
        if not name or not isinstance(name, str):
            raise InputError("tenants[%d]: name is required (a string, the libvirt domain name)" % index)
        check_domain_name(name, "tenants[%d].name" % index)
        where = "tenants[%d] (%s)" % (index, name)
        if str(raw.get("state") or "present") == "absent":
            # a tenant that leaves needs only its name: what it held is read from its domain
            return {"name": name, "state": "absent"}

        def count(key, default, minimum):
            value = raw.get(key, default)
            if value is None:
                value = default
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise InputError("%s: %s must be a whole number, got %r" % (where, key, value))
            try:
                value = int(value)
            except ValueError:
                raise InputError("%s: %s must be a whole number, got %r" % (where, key, value)) from None
            if value < minimum:
                raise InputError("%s: %s must be at least %d, got %d" % (where, key, minimum, value))
            return value

        tenant = dict(raw)
        tenant["name"] = name
        gpus = raw.get("gpus", 0)
        if isinstance(gpus, (list, tuple)):
            grouped = self._explicit_groups(gpus)
            if grouped:
                return {"name": name, "state": raw.get("state"), "refused": grouped}
            unknown = [addr for addr in gpus if addr not in self.host.gpu_node]
            if unknown:
                raise InputError("%s: gpus %s are not GPUs this host gives to tenants (%s)"
                                 % (where, ", ".join(map(str, unknown)), ", ".join(self.host.gpus) or "none"))
            if len(set(gpus)) != len(gpus):
                raise InputError("%s: gpus lists an address twice" % where)
            tenant["gpu_addresses"] = list(gpus)
            tenant["gpu_count"] = len(gpus)
        else:
            tenant["gpu_addresses"] = None
            tenant["gpu_count"] = count("gpus", 0, 0)
        tenant["vf_count"] = count("vfs", 0, 0)
        # the tenant's own inputs, checked as tenant_domain checks them (tenant_request)
        prefix = where + ": "
        tenant["vcpus"], tenant["max_vcpus"], tenant["memory_mb"] = check_size(
            raw.get("vcpus"), raw.get("memory_mb"), raw.get("max_vcpus"), where=prefix)
        beyond = over_host(tenant["vcpus"], tenant["max_vcpus"], tenant["memory_mb"], self.limits)
        if beyond:
            # no node, nor all of them, can ever hold it: not placed, and the input named
            return {"name": name, "state": raw.get("state"), "refused": beyond}
        tenant["mac"] = check_tenant_mac(raw.get("mac"), prefix + "mac")
        tenant["vlan"] = check_tenant_vlan(raw.get("vlan"), prefix + "vlan")
        if raw.get("firmware") is not None:
            tenant["firmware"] = check_firmware(raw["firmware"], prefix + "firmware")
        if raw.get("machine") is not None:
            tenant["machine"] = check_machine(raw["machine"], prefix + "machine")
        priority = raw.get("priority") or "online"
        if priority not in PRIORITIES:
            raise InputError("%s: priority %r is not one of %s" % (where, priority, ", ".join(PRIORITIES)))
        tenant["priority"] = priority
        if str(raw.get("state") or "present") not in TENANT_STATES:
            raise InputError("%s: state %r is not one of %s" % (where, raw.get("state"), ", ".join(TENANT_STATES)))
        size = raw.get("hugepage_size", self.policy["hugepage_size"]) if "hugepage_size" in raw else self.policy["hugepage_size"]
        tenant["hugepage_size"] = hugepage_size_name(size, "%s: hugepage_size" % where)
        emulator = raw.get("emulator") or self.policy["emulator"]
        if emulator not in POLICY_CHOICES["emulator"]:
            raise InputError("%s: emulator %r is not one of %s" % (where, emulator, ", ".join(POLICY_CHOICES["emulator"])))
        if emulator == "housekeeping" and not self.reserved:
            raise InputError("%s: emulator housekeeping pins emulator threads on policy.reserved_cpus, which is empty; "
                             "set reserved_cpus or use emulator isolate" % where)
        tenant["emulator"] = emulator
        numa = raw.get("numa") or self.policy["numa"]
        if numa not in POLICY_CHOICES["numa"]:
            raise InputError("%s: numa %r is not one of %s (leave it out for policy.numa, %s)"
                             % (where, numa, ", ".join(POLICY_CHOICES["numa"]), self.policy["numa"]))
        # spread: on one node when one holds it, else on as few nodes as can, one guest cell each
        tenant["numa"] = numa
        return tenant

    def _explicit_groups(self, gpus):
        """Why GPUs a tenant names cannot go to it for their IOMMU groups (left out, or only part
        of a group named); None when they can."""
        host = self.host
        left = [host.left_out[a] for a in gpus if a in host.left_out]
        if left:
            return "; ".join(left)
        named = set(gpus)
        partial = sorted(set(host.units[a] for a in gpus if a in host.units and not named.issuperset(host.units[a])))
        if partial:
            return "; ".join("GPUs %s share IOMMU group %s and go to one tenant or to none: list them all, or ask for a count"
                             % (", ".join(unit), host.groups.get(unit[0])) for unit in partial)
        return None

    def _needed_pages(self, tenant):
        size = tenant["hugepage_size"]
        if not size:
            return 0
        size_kb = SIZES_KB[size]
        return -(-tenant["memory_mb"] * 1024 // size_kb)
