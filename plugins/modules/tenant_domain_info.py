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
  - With O(foreign=true) it also returns every other domain on the connection (not a listed tenant), running or not, with the
    devices and CPUs it holds in its definition and, running, in its live XML; the C(gpuvirt.tenancy.plan_tenants) filter
    keeps those out of the plan.
options:
  names:
    description: Domain (tenant) names; names with no domain are left out of the result.
    type: list
    elements: str
    required: true
  foreign:
    description: Also read the domains not in O(names) (RV(foreign)).
    type: bool
    default: true
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
foreign:
  description:
    - Domain name -> what a domain not in O(names) holds (empty with O(foreign=false)). The fields of RV(domains), with
      C(hostdevs) and C(cpus) (its pinned vCPU and emulator CPUs) from its definition and, running, its live XML too, and
      C(hugepages.count).
  returned: success
  type: dict
  sample:
    legacy-vm:
      hostdevs: ["0000:07:00.0", "0000:0c:00.3"]
      cpus: "8-15"
      vcpu_pins: {"0": "8", "1": "9"}
      emulator_cpus: "10"
      memory_mode: strict
      nodeset: "1"
      numa_node: 1
      hugepages: {size: 1G, node: 1, count: 16}
      vcpus: 8
      memory_mb: 16384
      active: true
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_domain import LIBVIRT_OPTIONS, tenant_domain_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import run_module

MODULE_ARGS = dict(
    argument_spec=dict(
        LIBVIRT_OPTIONS,
        names=dict(type="list", elements="str", required=True),
        foreign=dict(type="bool", default=True),
    ),
)


def main(host=None):
    run_module(MODULE_ARGS, tenant_domain_info, host=host)


if __name__ == "__main__":
    main()
