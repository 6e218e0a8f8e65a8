# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IOMMU groups of the tenant pools, as the placement planner sees them: the functions that
go along with the tenants' GPUs and VFs (they share their groups: a GPU's audio function, say),
to bind to vfio-pci with them, and the pool devices their groups keep out of the plan. One
answer for the controller (filter ``tenant_group_devices``) and the host (vfio_bind's ``gpus``):
the planner's own groups report, over a plan of no tenant."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import Planner

__metaclass__ = type


def group_devices(topology, policy=None):
    """``{companions: [addresses], left_out: {address: reason}, shared: {address: [the pool
    devices of its group]}}`` on the host model ``topology`` for the pools of ``policy`` (the
    planner's: ``gpus``, the tenant GPU pool, null for every GPU; ``vf_pfs``; ``host_devices``).
    A bad policy or host model raises common.InputError."""
    report = Planner(topology, policy or {}).plan([])["groups"]
    return {"companions": sorted(set(a for along in report["companions"].values() for a in along)),
            "left_out": report["left_out"], "shared": report["shared"]}
