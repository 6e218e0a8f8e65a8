# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants stage's plan and what follows from it, pure functions of their inputs shared by the
filters on the controller (``plan_tenants`` for the preflight and fleet reports) and by
``tenant_domain``'s ``tenants`` on the host (tenant_stage), so that both plan alike:

- :func:`plan`: the placement planner (``placement.plan_tenants``) with what the domains that
  are not listed tenants hold taken out first (:func:`reserve`);
- :func:`tenant_removals`, :func:`tenant_domains`, :func:`guest_domains`: the plan as the
  ``tenant_domain`` entries that remove the released tenants and define the placed ones;
- :func:`plan_vf_settings`: the MAC, VLAN, spoof check and trust of each placed tenant's network
  VFs, per PF, as ``sriov_vfs``'s ``pfs``.

Bad input is an InputError (common); the filters turn it into a filter error."""

from __future__ import absolute_import, division, print_function

from collections.abc import Mapping

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import check_firmware
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records, thaw
# what every tenant's network VF gets on its PF besides its MAC and VLAN (the one definition)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning.pcie_switches import switch_groups
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.tenant_vfs import ISOLATION
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import tenant_network_vfs

__metaclass__ = type

# What a tenant's guest gets installed where it is missing (cloud-init, at its first boot).


def plan(topology, tenants, policy=None, foreign=None):
    """The plan (``placement.plan_tenants``) with ``foreign`` (the domains that are not listed
    tenants, tenant_domain_info's ``foreign``) kept out of it (:func:`reserve`): their tenants
    naming a GPU such a domain holds are unplaced, and ``foreign`` is the report of each."""
    topology, policy, report, refused = reserve(topology, tenants, policy or {}, foreign or {})
    listed = [t for t in tenants if not (isinstance(t, Mapping) and t.get("name") in refused)] if refused else tenants
    found = plan_tenants(topology, listed, policy)
    found["unplaced"].update(refused)
    found["foreign"] = report
    return found


def reserve(topology, tenants, policy, foreign):
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
        cells = [cell for cell in held.get("cells") or [] if isinstance(cell, dict) and cell.get("node") in node_ids]
        if cells and hugepages and hugepages.get("size") in SIZES_KB:
            # guest cells, each bound to its host node: each cell's pages from its own node's pool
            for cell in cells:
                key = (cell["node"], hugepages["size"])
                pages[key] = pages.get(key, 0) + -(-int(cell.get("memory_kib") or 0) // SIZES_KB[hugepages["size"]])
            entry["hugepages"] = {"size": hugepages["size"], "count": int(hugepages.get("count") or 0),
                                  "nodes": [cell["node"] for cell in cells]}
        elif cells:
            for cell in cells:
                memory[cell["node"]] = memory.get(cell["node"], 0) + int(cell.get("memory_kib") or 0) // 1024
        elif hugepages and hugepages.get("size") and hugepages.get("count"):
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
    host_devices = host_devices_of(policy.get("host_devices"))
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
        if not stays(tenant) or not isinstance(tenant.get("gpus"), (list, tuple)):
            continue
        taken = [a for a in tenant["gpus"] if str(a).lower() in held_devices]
        if taken:
            refused[tenant.get("name")] = ("GPUs %s are held by libvirt domain(s) %s, which gpuvirt_tenants does not list; remove "
                                           "them there or give the tenant other GPUs"
                                           % (", ".join(taken), ", ".join(sorted(set(held_devices[str(a).lower()] for a in taken)))))
    return topology, policy, report, refused


def host_devices_of(value):
    """A copy of policy.host_devices as a dict address -> reason (a list names devices without
    one); None for any other value, which the planner refuses with its own message."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)) or not value:
        return dict((address, None) for address in value or [])
    return None


def by_name(tenants):
    """Tenant name -> the tenant as the inventory gives it (the first one of a name)."""
    found = {}
    for tenant in tenants or []:
        if isinstance(tenant, Mapping):
            found.setdefault(tenant.get("name"), tenant)
    return found


def merged(base, override):
    """``override`` on top of ``base``, dicts merged key by key (Ansible's recursive combine)."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _check_vf_addresses(topology, tenant, vfs):
    """projection.check_vf_addresses where a VF of ``vfs`` is a planned one: only a preview's host
    model (the projection) has planned VFs, so a plan on the host as it is does not import the
    projection's code (each module call compiles what it imports)."""
    pci = topology.get("pci_devices") or {}
    if not any((pci.get(vf) or {}).get("planned") for vf in vfs or []):
        return
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import check_vf_addresses
    check_vf_addresses(topology, tenant, vfs)


def tenant_domains(found, tenants, settings):
    """The ``tenant_domain`` arguments (less ``uri``) of each placed tenant of ``plan``, in the
    plan's order, as the entries of its ``domains``: its size, devices and QoS (its priority
    class's, under its own ``qos``), its pins and NUMA node, ``state`` running or defined, and its
    own ``autostart`` when given. ``settings``: the role's ``domain_type``, ``machine``,
    ``memory_mode``, ``priorities`` and ``live``. Empty ``mac``, ``vlan``, ``machine``, ``live``
    and ``autostart`` are left out (the module's own default)."""
    # records (tenancy.record) as the stage hands them; a list as the inventory gives it is read into them here
    specs = by_name(tenant_records(tenants, firmware=settings.get("firmware")))
    priorities = settings.get("priorities") or {}
    topology = settings.get("topology")
    out = []
    for name, placement in found["placements"].items():
        spec = specs.get(name, {})
        if topology is not None:
            try:
                _check_vf_addresses(topology, name, placement["vfs"])
            except InputError as exc:
                if settings.get("preview_notes") is None:
                    raise
                # a preview plans on the host as the stages will leave it: VFs whose addresses only the
                # boot stage's firmware change and reboot will give are planned by count, and said
                settings["preview_notes"].append(
                    "tenant %s: planned with %d VF(s) (%s) whose PCI addresses are known only after the boot stage's "
                    "reboot; its domain is defined by the run, not in this preview (%s)"
                    % (name, len(placement["vfs"]), ", ".join(placement["vfs"]), str(exc).split(": ", 1)[-1]))
                continue
        priority = placement["priority"]
        if priority not in priorities:
            raise InputError("tenant %s has priority %s, which the priorities (%s) do not define"
                             % (name, priority, ", ".join(sorted(priorities)) or "none"))
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
            "qos": merged(priorities[priority], spec.get("qos") or {}),
            "vcpu_pins": placement["vcpu_pins"],
            "emulator_cpus": ",".join(str(cpu) for cpu in placement["emulator_cpus"]),
            "memory_mode": settings.get("memory_mode"),
            "nodeset": str(placement["numa_node"]),
        }
        machine = spec.get("machine") or settings.get("machine")
        cells = numa_cells(placement, machine)
        if cells:
            # guest NUMA cells (domain_cells): a spanning tenant's memory from all of its nodes, each cell's from
            # its own; a tenant on one node with GPUs or VFs gets one cell, so that its devices carry its node
            args["nodeset"] = ",".join(str(cell["node"]) for cell in cells)
            args["numa_cells"] = cells
        # the record's: the tenant's own, else the stage's, else efi
        args["firmware"] = spec.get("firmware") or check_firmware(settings.get("firmware"))
        if topology is not None and "q35" in (machine or ""):
            # the GPUs and VFs under one host switch under one emulated switch (pcie_switches)
            groups = switch_groups(topology, placement["gpus"], placement["vfs"], placement.get("vf_pfs"))
            if groups:
                args["pcie_switches"] = [group["devices"] for group in groups]
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


