# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for placing tenants: ``gpuvirt.tenancy.plan_tenants`` (the placement planner), and
``tenant_domains`` / ``tenant_removals``, which turn a plan into the arguments of
``gpuvirt.tenancy.tenant_domain``, one entry per tenant (the tenant_vms role passes them as ``domains`` of one call)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.hugepage_sizes import size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import PlacementInputError, Planner, plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_request import check_firmware
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vf_mac import tenant_network_vfs

__metaclass__ = type

# Where a tenant backed by 1G pages gets its memory: a hugetlbfs mount of 1G pages, which
# libvirt finds among the host's mounts when it starts (2M pages: systemd's /dev/hugepages).
HUGETLBFS_1G = "/dev/hugepages1G"


def _plan_tenants(topology, tenants, policy=None, foreign=None):
    """The plan; ``foreign``: the domains that are not listed tenants (tenant_domain_info's
    ``foreign``), whose devices, CPUs and hugepages are kept out of it (:func:`_reserve`)."""
    try:
        topology, policy, report, refused = _reserve(topology, tenants, policy or {}, foreign or {})
        listed = [t for t in tenants if not (isinstance(t, dict) and t.get("name") in refused)] if refused else tenants
        plan = plan_tenants(topology, listed, policy)
    except (PlacementInputError, InputError) as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.plan_tenants: %s" % exc)
    plan["unplaced"].update(refused)
    plan["foreign"] = report
    return plan


