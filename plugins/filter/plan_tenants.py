# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for placing tenants on the controller: ``gpuvirt.tenancy.plan_tenants`` (the placement
planner, for the preflight and fleet reports; the tenants stage plans on the host, in
tenant_domain's ``tenants``, with the same code: module_utils tenant_plan), what the present
tenants need of the libvirt host and of the SR-IOV/VFIO stage, and the libvirt question of the
preflight gate (the role libvirt_host asks the same one, through the action libvirt_service, so
that it takes the gate's read)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.libvirt_service import LibvirtServiceError, service_query

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
    a 1G hugetlbfs mount when a tenant, or the policy's default, backs its memory with 1G pages).
    Each entry is read as its tenant record (tenancy/record.py ``tenant_record``), alone: an entry
    the record refuses needs nothing here, and is named by the preflight gate's report and refused
    by the tenants stage, instead of stopping the libvirt host before the gate."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import size_name  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_record  # pylint: disable=import-outside-toplevel
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.tenant_host_needs: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    records = []
    for index, raw in enumerate(tenants):
        try:
            records.append(tenant_record(raw, index, firmware or None))
        except InputError:
            continue
    present = [record for record in records if record.present]
    sizes = set(record.hugepage_size for record in present if record.hugepage_size is not None)
    if any(record.hugepage_size is None for record in present):
        try:
            sizes.add(size_name((policy or {}).get("hugepage_size", "2M"), "policy.hugepage_size (gpuvirt_tenant_policy)",
                                allow_none=True))
        except InputError as exc:
            raise AnsibleFilterError("gpuvirt.tenancy.tenant_host_needs: %s" % exc)
    mounts = [{"size": "1G", "path": HUGETLBFS_1G}] if "1G" in sizes else []
    return {"uefi": any(record.firmware == "efi" for record in present), "hugetlbfs_mounts": mounts}


def _libvirt_gate_query(tenants, uri, preview=False, service="libvirtd", uefi=None, packages=None, policy=None, firmware="efi"):
    """What the preflight gate asks of libvirt (preflight_info's ``libvirt``): the listed tenants'
    domains and the foreign ones on ``uri`` and, unless in a preview (no host to ask), the libvirt
    service as libvirt_host asks it (plugin_utils libvirt_service, the action libvirt_service's question), with OVMF when ``uefi`` says so
    or, left unset, when a present tenant boots UEFI (``tenant_host_needs``)."""
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.libvirt_gate_query: expected the tenant list (gpuvirt_tenants), got %s"
                                 % type(tenants).__name__)
    query = {"names": [tenant.get("name") for tenant in tenants if isinstance(tenant, dict)], "foreign": True, "uri": uri}
    if not boolean(preview, strict=False):
        if uefi is None:
            uefi = _tenant_host_needs(tenants, policy, firmware)["uefi"]
        try:
            query["service"] = service_query(service, uefi, packages)
        except LibvirtServiceError as exc:
            raise AnsibleFilterError("gpuvirt.tenancy.libvirt_gate_query: %s" % exc)
    return query


class FilterModule:
    """Placement planner filters."""

    def filters(self):
        return {"plan_tenants": _plan_tenants,
                "tenant_host_needs": _tenant_host_needs, "tenant_group_devices": _group_devices,
                "libvirt_gate_query": _libvirt_gate_query}
