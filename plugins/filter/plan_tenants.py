# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for placing tenants on the controller: ``gpuvirt.tenancy.plan_tenants`` (the placement
planner, for the preflight and fleet reports; the tenants stage plans on the host, in
tenant_domain's ``tenants``, with the same code: module_utils tenant_plan), what the present
tenants need of the libvirt host and of the SR-IOV/VFIO stage, the libvirt questions the
preflight gate and the role libvirt_host ask (one question, so that the role takes the gate's read),
and what the role libvirt_host does to the libvirt service and whether it changed the host."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.

# Where a tenant backed by 1G pages gets its memory: a hugetlbfs mount of 1G pages, which
# libvirt finds among the host's mounts when it starts (2M pages: systemd's /dev/hugepages).
HUGETLBFS_1G = "/dev/hugepages1G"


def _plan_tenants(topology, tenants, policy=None, foreign=None):
    """The plan; ``foreign``: the domains that are not listed tenants (tenant_domain_info's
    ``foreign``), whose devices, CPUs and hugepages are kept out of it. The same code as
    tenant_domain's ``tenants`` plans with on the host (module_utils tenant_plan)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan  # pylint: disable=import-outside-toplevel
    try:
        return tenant_plan.plan(topology, tenants, policy, foreign)
    except InputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.plan_tenants: %s" % exc)


def _group_devices(topology, policy=None):
    """The functions that go along with the tenants' GPUs and VFs to their tenants (they share
    their IOMMU groups), to bind to vfio-pci with them, and the pool devices their groups keep
    out of the plan: ``{companions: [addresses], left_out: {address: reason}, shared: {address:
    [the pool devices of its group]}}`` (module_utils placement/planner.py ``group_devices``; placement/pool_groups.py, which vfio_bind's ``gpus``
    works out on the host)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import planner  # pylint: disable=import-outside-toplevel
    try:
        return planner.group_devices(topology, policy)
    except InputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_group_devices: %s" % exc)


