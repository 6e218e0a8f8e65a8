#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_verbs
short_description: Fail when the verbs library does not see the guest's RDMA device
version_added: 0.2.0
description:
  - The kernel can hold an RDMA device (C(rdma link) shows it) that the verbs library, which NCCL opens, does not see (no
    userspace provider) - NCCL and C(ibv_*) programs then find no device. From the role C(guest_rdma)'s registered results,
    this action fails naming the host and what keeps verbs from the device - the provider package of the OS family,
    C(ibv_devices) missing, the failed install's last line - and passes when verbs see it.
  - The install's result counts only where it changed or failed; the second read only where it ran (not skipped).
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  found:
    description: The registered M(gpuvirt.tenancy.mlx_rocev2) result (its C(verbs), C(rdma_device) and C(packages)).
    type: dict
    required: true
  installed:
    description: The registered result of the role's package install (which may have failed, or been skipped).
    type: dict
  reread:
    description: The registered M(gpuvirt.tenancy.mlx_rocev2) result read again after the install (or its skipped result).
    type: dict
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Fail when the verbs library does not see the RDMA device
  gpuvirt.tenancy.rdma_verbs:
    found: "{{ rocev2 }}"
    installed: "{{ installed }}"
    reread: "{{ reread }}"
"""

RETURN = r"""
problem:
  description: What keeps verbs from the device; empty when they see it (the task then passes).
  returned: always
  type: str
"""
