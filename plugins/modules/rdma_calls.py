#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_calls
short_description: The guest_rdma role's inputs checked together, and the options of its mlx_rocev2 call
version_added: 0.2.0
description:
  - Checks the role C(guest_rdma)'s inputs together (their types and choices are the role's argument spec's) - a device or
    the VF's MAC, soft-RoCE's device and netdev, the GID index's form (V(discover), V(auto) or a whole number), the port -
    and fails naming every bad one before any call.
  - Gives the options of the role's one M(gpuvirt.tenancy.mlx_rocev2) call (RV(rocev2)) - the device named, else the VF's
    MAC to find it by; the packages per OS family when the role installs; C(nccl_env), the options of the NCCL file,
    decided but not written - and whether a soft-RoCE device is made first (RV(soft_roce)).
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  inputs:
    description: The role's inputs without the C(guest_rdma_) prefix (the role's internal C(__guest_rdma_inputs)).
    type: dict
    required: true
  family_packages:
    description: The RDMA packages per OS family, used unless the inputs' C(packages) names some for any family.
    type: dict
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Check the role inputs and build the RoCE call
  gpuvirt.tenancy.rdma_calls:
    inputs: "{{ __guest_rdma_inputs }}"
    family_packages: {Debian: [rdma-core, ibverbs-providers, ibverbs-utils]}
  register: calls
"""

RETURN = r"""
rocev2:
  description: The options of the M(gpuvirt.tenancy.mlx_rocev2) call (C(nccl_env_write) false, C(nccl_env) the NCCL file's options).
  returned: success
  type: dict
soft_roce:
  description: Whether the role makes a soft-RoCE device first.
  returned: success
  type: bool
"""
