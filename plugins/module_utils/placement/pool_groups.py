# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IOMMU groups of the tenant pools, as the placement planner sees them: the functions that
go along with the tenants' GPUs and VFs (they share their groups: a GPU's audio function, say),
to bind to vfio-pci with them, and the pool devices their groups keep out of the plan. One
answer for the controller (filter ``tenant_group_devices``, placement/planner.py's
``group_devices``, with the whole policy checked) and the host (vfio_bind's ``gpus``,
:func:`pool_groups`): both read the groups of the planner's own host index (placement/index.py),
so the host stage ships and imports the index only, not the planner's search."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex, read_host_devices

__metaclass__ = type


def groups_of(host):
    """``{companions: [addresses], left_out: {address: reason}, shared: {address: [the pool
    devices of its group]}}`` of a placement.index.HostIndex."""
    return {"companions": sorted(set(a for along in host.companions.values() for a in along)),
            "left_out": dict(sorted(host.left_out.items())),
            "shared": dict((a, list(unit)) for a, unit in sorted(host.units.items()))}


def pool_groups(topology, gpus=None, vf_pfs=None, host_devices=None):
    """:func:`groups_of` the host model ``topology`` for the planner's pools: ``gpus`` (the tenant
    GPU pool, None for every GPU), ``vf_pfs``, ``host_devices`` (as in the planner's policy). A bad
    pool or host model raises common.InputError, in the planner's words."""
    return groups_of(HostIndex(topology, gpus, vf_pfs, read_host_devices(host_devices if host_devices is not None else {})))
