# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenant contract's choices and defaults, written once, and the one reading of whether an
entry of the tenant list stays (:func:`stays`). Small and without imports, so that code that
only asks which tenants stay (the SR-IOV/VFIO stage, the preflight) ships nothing more."""

from __future__ import absolute_import, division, print_function

from collections.abc import Mapping

__metaclass__ = type

TENANT_STATES = ("present", "defined", "running", "absent")
PRIORITIES = ("online", "batch")
# required: GPUs, VFs, vCPUs and memory on one NUMA node; required_vf_socket: the same but the VFs,
# which may come from another node of that node's socket (SNC/NPS hosts whose NICs sit on some
# nodes only); preferred: one node when one holds the tenant, else split; spread: guest NUMA cells
NUMA_CHOICES = ("required", "required_vf_socket", "preferred", "spread")
VF_SOCKET = "required_vf_socket"
EMULATOR_CHOICES = ("isolate", "housekeeping", "vcpus")
# What a tenant gets for an option it leaves out. The placement choices (numa, emulator,
# hugepage_size) left out are the planner policy's; firmware: fields.DEFAULT_FIRMWARE.
TENANT_DEFAULTS = {"state": "present", "priority": "online", "gpus": 0, "vfs": 0}
# hugepage_size given as none (no hugepages), apart from left out (the policy's)
NO_HUGEPAGES = "none"


# types.MappingProxyType, the view a tenant record keeps its values in (a class's __dict__ is one)
_READ_ONLY = type(type.__dict__)


def stays(tenant):
    """Whether an entry of the tenant list (a record, or a dict as the inventory gives it) is a
    tenant that stays: a mapping whose state, or its default, is not absent."""
    # a plain dict (the planner's tenants, the inventory's) and a record's read-only view of one
    # (tenancy/record.py) are known without the abstract Mapping's check
    mapping = tenant.__class__ is dict or tenant.__class__ is _READ_ONLY or isinstance(tenant, Mapping)
    return mapping and str(tenant.get("state") or TENANT_DEFAULTS["state"]) != "absent"