def _reserve(topology, tenants, policy, foreign):
    """The host model and policy with what the ``foreign`` domains hold taken out, before the
    planner sees them: their GPUs out of the GPU pool (``policy.gpus``), their VFs out of their
    PFs' ``virtfns``, their pinned CPUs offline (with their SMT siblings under ``smt:
    whole_cores``; reserved CPUs stay as they are, never given anyway), their hugepages out of
    their node's pool (out of every node's when the domain has no NUMA node: its pages may come
    from any), and their plain memory out of their node's. -> (topology, policy, report per
    foreign domain, {tenant: reason} for listed tenants naming a GPU a foreign domain holds).
    The inputs are not modified."""
    if not foreign:
        return topology, policy, {}, {}
    if not isinstance(foreign, dict):
        raise InputError("foreign: expected a dict domain name -> what it holds (tenant_domain_info's foreign)")
    policy = dict(policy)
    topology = dict(topology)
    pci = dict(topology.get("pci_devices") or {})
    gpu_set = set(g.get("address") for g in topology.get("gpus") or [])
    vf_pf = dict((vf, pf) for pf, dev in pci.items() for vf in (dev or {}).get("virtfns") or [])
    cpu_entries = topology.get("cpus") or []
    bound = max([int(c["id"]) for c in cpu_entries] + [int(cpu) for n in topology.get("numa_nodes") or [] for cpu in n.get("cpus") or []]
                + [0]) + 1
    siblings = dict((int(c["id"]), [int(x) for x in c.get("siblings") or [c["id"]]]) for c in cpu_entries)
    reserved = set(parse_cpulist(policy.get("reserved_cpus"), "policy.reserved_cpus", bound))
    whole_cores = policy.get("smt", "whole_cores") == "whole_cores"
    node_ids = [int(n["id"]) for n in topology.get("numa_nodes") or []]
    report, held_devices, blocked = {}, {}, set()
    pages, memory = {}, {}
    for name, held in sorted(foreign.items()):
        held = held if isinstance(held, dict) else {}
        devices = [str(a).lower() for a in held.get("hostdevs") or []]
        for address in devices:
            held_devices.setdefault(address, name)
        cpus = set(parse_cpulist(held.get("cpus") or [], "foreign %s cpus" % name, bound)) - reserved
        if whole_cores:
            cpus = set(s for cpu in cpus for s in siblings.get(cpu, [cpu])) - reserved
        blocked.update(cpus)
        node = held.get("numa_node")
        node = node if isinstance(node, int) and node in node_ids else None
        notes = []
        hugepages = held.get("hugepages") if isinstance(held.get("hugepages"), dict) else None
        entry = {"active": bool(held.get("active")), "gpus": [a for a in devices if a in gpu_set],
                 "vfs": [a for a in devices if a in vf_pf], "other_devices": [a for a in devices if a not in gpu_set and a not in vf_pf],
                 "cpus": format_cpulist(cpus), "numa_node": node, "hugepages": None, "memory_mb": held.get("memory_mb")}
        if not held.get("cpus"):
            notes.append("no CPU pins: its vCPUs may run on any host CPU; pin it (or list it as a tenant) to keep them apart")
        if hugepages and hugepages.get("size") and hugepages.get("count"):
            nodes = [node] if node is not None else node_ids
            for target in nodes:
                key = (target, hugepages["size"])
                pages[key] = pages.get(key, 0) + int(hugepages["count"])
            entry["hugepages"] = {"size": hugepages["size"], "count": int(hugepages["count"]), "nodes": nodes}
            if node is None:
                notes.append("hugepages without a NUMA node: kept out of every node's pool")
        elif node is not None and held.get("memory_mb"):
            memory[node] = memory.get(node, 0) + int(held["memory_mb"])
        entry["notes"] = notes
        report[name] = entry
    # a function a foreign domain holds keeps the GPUs and VFs of its IOMMU group out of the plan
    host_devices = _host_devices_of(policy.get("host_devices"))
    if host_devices is not None:
        for address, name in sorted(held_devices.items()):
            host_devices.setdefault(address, "held by libvirt domain %s, which gpuvirt_tenants does not list" % name)
        policy["host_devices"] = host_devices
    gpus_held = [a for a in held_devices if a in gpu_set]
    if gpus_held:
        pool = policy.get("gpus")
        pool = list(pool) if pool is not None else [g.get("address") for g in topology.get("gpus") or []]
        policy["gpus"] = [a for a in pool if a not in held_devices]
    emptied = []
    for pf in sorted(set(vf_pf[a] for a in held_devices if a in vf_pf)):
        pci[pf] = dict(pci[pf], virtfns=[vf for vf in pci[pf].get("virtfns") or [] if vf not in held_devices])
        if not pci[pf]["virtfns"]:
            emptied.append(pf)
    if policy.get("vf_pfs") is not None and emptied:
        policy["vf_pfs"] = [pf for pf in policy["vf_pfs"] if pf not in emptied]
    topology["pci_devices"] = pci
    if blocked:
        topology["cpus"] = [dict(c, online=False) if int(c["id"]) in blocked else c for c in cpu_entries]
    nodes = []
    for node in topology.get("numa_nodes") or []:
        node_id = int(node["id"])
        node = dict(node, cpus=[cpu for cpu in node.get("cpus") or [] if int(cpu) not in blocked])
        if node_id in memory:
            node["memory_mb"] = max(0, int(node.get("memory_mb") or 0) - memory[node_id])
        pools = {}
        for key, value in (node.get("hugepages") or {}).items():
            try:
                size = size_name(key, allow_none=True)
            except InputError:
                size = None
            taken = pages.get((node_id, size), 0) if size else 0
            pools[key] = dict(value or {}, total=max(0, int((value or {}).get("total") or 0) - taken)) if taken else value
        node["hugepages"] = pools
        nodes.append(node)
    topology["numa_nodes"] = nodes
    refused = {}
    for tenant in tenants or []:
        if not isinstance(tenant, dict) or tenant.get("state") == "absent" or not isinstance(tenant.get("gpus"), (list, tuple)):
            continue
        taken = [a for a in tenant["gpus"] if str(a).lower() in held_devices]
        if taken:
            refused[tenant.get("name")] = ("GPUs %s are held by libvirt domain(s) %s, which gpuvirt_tenants does not list; remove "
                                           "them there or give the tenant other GPUs"
                                           % (", ".join(taken), ", ".join(sorted(set(held_devices[str(a).lower()] for a in taken)))))
    return topology, policy, report, refused