def _tenant_host_needs(tenants, policy=None, firmware="efi"):
    """What the present tenants need from the libvirt host: ``uefi`` (a tenant whose firmware,
    its own or ``firmware``, is efi: OVMF installed) and ``hugetlbfs_mounts`` (``[{size, path}]``:
    a 1G hugetlbfs mount when a tenant, or the policy's default, backs its memory with 1G pages)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import size_name  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays  # pylint: disable=import-outside-toplevel
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_host_needs: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    default_size = (policy or {}).get("hugepage_size", "2M")
    uefi = False
    sizes = set()
    for tenant in tenants:
        if not isinstance(tenant, dict) or not stays(tenant):
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


def _libvirt_host_preview(needs, service="libvirtd"):
    """What the libvirt host role (the tenants stage's first step) changes on a host, said in a preview
    under a capture, which runs none of it (the role reads the host's libvirt, which a capture does
    not answer): one line per hugetlbfs mount it makes for the tenants (``needs``: tenant_host_needs'
    result) and one for the daemon's start or restart, each the change of that named role."""
    if not isinstance(needs, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.libvirt_host_preview: expected tenant_host_needs' result (a dict), got %s"
                                 % type(needs).__name__)
    lines = []
    for mount in needs.get("hugetlbfs_mounts") or []:
        lines.append("hugetlbfs %s (pagesize=%s): the libvirt host role (tenants stage) mounts it with a systemd mount unit "
                     "it enables, before %s starts, where the host has no such mount" % (mount.get("path"), mount.get("size"), service))
    if lines:
        lines.append("%s: the libvirt host role restarts it after mounting a hugetlbfs it did not have (running domains keep "
                     "running), or installs and starts it where libvirt is missing or stopped" % service)
    else:
        lines.append("%s: the libvirt host role installs and starts it where libvirt is missing or stopped" % service)
    if needs.get("uefi"):
        lines.append("OVMF: the libvirt host role installs it where it is missing (a tenant boots with UEFI)")
    return lines


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


def _libvirt_gate_query(tenants, uri, preview=False, service="libvirtd", uefi=None, packages=None, policy=None, firmware="efi"):
    """What the preflight gate asks of libvirt (preflight_info's ``libvirt``): the listed tenants'
    domains and the foreign ones on ``uri`` and, unless in a preview (no host to ask), the libvirt
    service as libvirt_host asks it (``libvirt_service_query``), with OVMF when ``uefi`` says so
    or, left unset, when a present tenant boots UEFI (``tenant_host_needs``)."""
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.libvirt_gate_query: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    query = {"names": [tenant.get("name") for tenant in tenants if isinstance(tenant, dict)], "foreign": True, "uri": uri}
    if not boolean(preview, strict=False):
        if uefi is None:
            uefi = _tenant_host_needs(tenants, policy, firmware)["uefi"]
        query["service"] = _libvirt_service_query(service, uefi, packages)
    return query


def _libvirt_read_answers(read, query, uri):
    """Whether a libvirt read (tenant_domain_info's result: the gate's ``preflight_libvirt_read``)
    answers libvirt_host's question: asked for the same service ``query`` on the same ``uri``, and
    with the service read."""
    read = read if isinstance(read, dict) else {}
    asked = read.get("query") if isinstance(read.get("query"), dict) else {}
    return asked.get("service") == query and asked.get("uri") == uri and isinstance(read.get("service"), dict)


def _libvirt_service_due(service, mounts=None):
    """What the role libvirt_host does to the libvirt service, from the service as read before
    the role (tenant_domain_info's ``service``) and the role's ``hugepages`` result (``mounts``):
    ``start`` (and enable at boot) when a package was missing or the service was not enabled or
    not active; ``restart`` when it was active and the run mounted a hugetlbfs mount that was not
    there before (libvirtd finds the mounts when it starts); ``due`` when the service needs the
    role at all (a start, or a check that libvirt answers). On a host where systemd does not run
    (``enabled`` and ``active`` both empty) and libvirt answers with nothing missing, nothing is
    due: its daemon was started by another supervisor."""
    name = "gpuvirt.tenancy.libvirt_service_due"
    if not isinstance(service, dict):
        raise AnsibleFilterError("%s: expected the service read (tenant_domain_info's service), got %s" % (name, type(service).__name__))
    if mounts is not None and not isinstance(mounts, dict):
        raise AnsibleFilterError("%s: mounts must be the hugepages result, got %s" % (name, type(mounts).__name__))
    new_mounts = [m for m in (mounts or {}).get("mounts") or [] if not (isinstance(m, dict) and m.get("mounted"))]
    if service.get("enabled") == "" and service.get("active") == "" and service.get("answers") and not service.get("missing"):
        # no systemd runs on the host (a container, a test machine): the daemon that answers is started by
        # something else, which this role leaves it to; a new hugetlbfs mount waits for that daemon's restart
        return {"start": False, "restart": False, "due": False}
    active = service.get("active") == "active"
    start = bool(service.get("missing")) or service.get("enabled") != "enabled" or not active
    return {"start": start, "restart": active and bool(new_mounts), "due": start or not service.get("answers")}


def _changed(result):
    """ansible-core's ``changed`` test: the result's ``changed``, else whether one of a loop's
    ``results`` changed."""
    if "changed" in result:
        return bool(result["changed"])
    looped = result.get("results")
    return isinstance(looped, list) and any(isinstance(r, dict) and r.get("changed") for r in looped)


def _libvirt_host_changed(results):
    """Whether one of the role libvirt_host's registered results (installed, mounted, units
    enabled, started, restarted) changed the host: a read of libvirt made before the role is
    then out of date."""
    name = "gpuvirt.tenancy.libvirt_host_changed"
    if not isinstance(results, list):
        raise AnsibleFilterError("%s: expected a list of the role's registered results, got %s" % (name, type(results).__name__))
    for result in results:
        if not isinstance(result, dict):
            raise AnsibleFilterError("%s: each registered result must be a dict, got %r" % (name, result))
    return any(_changed(result) for result in results)


class FilterModule:
    """Placement planner filters."""

    def filters(self):
        return {"plan_tenants": _plan_tenants,
                "tenant_host_needs": _tenant_host_needs, "tenant_group_devices": _group_devices,
                "libvirt_host_preview": _libvirt_host_preview,
                "libvirt_service_query": _libvirt_service_query, "libvirt_gate_query": _libvirt_gate_query,
                "libvirt_read_answers": _libvirt_read_answers, "libvirt_service_due": _libvirt_service_due,
                "libvirt_host_changed": _libvirt_host_changed}
