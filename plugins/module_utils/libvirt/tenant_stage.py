# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``tenant_domain`` with ``tenants``: the tenants stage in one call, decided on the host from
the stage's desired state as the inventory gives it.

In order, over one libvirt connection: the host model (``host.topology``; in a preview, as the
earlier stages will leave it: ``projection.project`` and ``projection.finish``), what the listed
tenants' domains hold and what every other domain holds (foreign: never reused nor removed),
the plan (``tenant_plan.plan``, the code the ``plan_tenants`` filter runs on the controller),
and from it the entries of one ``tenant_domain`` call: the removals of the tenants the plan
released, the VF settings (the released VFs cleared, the placed tenants' network VFs given
their MAC and VLAN, spoof checking on, trust off) and the placed tenants' definitions. Every
entry is checked before anything changes; the removals are acted on first, then the VFs, then
the definitions. With ``fabric_manager`` (an HGX board with NVSwitches), the tenants' Fabric
Manager partitions are decided with them (tenant_fabric: ``fmpm -l`` read before any change): a
removed tenant's deactivated after its removal, a starting tenant's activated between its
definition and its start. The result is the plan's (placements, notes, foreign, unplaced) with what
was done."""

from __future__ import absolute_import, division, print_function

import ipaddress

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import domain_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_domain_call
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import pci_links, tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.network import NETWORK_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.holdings import domain_holdings
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import check_domain_type, check_machine
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import check_tenant_list, tenant_records

__metaclass__ = type

# The role's defaults where the module has none of its own for the stage.
DEFAULT_PRIORITIES = {"online": {"cpu_shares": 1024},
                      "batch": {"cpu_shares": 256, "cpu_period": 100000, "cpu_quota": 50000}}


def check_dict(value, option):
    if value is not None and not isinstance(value, dict):
        raise InputError("%s: expected a dict, got %s" % (option, type(value).__name__))
    return dict(value or {})


def held_addresses(conn, host, names):
    """{domain: {"addresses": [...]}}: the guest addresses the seeds of the domains that are not
    listed tenants give (guest_image.seed_addresses)."""
    others = [(name, files) for name, (_devices, _macs, files) in domain_holdings(conn).items() if name not in names]
    if not any(files for _name, files in others):
        # no file, no seed: the seeds' reader (guest_image) is not imported
        return dict((name, {"addresses": []}) for name, _files in others)
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import seed_addresses
    return dict((name, {"addresses": seed_addresses(host, files)}) for name, files in others)


def host_address(params):
    """The host's address on the management network (the option, else the guest access's), or None."""
    access = params.get("guest_access") if isinstance(params.get("guest_access"), dict) else {}
    network = params.get("management_network") or access.get("management_network")
    address = network.get("address") if isinstance(network, dict) else None
    try:
        return str(ipaddress.ip_interface(u"%s" % address)) if address else None
    except ValueError:
        # not an address: the management network's own check names it
        return None


def stage_topology(params, host):
    """The host model the plan is made on -> (model, preview notes)."""
    try:
        topology = host.topology(params.get("gpu_ids") or (), params.get("nic_ids") or ())
    except ValueError as exc:
        raise InputError("gpu_ids/nic_ids: %s" % exc)
    preview = params.get("preview")
    if preview is None:
        return topology, []
    # only a preview needs the projection (the preflight's code)
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import project
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import finish
    try:
        projected = project(topology, preview["sriov_pfs"], preview["hugepages"])
    except InputError as exc:
        raise InputError("preview: %s" % exc)
    # the VFs to come are named from their PF's offset and stride, as the SR-IOV stage names them
    return finish(topology, projected, preview["gpus"])


def vf_options(found, tenants, topology, persist):
    """The ``sriov_vfs`` options of the call -> (options or None, the placed tenants' settings):
    per PF with a netdev, the VFs the removed tenants gave back cleared (unless a placed tenant
    takes them) and the placed tenants' network VFs set."""
    settings = tenant_plan.plan_vf_settings(found, tenants, topology)
    pci = topology.get("pci_devices") or {}
    per_pf = dict((entry["pf"], list(entry["vfs"])) for entry in settings)
    taken = set(vf["address"] for entry in settings for vf in entry["vfs"])
    for pf, resets in sorted((found.get("vf_resets") or {}).items()):
        if not (pci.get(pf) or {}).get("netdevs"):
            continue
        cleared = [dict(reset) for reset in resets if reset["address"] not in taken]
        if cleared:
            per_pf[pf] = cleared + per_pf.get(pf, [])
    if not per_pf:
        return None, settings
    return {"pfs": [{"pf": pf, "vfs": vfs, "persist": persist} for pf, vfs in sorted(per_pf.items())]}, settings


def management_network(params, access):
    """The management network: the option, else the guest access's ``management_network``."""
    if params.get("management_network"):
        return params["management_network"]
    wanted = access.get("management_network")
    if not wanted:
        return None
    return nested_params("guest_access.management_network", "gpuvirt.tenancy.tenant_domain",
                         {"argument_spec": NETWORK_OPTIONS}, wanted)


def domain_entries(found, tenants, params, topology, preview, preview_notes=None):
    """-> (the removals' entries, the placed tenants' entries), as ``domains`` entries. In a
    preview, ``preview_notes`` takes what is planned but not defined (VFs whose addresses the
    boot stage's reboot gives)."""
    access = check_dict(params.get("guest_access"), "guest_access")
    # the stage's own settings, the default of every tenant that gives none (a tenant's own: its record)
    check_machine(params.get("machine"), "machine")
    check_domain_type(params["domain_type"], "domain_type")
    priorities = params.get("priorities")
    settings = {"domain_type": params["domain_type"], "machine": params.get("machine"), "memory_mode": params["memory_mode"],
                "priorities": DEFAULT_PRIORITIES if priorities is None else check_dict(priorities, "priorities"),
                "firmware": params["firmware"], "topology": topology, "live": params["live"],
                "preview_notes": preview_notes if preview else None}
    removals = tenant_plan.guest_domains(
        tenant_plan.tenant_removals(found, tenants, {"shutdown_timeout": params["shutdown_timeout"],
                                                     "force_off": params["force_off"]}), tenants, access)
    placed = tenant_plan.guest_domains(tenant_plan.tenant_domains(found, tenants, settings), tenants, access, not preview)
    return removals, placed, access


def tenant_stage(params, host, run):
    """tenant_domain with ``tenants`` (see the module docstring)."""
    # the tenants read once into records (tenancy.record); the planner and the entries take them
    tenants = tenant_records(params["tenants"], firmware=params["firmware"])
    policy = check_dict(params.get("policy"), "policy")
    if "existing" in policy:
        raise InputError("policy.existing: the domains are read on the host; leave it out")
    preview = params.get("preview") is not None
    topology, preview_notes = stage_topology(params, host)
    # the Fabric Manager service VM: planned as a tenant without GPUs or VFs, its NVSwitches added to its entry
    # (tenancy/fabric_vm only with fabric_vm: a call without a service VM does not import it)
    fabric = service_vm = None
    if params.get("fabric_vm"):
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy import fabric_vm as fabric
        service_vm = fabric.fabric_vm(params["fabric_vm"], topology, params["tenants"])
    tenants = fabric.with_fabric_vm(tenants, service_vm, params["firmware"]) if fabric else list(tenants)
    names = [tenant["name"] for tenant in tenants]
    with host.libvirt(params["uri"]) as conn:
        existing = domain_info.domain_assignments(conn, names)
        if fabric:
            existing = fabric.fabric_existing(existing, service_vm)
        foreign = domain_info.foreign_domains(conn, names)
        # across calls: no tenant address another domain's seed gives, nor the host's on the management network
        check_tenant_list(tenants, held_addresses(conn, host, names), host_address(params))
        found = tenant_plan.plan(topology, tenants, dict(policy, existing=existing), foreign)
        removals, placed, access = domain_entries(found, tenants, params, topology, preview, preview_notes)
        if fabric:
            placed = fabric.fabric_entries(placed, service_vm)
        # with fabric_manager and a service VM that does not run yet: no Fabric Manager can answer this call, so the
        # tenants whose partitions it must activate are defined and held, never started without them
        held = []
        if params.get("fabric_manager") is not None:
            # the Fabric Manager's part (tenant_fabric, fabric/) only with fabric_manager: a call without it does not import it
            from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_fabric import (
                held_for_service_vm, without_autostart)
            placed = without_autostart(found, placed)
            if not preview:
                placed, held = held_for_service_vm(service_vm, found, placed, conn, run)
        sriov, settings = vf_options(found, tenants, topology, True if params.get("vf_persist") is None else params["vf_persist"])
        # the entries the plan made from the records: not checked again, only what they pass on as the user gave it
        entries = tenant_domain_call.planned_options(removals + placed)
        # a preview reads a captured tree: the PFs' VF settings are not asked there, they are shown as planned
        prepared = tenant_domain_call.prepare_domains(entries, None if preview else sriov, host, run, planned=True)
        network = management_network(params, access)
        # with fabric_manager: the tenants' Fabric Manager partitions, fmpm -l read and every step decided before any change
        partitions = None
        if params.get("fabric_manager") is not None and not held:
            from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_fabric import TenantFabric
            partitions = TenantFabric(params["fabric_manager"], found, placed, removals, conn, host, run, preview)
        result = tenant_domain_call.act_on_domains(conn, prepared, True, network, host, run, first=len(removals),
                                                   fabric=partitions)
    result["plan"] = found
    for key in ("placements", "unplaced", "notes", "foreign"):
        result[key] = found[key]
    result["vf_settings"] = settings
    # per tenant with GPUs and VFs: the host's links of them, for its guest's NCCL topology file (guest_rdma)
    result["pci_links"] = pci_links.plan_links(found, topology)
    if preview:
        # where each guest will see its GPUs and VFs: the preview of the guest stage's NCCL topology file
        result["guest_layouts"] = pci_links.guest_layouts(found, placed, topology)
    result["preview_notes"] = preview_notes
    result["fabric_vm"] = None if service_vm is None else dict((key, service_vm[key]) for key in ("name", "nvswitches", "address"))
    if params.get("fabric_manager") is not None:
        result["fabric_held"] = held
    return result
