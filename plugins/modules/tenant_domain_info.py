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
  - With O(service) it also reads whether libvirt is installed, enabled and running (RV(service)), for the
    P(gpuvirt.tenancy.libvirt_host#role) role; then a libvirt that does not answer (libvirt-python or libvirtd not there
    yet, a bare host) is not a failure; the domains are not read (RV(domains_read) false) and RV(service.message) says why.
  - M(gpuvirt.tenancy.preflight_info) runs this module inside its own call (its O(gpuvirt.tenancy.preflight_info#module:libvirt)
    option takes this module's options), so that the host stages start from one read.
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
  service:
    description:
      - Also read the libvirt service (RV(service)) as P(gpuvirt.tenancy.libvirt_host#role) needs it; omitted, it is not read.
      - The packages are asked of C(dpkg-query) (Debian family) or C(rpm) (RedHat family), the service of C(systemctl).
    type: dict
    suboptions:
      name:
        description: The libvirt daemon's service name.
        type: str
        default: libvirtd
      packages:
        description:
          - The packages that must be installed; omitted, the family's list (Debian C(libvirt-daemon-system), C(qemu-system-x86),
            C(python3-libvirt), C(libxml2-utils); RedHat C(libvirt-daemon-kvm), C(qemu-kvm), C(python3-libvirt),
            C(libvirt-client)).
        type: list
        elements: str
      uefi:
        description: Also the UEFI firmware package (Debian C(ovmf), RedHat C(edk2-ovmf)).
        type: bool
        default: false
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.libvirt
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

- name: Read the libvirt service too (a bare host answers with what is missing, not with a failure)
  gpuvirt.tenancy.tenant_domain_info:
    names: []
    foreign: false
    service:
      uefi: true
  register: libvirt_state

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
domains_read:
  description: Whether the domains were read; false only with O(service) when libvirt did not answer (see RV(service.message)).
  returned: success
  type: bool
  sample: true
service:
  description: With O(service), what the host has of libvirt; null without it.
  returned: success
  type: dict
  contains:
    family:
      description: The package family, C(Debian) (dpkg), C(RedHat) (rpm) or C(unknown).
      type: str
    packages:
      description: The packages the host needs (O(service.packages) or the family's list, with the UEFI firmware).
      type: list
      elements: str
    missing:
      description: Those of RV(service.packages) that are not installed.
      type: list
      elements: str
    enabled:
      description: >-
        The service's unit file state, the word C(systemctl is-enabled) prints (C(enabled), C(disabled), ...; empty for a
        unit that does not exist and without systemctl), read with the active state in one C(systemctl show).
      type: str
    active:
      description: >-
        The service's active state, the word C(systemctl is-active) prints (C(active), C(inactive), ...; empty without
        systemctl or where systemd is not running).
      type: str
    answers:
      description: Whether libvirt answered on O(uri) (the domains were read).
      type: bool
    message:
      description: Why libvirt did not answer (null when it did).
      type: str
  sample: {family: Debian, packages: [libvirt-daemon-system, qemu-system-x86, python3-libvirt, libxml2-utils, ovmf],
           missing: [], enabled: enabled, active: active, answers: true, message: null}
query:
  description:
    - What was read (O(names), O(foreign), O(uri), O(service) with its defaults), so that a caller given this result (the
      roles given P(gpuvirt.tenancy.preflight#role)'s read) can tell whether it answers its own question.
  returned: success
  type: dict
  sample: {names: [tenant-a], foreign: true, uri: "qemu:///system", service: {name: libvirtd, packages: null, uefi: true}}
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_info import TENANT_DOMAIN_INFO_ARGS, tenant_domain_info

MODULE_ARGS = TENANT_DOMAIN_INFO_ARGS


def main(host=None):
    run_module(MODULE_ARGS, tenant_domain_info, host=host)


if __name__ == "__main__":
    main()
