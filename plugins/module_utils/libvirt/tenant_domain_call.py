# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``tenant_domain`` module feature: one domain (``name``) or each of ``domains`` in list
order over one connection, every entry checked (sizes, pins, the isolation rules, the VF settings)
before anything changes, then acted on in order; with ``tenants``, the tenants stage on the host
(tenant_stage). Its argument spec is :data:`TENANT_DOMAIN_ARGS`."""

from __future__ import absolute_import, division, print_function

import copy
import os
from collections import OrderedDict

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.validation import check_required_if

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError, labelled
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.device_use import pci_function_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.change import LIBVIRT_OPTIONS, decide_then_act
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.holdings import domain_holdings
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.host_limits import (
    host_model, maxphysaddr_gate, maxphysaddr_note, place_above_ht_hole)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.network import NETWORK_OPTIONS, NetworkPlan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run, nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_one import (
    DomainRequest, TENANT_DOMAIN_FLAGS, TENANT_DOMAIN_OPTIONS, TENANT_DOMAIN_REQUIRED_IF)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.files import check_tenant_files
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric.manager_options import FABRIC_MANAGER_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.tenant_request import (
    Claims, RELAX_OPTION, limits_of_capabilities, limits_of_topology, vf_security)

__metaclass__ = type


def domain_options(entries):
    """Each entry of ``domains`` as the module validates its top-level options (types, choices,
    defaults, the size unless removed); -> [(options, label)]. A bad entry is an InputError that
    names its index, its name and the option; names are unique."""
    validator = ArgumentSpecValidator(dict(TENANT_DOMAIN_OPTIONS, name=dict(type="str", required=True)),
                                      required_if=TENANT_DOMAIN_REQUIRED_IF)
    out, seen = [], {}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = "domains[%d] (%s)" % (index, name) if name else "domains[%d]" % index
        checked = validator.validate(entry)
        if checked.error_messages:
            raise InputError("%s: %s" % (label, "; ".join(checked.error_messages)))
        if name in seen:
            raise InputError("%s: name %s is also domains[%d]; list each domain once" % (label, name, seen[name]))
        seen[name] = index
        out.append((checked.validated_parameters, label))
    return out


# What an entry of the tenants stage passes on as the user gave it (the tenant's disks, QoS,
# image, data NIC, autostart and removal settings; the guest access's cloud-init user and keys,
# management NIC and guest_dir): validated here by the module's argument spec, their one check.
# The rest of a planned entry is the planner's and the tenant records' (tenant_plan), taken as it is.
PASSED_ON = ("image", "cloud_init", "management", "data_nic", "disks", "qos", "autostart", "shutdown_timeout", "force_off",
             "guest_dir")


def planned_options(entries):
    """The tenants stage's entries (tenant_plan: the tenant records as the planner placed them,
    the removals of those it released) -> [(options, label)] as :func:`domain_options` gives them,
    without checking again what the records and the planner made: the module's defaults filled
    in and only what the entry passes on from the user (:data:`PASSED_ON`) validated. A bad one
    is an InputError naming the entry and the option, as :func:`domain_options` names it."""
    validator = ArgumentSpecValidator(dict((key, TENANT_DOMAIN_OPTIONS[key]) for key in PASSED_ON))
    out = []
    for index, entry in enumerate(entries):
        label = "domains[%d] (%s)" % (index, entry["name"])
        checked = validator.validate(dict((key, entry[key]) for key in PASSED_ON if key in entry))
        if checked.error_messages:
            raise InputError("%s: %s" % (label, "; ".join(checked.error_messages)))
        options = dict((key, copy.deepcopy(option.get("default"))) for key, option in TENANT_DOMAIN_OPTIONS.items())
        options.update(entry)
        options.update(checked.validated_parameters)
        out.append((options, label))
    return out


def batch_result(results):
    """The module's result with ``domains``: each domain's result by name (in list order, with its
    ``name``), each flag as the names of the domains where it holds, the reasons and released
    devices of all."""
    result = {"changed": any(r["changed"] for r in results),
              "domains": OrderedDict((r["name"], r) for r in results),
              "restart_reasons": [reason for r in results for reason in r["restart_reasons"]],
              "released_devices": [address for r in results for address in r["released_devices"]]}
    for flag in TENANT_DOMAIN_FLAGS:
        result[flag] = [r["name"] for r in results if r[flag]]
    return result


def host_limits(conn, host, topology=None):
    """What bounds a tenant's size: the host model under ``root`` when that is a captured tree (a
    preview against libvirt's test driver), else libvirt's capabilities of the host it runs."""
    if not host.live and host.fs.isdir("/sys/devices/system/node"):
        limits = limits_of_topology(topology or host.topology())
        if limits["cpus"]:
            return limits
    return limits_of_capabilities(conn.capabilities())


def check_assignments(requests, holdings, topology, check_mode):
    """The isolation rules over every domain of the call, in list order, before any change: a
    device to one domain; an IOMMU group whole to one tenant or to none; a PF and its VFs not
    split; a MAC on one interface (a VF, a management or data NIC); a tenant's files its own
    (:func:`check_files`). Against the other domains (``holdings``, domain_holdings) as each entry
    would find them: a domain the list removes or redefines earlier frees what it held.
    Between entries of the call: an InputError. Against another domain: a StateError (with
    ``held_by``), a warning in check mode (a removal earlier in the run may free it). -> warnings."""
    check_files(requests, holdings)
    claims = Claims(topology)
    for name, (devices, macs, _files) in holdings.items():
        claims.hold(name, devices, macs)
    notes = []
    for request in requests:
        name = request.spec.name
        claims.release(name)
        if not request.present:
            continue
        with labelled(request.label):
            held_by = {}
            for address in request.devices:
                if address in claims.held:
                    held_by.setdefault(claims.held[address], []).append(address)
            macs = dict((address, wanted["mac"]) for address, wanted in request.spec.interfaces.items())
            # the virtio NICs' MACs too: a MAC belongs to one interface on the host, whatever its kind
            nics = (("management NIC", request.spec.management), ("data NIC", request.spec.data_nic))
            macs.update((role, nic["mac"]) for role, nic in nics if nic)
            claims.add(name, request.devices, macs=macs)
            errors, with_others = claims.check(name)
            if errors:
                raise InputError("; ".join(errors))
        messages = []
        if held_by:
            messages.append("%s; a PCI device goes to one domain only. Remove it from the other domain (for a tenant: state "
                            "absent) or give this tenant other devices" % (
                                "; ".join("%s held by domain %s" % (", ".join(a), other) for other, a in sorted(held_by.items()))))
        messages.extend(with_others)
        if not messages:
            continue
        if check_mode:
            notes.extend("%s: %s" % (request.label or name, message) for message in messages)
            continue
        error = StateError("%s: %s" % (request.label or name, "; ".join(messages)))
        error.details = {"held_by": held_by} if held_by else None
        raise error
    return notes


def _tenant_files(request):
    """(the files a tenant's domain writes or owns: its disks and seed; the image its overlay
    reads: the base) of one present request."""
    own = [disk["path"] for disk in request.spec.disks]
    if request.spec.seed_cdrom:
        own.append(request.spec.seed_cdrom)
    guest = request.guest
    base = guest.base["path"] if guest is not None and guest.image is not None and guest.base else None
    return own, base


def check_files(requests, holdings):
    """The contract's rule over files (tenancy/files.check_tenant_files) for the entries of the
    call: what each present one owns and reads, as the call leaves it."""
    present = [(request.spec.name, request.label) + _tenant_files(request) for request in requests if request.present]
    check_tenant_files(present, set(r.spec.name for r in requests), holdings)


def check_removals(requests, holdings, host):
    """A removal never breaks another tenant: the files a removed tenant's guest made (its
    ``made.json``), which the removal deletes, are no disk, seed or base of a tenant the call
    keeps or defines, nor a file any of those reads through (an overlay's backing chain), nor a
    disk of another domain on the host or a file it reads through. StateError before anything
    changes (in check mode too), naming both and the fix."""
    removed = OrderedDict()
    for request in requests:
        if not request.present and request.removal is not None:
            for path in request.removal.files:
                removed[os.path.realpath(host.path(path, "guest_dir"))] = (request, path)
    if not removed:
        return
    # only a removal reads the backing chains (guest_image): a call that removes nothing does not import it
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import backing_chain
    readers = []  # (who, file it reads or writes)
    for request in requests:
        if request.present:
            own, base = _tenant_files(request)
            readers.extend(("tenant %s" % request.spec.name, path) for path in own + ([base] if base else []))
    names = set(r.spec.name for r in requests)
    for domain, (_devices, _macs, files) in holdings.items():
        if domain not in names:
            readers.extend(("domain %s" % domain, path) for path in files)
    for who, path in readers:
        for position, real in enumerate(backing_chain(host, path)):
            if real in removed:
                request, deleted = removed[real]
                uses = "as its file %s" % path if position == 0 else "through its image %s (a backing file of it)" % path
                raise StateError("%sremoving tenant %s would delete %s, which %s reads %s. A removal never breaks another "
                                 "tenant; nothing was changed. Remove %s first (or in the same call), or give it a disk of its "
                                 "own (qemu-img convert makes one without the backing file)"
                                 % (request.label + ": " if request.label else "", request.spec.name, deleted, who, uses, who))


def vf_settings_addresses(options, topology):
    """[(label, VF address, settings)] of the VF settings of ``sriov_vfs`` options (``vfs`` of
    each PF, by index or address, and ``vf_settings``)."""
    pci = topology.get("pci_devices") or {}
    entries = options["pfs"] if options.get("pfs") is not None else [options]
    found = []
    for position, entry in enumerate(entries):
        label = "sriov_vfs: pfs[%d]" % position if options.get("pfs") is not None else "sriov_vfs"
        pf = pci_function_of(topology, entry.get("pf") or "")
        virtfns = (pci.get(pf) or {}).get("virtfns") or []
        for index, vf in enumerate(entry.get("vfs") or []):
            address = vf.get("address")
            if address is None and vf.get("index") is not None and 0 <= vf["index"] < len(virtfns):
                address = virtfns[vf["index"]]
            found.append(("%s.vfs[%d]" % (label, index), str(address or "").lower(), vf))
    for index, vf in enumerate(options.get("vf_settings") or []):
        found.append(("sriov_vfs: vf_settings[%d]" % index, str(vf.get("address") or "").lower(), vf))
    return found


def vf_settings_options(params):
    """``sriov_vfs`` (sriov_vfs's options, for the tenants' VFs) validated as that module does, or None."""
    if params.get("sriov_vfs") is None:
        return None
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov  # only tenant_domain's sriov_vfs needs it
    return nested_params("sriov_vfs", "gpuvirt.tenancy.sriov_vfs", sriov.MODULE_ARGS, params["sriov_vfs"])


def apply_vf_settings(options, host, run):
    """sriov_vfs inside this call (the VFs' MAC, VLAN, spoof check and trust, before any domain
    that holds them is defined or started); -> its result fields."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov  # as in vf_settings_options
    try:
        return sriov.sriov_vfs(options, host, run)
    except InputError as exc:
        error = InputError("sriov_vfs: %s" % exc)
        error.details = getattr(exc, "details", None)
        raise error


def check_vf_security(requests, vf_options, topology):
    """VF settings of ``sriov_vfs`` with spoof checking off or trust on are refused for a VF of
    a domain of this call that does not opt in (``relax_vf_isolation``); sriov_vfs warns of them."""
    owners = dict((address, request.spec.name) for request in requests for address in request.devices)
    relaxed = set(request.spec.name for request in requests if request.present and request.options.get(RELAX_OPTION))
    vf_security(vf_settings_addresses(vf_options, topology), owners, relaxed)


def make_guest_files(requests, host, run):
    """Every tenant's guest files, after every entry is checked and before any VF or domain
    changes: first the downloads of all (a checksum or size that is wrong stops the call before
    any disk is made), then each tenant's disk and seed."""
    guests = [r.guest for r in requests if r.guest is not None]
    for guest in guests:
        run.diff.extend(guest.diff())
    if run.check_mode:
        return
    for kinds in (("fetch", "checksum"), ("overlay", "copy", "seed")):
        for request in requests:
            if request.guest is not None:
                with labelled(request.label):
                    request.guest.apply(host, run, kinds)


def remove_guest_files(request, host, run, result):
    """After a tenant's domain is removed: the files the collection made for its guest."""
    removal = request.removal
    run.diff.extend(removal.diff())
    if removal.changed:
        result["changed"] = True
        if not run.check_mode:
            removal.apply(host, run)
    result["guest_files_removed"] = list(removal.files)


def tenant_domain(params, host, run):
    """The tenant_domain module: one domain (``name``) or each of ``domains`` in list order, over
    one connection; with ``tenants``, the tenants stage decided on the host (tenant_stage: the
    domains read, the plan, then the same steps for the entries the plan gives). Every domain's
    options are checked (size, pins and devices against the host, the isolation rules against each
    other and the other domains) before any domain changes; then, with ``sriov_vfs``, the
    tenants' VFs get their settings; then each domain is decided and acted on in turn, so that a
    removal or move earlier in the list frees what a later domain takes."""
    if params.get("tenants") is not None:
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_stage  # only the tenants stage needs it
        return tenant_stage.tenant_stage(params, host, run)
    batch = params["domains"] is not None
    if batch:
        entries = domain_options(params["domains"])
    else:
        try:
            # as AnsibleModule checks it: an option left out (None) is missing
            check_required_if(TENANT_DOMAIN_REQUIRED_IF, dict((key, value) for key, value in params.items() if value is not None))
        except TypeError as exc:
            raise InputError(str(exc))
        entries = [(params, None)]
    prepared = prepare_domains(entries, params.get("sriov_vfs"), host, run)
    with host.libvirt(params["uri"]) as conn:
        return act_on_domains(conn, prepared, batch, params.get("management_network"), host, run)


class PreparedDomains:
    """The entries of one call checked without libvirt: their requests, the ``sriov_vfs``
    options validated, and the host model their devices are checked against."""

    def __init__(self, requests, vf_options, topology):
        self.requests = requests
        self.vf_options = vf_options
        self.topology = topology


def prepare_domains(entries, sriov_vfs, host, run, planned=False):
    """[(options, label)] (each entry validated as the module's options; ``planned``: the
    tenants stage's, :func:`planned_options`) -> PreparedDomains: each entry's request (spec,
    pins, guest, MMIO window), the VF settings validated as sriov_vfs validates them and checked
    against the tenants' opt-ins; nothing is read of libvirt."""
    requests = [DomainRequest(options, host, label, check_mode=run.check_mode, planned=planned) for options, label in entries]
    vf_options = vf_settings_options({"sriov_vfs": sriov_vfs})
    for request in requests:
        for warning in request.warnings:
            run.warn(warning)
    devices = any(request.devices for request in requests) or vf_options is not None
    topology = host.topology() if devices or not host.live else None
    if vf_options is not None:
        check_vf_security(requests, vf_options, topology)
    return PreparedDomains(requests, vf_options, topology)


def act_on_domains(conn, prepared, batch, network_options, host, run, first=0, fabric=None):
    """The prepared entries checked against libvirt (sizes, pins, the other domains) and then
    acted on in order: guest files, the management network, the VF settings, each domain. With
    ``first``, the first entries (the removals of the tenants stage) are acted on before the VF
    settings, whose VFs they may hold; the VF settings are then checked before any change. With
    ``fabric`` (the tenants stage's tenant_fabric.TenantFabric, decided before this), a tenant's
    partition is activated between its definition and its start, a removed one's deactivated
    after its removal."""
    requests, vf_options, topology = prepared.requests, prepared.vf_options, prepared.topology
    limits = host_limits(conn, host, topology) if any(r.present for r in requests) else None
    for request in requests:
        request.check_size(limits)
    cells = any(r.present and r.spec.cells for r in requests)
    model = host_model(conn, host) if cells or any(r.pins_anything for r in requests) else None
    if cells:
        for request in requests:
            request.check_cells(model)
    present = [request.spec for request in requests if request.present]
    if present:
        supported, versions = maxphysaddr_gate(conn, host, topology)
        for spec in present:
            spec.maxphysaddr = supported
        vendor = (topology or {}).get("cpu_vendor")
        for request in requests:
            if request.present:
                with labelled(request.label):
                    warning = place_above_ht_hole(request.spec, request.options["mmio_window_mb"], vendor)
                if warning:
                    run.warn(warning)
    if batch:
        for request in requests:
            if request.pins_anything:
                request.check_pins(model)
    holdings = domain_holdings(conn)
    for note in check_assignments(requests, holdings, topology, run.check_mode):
        run.warn(note)
    check_removals(requests, holdings, host)
    network = NetworkPlan(conn, network_options) if network_options else None
    if first and vf_options is not None and not run.check_mode:
        # the VF settings come after the removals: checked now, before anything changes
        apply_vf_settings(vf_options, host, Run(check_mode=True, diff=False))
    make_guest_files(requests, host, run)
    if network is not None:
        run.diff.extend(network.diff())
        if network.changed and not run.check_mode:
            network.apply(run)
    results, vf_result = [], None
    for index, request in enumerate(requests):
        if index == first and vf_options is not None:
            vf_result = apply_vf_settings(vf_options, host, run)
        try:
            change = request.decide(conn, model, run.check_mode)
            if fabric is not None:
                fabric.attach(change)
            result = decide_then_act(change, run)
            if fabric is not None:
                fabric.after(change, run)
        except (InputError, StateError) as exc:
            if batch:
                # what the domains before this one did is part of the answer
                exc.details = dict(getattr(exc, "details", None) or {}, domains=OrderedDict((r["name"], r) for r in results))
            if vf_result is not None:
                exc.details = dict(getattr(exc, "details", None) or {}, sriov_vfs=vf_result)
            raise
        result["mmio_window_mb"] = getattr(request.spec, "mmio_window_mb", None)
        result["guest"] = request.guest_fields()
        if request.guest is not None and request.guest.changed:
            result["changed"] = True
        if request.removal is not None:
            remove_guest_files(request, host, run, result)
        results.append(dict(result, name=request.spec.name) if batch else result)
    if present:
        note = maxphysaddr_note(present, supported, versions)
        if note:
            run.warn(note)
    if vf_result is None and vf_options is not None:
        vf_result = apply_vf_settings(vf_options, host, run)
    result = batch_result(results) if batch else results[0]
    if network is not None:
        result["management_network"] = network.result()
        result["changed"] = result["changed"] or network.changed
    if vf_result is not None:
        result["sriov_vfs"] = vf_result
        result["changed"] = result["changed"] or vf_result["changed"]
    if fabric is not None:
        result["fabric_partitions"] = fabric.result()
        result["changed"] = result["changed"] or fabric.changed
    return result


# With ``tenants`` (the tenants stage's desired state, decided on the host: tenant_stage), these
# options of one domain are every tenant's settings; the others are refused with it.
TENANT_STAGE_SETTINGS = ("domain_type", "machine", "firmware", "memory_mode", "live", "shutdown_timeout", "force_off")
TENANT_STAGE_OPTIONS = dict(
    tenants=dict(type="list", elements="dict"),
    policy=dict(type="dict"),
    priorities=dict(type="dict"),
    guest_access=dict(type="dict"),
    vf_persist=dict(type="bool"),
    gpu_ids=dict(type="list", elements="str"),
    nic_ids=dict(type="list", elements="str"),
    fabric_manager=dict(type="dict", options=FABRIC_MANAGER_OPTIONS),
    fabric_vm=dict(type="dict"),
    preview=dict(type="dict", options=dict(
        sriov_pfs=dict(type="list", elements="dict", default=[]),
        hugepages=dict(type="list", elements="dict", default=[]),
        gpus=dict(type="list", elements="str", default=[]),
    )),
)
TENANT_DOMAIN_ARGS = dict(
    argument_spec=dict(LIBVIRT_OPTIONS, domains=dict(type="list", elements="dict"), sriov_vfs=dict(type="dict"),
                       management_network=dict(type="dict", options=NETWORK_OPTIONS),
                       **dict(TENANT_DOMAIN_OPTIONS, **TENANT_STAGE_OPTIONS)),
    required_one_of=[("name", "domains", "tenants")],
    mutually_exclusive=([("domains", option) for option in sorted(TENANT_DOMAIN_OPTIONS)]
                        + [("tenants", option) for option in ["domains", "sriov_vfs"] + sorted(TENANT_DOMAIN_OPTIONS)
                           if option not in TENANT_STAGE_SETTINGS]),
    required_by=dict((option, "tenants") for option in sorted(TENANT_STAGE_OPTIONS) if option != "tenants"),
)