def _host_devices_of(value):
    """A copy of policy.host_devices as a dict address -> reason (a list names devices without
    one); None for any other value, which the planner refuses with its own message."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)) or not value:
        return dict((address, None) for address in value or [])
    return None


def _group_devices(topology, policy=None):
    """The functions that go along with the tenants' GPUs and VFs to their tenants (they share
    their IOMMU groups), to bind to vfio-pci with them, and the pool devices their groups keep
    out of the plan: ``{companions: [addresses], left_out: {address: reason}, shared: {address:
    [the pool devices of its group]}}``."""
    try:
        report = Planner(topology, policy or {}).plan([])["groups"]
    except (PlacementInputError, InputError) as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_group_devices: %s" % exc)
    return {"companions": sorted(set(a for along in report["companions"].values() for a in along)),
            "left_out": report["left_out"], "shared": report["shared"]}


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
    """The ``tenant_domain`` arguments (less ``uri``) of each placed tenant of ``plan``, in the
    plan's order, as the entries of its ``domains``: its size, devices and QoS (its priority
    class's, under its own ``qos``), its pins and NUMA node, ``state`` running or defined, and its
    own ``autostart`` when given. ``settings``: the role's ``domain_type``, ``machine``,
    ``memory_mode``, ``priorities`` and ``live``. Empty ``mac``, ``vlan``, ``machine``, ``live``
    and ``autostart`` are left out (the module's own default)."""
    specs = _by_name(tenants)
    priorities = settings.get("priorities") or {}
    topology = settings.get("topology")
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
            # the functions that share a GPU's or VF's IOMMU group go to the domain with it
            "gpus": placement["gpus"] + [a for a in placement.get("companions") or [] if a not in placement["gpus"]],
            "vfs": placement["vfs"],
            "network_vfs": placement["network_vfs"],
            "disks": spec.get("disks", []),
            "qos": _merged(priorities[priority], spec.get("qos") or {}),
            "vcpu_pins": placement["vcpu_pins"],
            "emulator_cpus": ",".join(str(cpu) for cpu in placement["emulator_cpus"]),
            "memory_mode": settings.get("memory_mode"),
            "nodeset": str(placement["numa_node"]),
        }
        try:
            args["firmware"] = check_firmware(spec.get("firmware") or settings.get("firmware"))
        except InputError as exc:
            raise AnsibleFilterError("gpuvirt.tenancy.tenant_domains: tenant %s: %s" % (name, exc))
        if topology is not None:
            # each network VF with its own MAC (given or derived) and the tenant's VLAN, as the
            # VF settings on the PF (filter plan_vf_settings) have them
            args["network_vfs"] = [dict((k, v) for k, v in vf.items() if k != "pf" and v is not None)
                                   for vf in tenant_network_vfs(topology, name, placement["vfs"], placement.get("vf_pfs"),
                                                                mac=placement.get("mac"), vlan=placement.get("vlan"))]
        for key, value in (("mac", placement.get("mac")), ("vlan", placement.get("vlan")),
                           ("machine", spec.get("machine") or settings.get("machine"))):
            if value and not (topology is not None and key == "mac"):
                args[key] = value
        for key, value in (("live", settings.get("live")), ("autostart", spec.get("autostart"))):
            if value is not None:
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


def _tenant_host_needs(tenants, policy=None, firmware="efi"):
    """What the present tenants need from the libvirt host: ``uefi`` (a tenant whose firmware,
    its own or ``firmware``, is efi: OVMF installed) and ``hugetlbfs_mounts`` (``[{size, path}]``:
    a 1G hugetlbfs mount when a tenant, or the policy's default, backs its memory with 1G pages)."""
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_host_needs: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    default_size = (policy or {}).get("hugepage_size", "2M")
    uefi = False
    sizes = set()
    for tenant in tenants:
        if not isinstance(tenant, dict) or tenant.get("state") == "absent":
            continue
        uefi = uefi or (tenant.get("firmware") or firmware or "efi") == "efi"
        try:
            size = size_name(tenant.get("hugepage_size", default_size), allow_none=True)
        except InputError as exc:
            raise AnsibleFilterError("gpuvirt.tenancy.tenant_host_needs: tenant %s: %s" % (tenant.get("name"), exc))
        if size:
            sizes.add(size)
    mounts = [{"size": "1G", "path": HUGETLBFS_1G}] if "1G" in sizes else []
    return {"uefi": uefi, "hugetlbfs_mounts": mounts}


def _libvirt_service_query(name, uefi, packages=None):
    """The libvirt service question of tenant_domain_info's ``service`` (the gate's read and
    libvirt_host's own ask it alike, and libvirt_host compares the two): ``packages`` only when
    set, since ansible-core 2.16 templates a null left in it as an empty string."""
    if not isinstance(name, str) or not name:
        raise AnsibleFilterError("gpuvirt.tenancy.libvirt_service_query: expected the service name (libvirt_host_service), got %r" % (name,))
    try:
        query = {"name": name, "uefi": boolean(uefi, strict=True)}
    except TypeError:
        raise AnsibleFilterError("gpuvirt.tenancy.libvirt_service_query: uefi (libvirt_host_uefi) is %r, not true or false" % (uefi,))
    if packages is not None:
        query["packages"] = packages
    return query


class FilterModule:
    """Placement planner filters."""

    def filters(self):
        return {"plan_tenants": _plan_tenants, "tenant_domains": _tenant_domains, "tenant_removals": _tenant_removals,
                "tenant_host_needs": _tenant_host_needs, "tenant_group_devices": _group_devices,
                "libvirt_service_query": _libvirt_service_query}
