# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for placing tenants: ``gpuvirt.tenancy.plan_tenants`` (the placement planner), and
``tenant_domains`` / ``tenant_removals``, which turn a plan into the arguments of
``gpuvirt.tenancy.tenant_domain``, built once per tenant (the tenant_vms role loops over them)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import PlacementInputError, plan_tenants

__metaclass__ = type


def _plan_tenants(topology, tenants, policy=None):
    try:
        return plan_tenants(topology, tenants, policy or {})
    except PlacementInputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.plan_tenants: %s" % exc)


def _by_name(tenants):
    """Tenant name -> the tenant as the inventory gives it (the first one of a name)."""
    found = {}
    for tenant in tenants or []:
        found.setdefault(tenant.get("name"), tenant)
    return found


def _merged(base, override):
    """``override`` on top of ``base``, dicts merged key by key (Ansible's recursive combine)."""
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _tenant_domains(plan, tenants, settings):
    """The ``tenant_domain`` arguments (less ``uri`` and ``live``) of each placed tenant of
    ``plan``, in the plan's order: its size, devices and QoS (its priority class's, under its own
    ``qos``), its pins and NUMA node, and ``state`` running or defined. ``settings``: the role's
    ``domain_type``, ``machine``, ``memory_mode`` and ``priorities``. Empty ``mac``, ``vlan`` and
    ``machine`` are left out (the module's own default)."""
    specs = _by_name(tenants)
    priorities = settings.get("priorities") or {}
    out = []
    for name, placement in plan["placements"].items():
        spec = specs.get(name, {})
        priority = placement["priority"]
        if priority not in priorities:
            raise AnsibleFilterError("gpuvirt.tenancy.tenant_domains: tenant %s has priority %s, which the priorities (%s) "
                                     "do not define" % (name, priority, ", ".join(sorted(priorities)) or "none"))
        args = {
            "name": name,
            "state": "running" if spec.get("state", "defined") == "running" else "defined",
            "domain_type": spec.get("domain_type", settings.get("domain_type")),
            "vcpus": placement["vcpus"],
            "max_vcpus": placement["max_vcpus"],
            "memory_mb": placement["memory_mb"],
            "hugepage_size": placement["hugepages"]["size"] if placement["hugepages"] else "none",
            "gpus": placement["gpus"],
            "vfs": placement["vfs"],
            "network_vfs": placement["network_vfs"],
            "disks": spec.get("disks", []),
            "qos": _merged(priorities[priority], spec.get("qos") or {}),
            "vcpu_pins": placement["vcpu_pins"],
            "emulator_cpus": ",".join(str(cpu) for cpu in placement["emulator_cpus"]),
            "memory_mode": settings.get("memory_mode"),
            "nodeset": str(placement["numa_node"]),
        }
        for key, value in (("mac", placement.get("mac")), ("vlan", placement.get("vlan")), ("machine", settings.get("machine"))):
            if value:
                args[key] = value
        out.append(args)
    return out


def _tenant_removals(plan, tenants, settings):
    """The ``tenant_domain`` arguments (less ``uri``) that remove each tenant the plan released:
    its own ``shutdown_timeout`` and ``force_off``, else those of ``settings``."""
    specs = _by_name(tenants)
    out = []
    for name in plan["released"]:
        spec = specs.get(name, {})
        out.append({"name": name, "state": "absent",
                    "shutdown_timeout": spec.get("shutdown_timeout", settings.get("shutdown_timeout")),
                    "force_off": spec.get("force_off", settings.get("force_off"))})
    return out


class FilterModule:
    """Placement planner filters."""

    def filters(self):
        return {"plan_tenants": _plan_tenants, "tenant_domains": _tenant_domains, "tenant_removals": _tenant_removals}