def numa_cells(placement, machine=None):
    """A placement's guest NUMA cells as ``tenant_domain``'s ``numa_cells``: per cell its host node,
    vCPUs (the last cell also takes the vCPUs above the current count, up to ``max_vcpus``), memory
    and devices; a companion function (a GPU's audio) in the cell of the device whose slot it
    shares, else in the first cell with devices. A spanning placement has its own cells; a
    placement on one node that has GPUs or VFs, on a q35 ``machine`` (the expander's), is one cell
    on that node holding all of it (its memory in whole hugepages, as the domain's), so that its
    devices sit on an expander of that guest node; any other placement has none ([])."""
    cells = placement.get("cells") or []
    if not cells:
        if not (placement["gpus"] or placement["vfs"]) or "q35" not in (machine or ""):
            return []
        page_kib = SIZES_KB.get(placement["hugepages"]["size"], 1024) if placement.get("hugepages") else 1024
        memory_kib = -(-placement["memory_mb"] * 1024 // page_kib) * page_kib
        cells = [{"node": placement["numa_node"], "vcpus": list(range(placement["vcpus"])), "memory_kib": memory_kib,
                  "gpus": placement["gpus"], "vfs": placement["vfs"]}]
    out = []
    for cell in cells:
        vcpus = list(cell["vcpus"])
        if cell is cells[-1]:
            vcpus += list(range(placement["vcpus"], placement["max_vcpus"]))
        out.append({"node": cell["node"], "vcpus": format_cpulist(vcpus), "memory_kib": cell["memory_kib"],
                    "devices": list(cell["gpus"]) + list(cell["vfs"])})
    for companion in placement.get("companions") or []:
        slot = companion.rsplit(".", 1)[0]
        home = next((entry for entry in out if any(address.rsplit(".", 1)[0] == slot for address in entry["devices"])), None)
        home = home or next((entry for entry in out if entry["devices"]), out[0])
        home["devices"].append(companion)
    return out


def tenant_removals(found, tenants, settings):
    """The ``tenant_domain`` arguments (less ``uri``) that remove each tenant the plan released:
    its own ``shutdown_timeout`` and ``force_off``, else those of ``settings``."""
    specs = by_name(tenants)
    out = []
    for name in found["released"]:
        spec = specs.get(name, {})
        out.append({"name": name, "state": "absent",
                    "shutdown_timeout": spec.get("shutdown_timeout", settings.get("shutdown_timeout")),
                    "force_off": spec.get("force_off", settings.get("force_off"))})
    return out


def _dict(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("%s must be a dict, got %s" % (what, type(value).__name__))
    return value


def _set(values):
    """The entries that are set (ansible-core 2.16 templates a null left in an option as '')."""
    return dict((k, v) for k, v in values.items() if v is not None and v != "" and v != [])


def guest_domains(domains, tenants, access=None, images=True):
    """``tenant_domain`` entries (:func:`tenant_domains` or :func:`tenant_removals`) with each
    tenant's guest options: its ``image``, a ``cloud_init`` (the access's user and SSH keys, the
    guest stage's packages and the tenant's, its ``guest.rdma_address``), a ``management`` NIC
    (the access's network or bridge, the tenant's ``guest.address``) and its ``data_nic``; ``guest_dir`` from the
    access, for removals too. A tenant without ``image`` or ``guest.address`` gets nothing of that
    part. ``images`` false (a preview, whose root is a capture without the images) leaves the image
    and seed out and keeps the management NIC."""
    if not isinstance(domains, list):
        raise InputError("expected the tenant_domain entries (a list), got %s" % type(domains).__name__)
    if not isinstance(tenants, (list, tuple)):
        raise InputError("expected the tenant list (gpuvirt_tenants), got %s" % type(tenants).__name__)
    # the records (tenancy.record), as the stage hands them; a list as the inventory gives it is read into them here
    by_tenant = dict((record.name, record) for record in tenant_records(tenants))
    access = _dict(access, "the guest access (gpuvirt_guest_access)")
    management = _dict(access.get("management"), "gpuvirt_guest_access.management")
    out = []
    for entry in domains:
        entry = dict(entry)
        tenant = by_tenant.get(entry.get("name"))
        if access.get("guest_dir"):
            entry["guest_dir"] = access["guest_dir"]
        if entry.get("state") == "absent" or tenant is None:
            out.append(entry)
            continue
        guest = thaw(tenant.guest or {})
        if tenant.image and images:
            entry["image"] = _set(thaw(tenant.image))
            # only what is asked for: each package in the seed costs the first boot an apt run (package_update),
            # which fails on a tenant without an uplink; the guest stage installs the RDMA userspace it finds missing
            packages = list(access.get("packages") or []) + list(guest.get("packages") or [])
            entry["cloud_init"] = _set({"user": access.get("user"), "ssh_authorized_keys": list(access.get("ssh_authorized_keys") or []),
                                        "packages": packages, "rdma_address": guest.get("rdma_address"),
                                        "hostname": guest.get("hostname")})
        if management and guest.get("address"):
            entry["management"] = _set(dict(management, address=guest["address"], mac=guest.get("management_mac")))
        if tenant.data_nic:
            entry["data_nic"] = _set(thaw(tenant.data_nic))
        out.append(entry)
    return out


def plan_vf_settings(found, tenants, topology):
    """``[{pf, vfs: [{address, mac, vlan, spoofchk, trust}]}]``: the settings of the network VFs
    (an Ethernet VF of a PF with a netdev) of each placed tenant of the plan ``found``, one entry
    per PF, PFs in address order. A tenant without a ``vlan`` gets VLAN 0 (none): a VF given back
    by an earlier tenant keeps no VLAN of it."""
    if not isinstance(found, dict) or "placements" not in found:
        raise InputError("expected a plan (gpuvirt.tenancy.plan_tenants), got %s" % type(found).__name__)
    specs = by_name(tenants)
    per_pf = {}
    for name, placement in sorted(found["placements"].items()):
        spec = specs.get(name, {})
        for vf in tenant_network_vfs(topology, name, placement["vfs"], placement.get("vf_pfs"),
                                     mac=spec.get("mac"), vlan=spec.get("vlan")):
            settings = {"address": vf["address"], "mac": vf["mac"], "vlan": vf["vlan"] or 0}
            settings.update(ISOLATION)
            per_pf.setdefault(vf["pf"], []).append(settings)
    return [{"pf": pf, "vfs": sorted(vfs, key=lambda vf: vf["address"])} for pf, vfs in sorted(per_pf.items())]
