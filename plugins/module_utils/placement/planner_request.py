# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's request (placement/planner.py): its policy, merged with the defaults and checked, and
each tenant's record (tenancy/record.py: the tenants checked once) read into the shape the planner
works with (``gpu_addresses``/``gpu_count``, ``vf_count``, ``hugepage_size``,
``emulator``, ...; ``refused`` with the reason for one that no node can ever hold). Pure.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import LEVELS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import over_host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import EMULATOR_CHOICES, NO_HUGEPAGES, NUMA_CHOICES
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records

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
    # GPU PCI address -> module ID on an HGX board with NVSwitches (vocabulary/nvswitch.py)
    "gpu_modules": None,
}
POLICY_CHOICES = {
    "numa": NUMA_CHOICES,
    "smt": ("whole_cores", "threads"),
    "emulator": EMULATOR_CHOICES,
    "pcie_affinity": ("prefer", "require", "ignore"),
    "pcie_affinity_level": LEVELS,
    "strategy": ("best_fit", "first_fit"),
}


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


class TenantRequests:
    """The Planner's reading of its tenants (a mixin: it needs ``policy``, ``host``, ``limits``
    and ``reserved``)."""

    def _tenants(self, tenants):
        """The tenants as records (tenancy.record: each checked, the list's rules), read into the
        planner's shape, in list order."""
        return [self._tenant(record) for record in tenant_records(tenants)]

    def _tenant(self, record):
        """One record with the policy's choices where it has none: -> the planner's dict, or
        {name, state, refused} for a tenant no node can ever hold."""
        if not record.present:
            # a tenant that leaves needs only its name: what it held is read from its domain
            return {"name": record.name, "state": "absent"}
        # the record read once, as a plain dict (its fields read from it, not each through the record)
        tenant = record.plain()
        gpus = tenant["gpus"]
        # the GPU addresses are a list (the record's plain copy), the count an int
        if gpus.__class__ is list:
            grouped = self._explicit_groups(gpus)
            if grouped:
                return {"name": tenant["name"], "state": tenant["state"], "refused": grouped}
            unknown = [addr for addr in gpus if addr not in self.host.gpu_node]
            if unknown:
                raise InputError("%s: gpus %s are not GPUs this host gives to tenants (%s)"
                                 % (record.label, ", ".join(map(str, unknown)), ", ".join(self.host.gpus) or "none"))
            tenant["gpu_addresses"] = list(gpus)
            tenant["gpu_count"] = len(gpus)
        else:
            tenant["gpu_addresses"] = None
            tenant["gpu_count"] = gpus
        tenant["vf_count"] = tenant["vfs"]
        unfit = self._partition_refusal(tenant)
        if unfit:
            return {"name": tenant["name"], "state": tenant["state"], "refused": unfit}
        beyond = over_host(tenant["vcpus"], tenant["max_vcpus"], tenant["memory_mb"], self.limits)
        if beyond:
            # no node, nor all of them, can ever hold it: not placed, and the input named
            return {"name": tenant["name"], "state": tenant["state"], "refused": beyond}
        size = tenant.get("hugepage_size") or self.policy["hugepage_size"]
        tenant["hugepage_size"] = None if size == NO_HUGEPAGES else size
        emulator = tenant.get("emulator") or self.policy["emulator"]
        if emulator == "housekeeping" and not self.reserved:
            raise InputError("%s: emulator housekeeping pins emulator threads on policy.reserved_cpus, which is empty; "
                             "set reserved_cpus or use emulator isolate" % record.label)
        tenant["emulator"] = emulator
        # spread: on one node when one holds it, else on as few nodes as can, one guest cell each
        tenant["numa"] = tenant.get("numa") or self.policy["numa"]
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
