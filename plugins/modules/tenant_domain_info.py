#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tenant_domain_info
short_description: Read what tenants' libvirt domains hold (PCI hostdevs, CPU pins, NUMA node, hugepages)
version_added: 0.1.0
description:
  - Reads the persistent definitions of the named libvirt domains and returns, for each one that exists, the resources it holds,
    in the shape the C(gpuvirt.tenancy.plan_tenants) filter takes as C(policy.existing), so that a new plan keeps them where they are.
options:
  names:
    description: Domain (tenant) names; names with no domain are left out of the result.
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.libvirt
attributes:
  platform:
    platforms: posix
seealso:
  - module: gpuvirt.tenancy.tenant_domain
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read the tenants' current assignments
  gpuvirt.tenancy.tenant_domain_info:
    names: "{{ gpuvirt_tenants | map(attribute='name') }}"
  register: tenant_domains

- name: Plan, keeping the defined tenants where they are
  ansible.builtin.set_fact:
    tenant_plan: "{{ topology | gpuvirt.tenancy.plan_tenants(gpuvirt_tenants, {'existing': tenant_domains.domains}) }}"
"""

RETURN = r"""
domains:
  description: Domain name -> what its definition holds.
  returned: success
  type: dict
  sample:
    tenant-a:
      hostdevs: ["0000:82:00.0", "0000:81:00.1"]
      vcpu_pins: {"0": "2"}
      emulator_cpus: "3"
      memory_mode: strict
      nodeset: "1"
      numa_node: 1
      hugepages: {size: 2M, node: 1}
      vcpus: 1
      memory_mb: 64
      active: true
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_domain import LIBVIRT_OPTIONS, tenant_domain_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import run_module

MODULE_ARGS = dict(
    argument_spec=dict(
        LIBVIRT_OPTIONS,
        names=dict(type="list", elements="str", required=True),
    ),
)


def main(host=None):
    run_module(MODULE_ARGS, tenant_domain_info, host=host)


if __name__ == "__main__":
    main()
