#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: numa_pin
short_description: Pin a libvirt domain's vCPUs, emulator threads and memory to host CPUs and NUMA nodes
version_added: 0.1.0
description:
  - Edits the persistent definition of a libvirt domain through libvirt-python, managing only C(cputune/vcpupin),
    C(cputune/emulatorpin), C(numatune/memory) and C(memoryBacking/hugepages); every other element is kept as it was.
  - With O(live=true) and a running domain, also applies the vCPU pins, the emulator pin and the NUMA nodeset to the running
    domain (C(virDomainPinVcpuFlags), C(virDomainPinEmulator), C(virDomainSetNumaParameters)). The hugepage backing and a new
    numatune mode apply at the domain's next start (RV(restart_required)).
  - Options left out are left as they are in the domain.
  - Checks every CPU and node against the host's capabilities before changing anything. In check mode, pins of vCPUs the
    definition does not have yet (a resize that M(gpuvirt.tenancy.tenant_domain) would apply first) are a warning, not an error.
options:
  hugepages:
    description:
      - Back the guest memory with hugepages of O(hugepages.size). Which host node they come from is set by O(nodeset).
    type: dict
    suboptions:
      size:
        description: V(2M) or V(1G).
        type: str
        required: true
      nodeset:
        description: Guest NUMA cells (C(cpu/numa/cell) ids) these pages back, for guests with a NUMA topology.
        type: str
  live:
    description: Also apply the pins and the nodeset to the running domain.
    type: bool
    default: false
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.libvirt
  - gpuvirt.tenancy.libvirt.DOMAIN
  - gpuvirt.tenancy.libvirt.PINS
attributes:
  diff_mode:
    details: The persistent XML before and after, and the running domain's pins before and after when O(live=true).
seealso:
  - module: gpuvirt.tenancy.tenant_domain
  - name: libvirt domain XML, CPU tuning and NUMA node tuning
    description: The elements this module manages.
    link: https://libvirt.org/formatdomain.html#cpu-tuning
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Pin tenant-a to NUMA node 1 (vCPU 0 on CPU 2, emulator on CPU 3, 2M hugepages from node 1)
  gpuvirt.tenancy.numa_pin:
    name: tenant-a
    vcpu_pins:
      0: "2"
    emulator_cpus: "3"
    memory_mode: strict
    nodeset: "1"
    hugepages:
      size: 2M
    live: true

- name: Pin from a placement plan
  gpuvirt.tenancy.numa_pin:
    name: "{{ item.key }}"
    vcpu_pins: "{{ item.value.vcpu_pins }}"
    emulator_cpus: "{{ item.value.emulator_cpus | join(',') }}"
    nodeset: "{{ item.value.numa_node | string }}"
  loop: "{{ tenant_plan.placements | dict2items }}"
"""

RETURN = r"""
xml:
  description: The persistent domain XML after the change (as it would be, in check mode).
  returned: success
  type: str
  sample: "<domain type='kvm'><name>tenant-a</name>...</domain>"
config_changed:
  description: Whether the persistent definition changed (or would change).
  returned: success
  type: bool
  sample: true
live_changed:
  description: Whether the running domain's pins or nodeset changed (or would change).
  returned: success
  type: bool
  sample: false
active:
  description: Whether the domain is running.
  returned: success
  type: bool
  sample: true
restart_required:
  description: The domain runs and part of the new definition (hugepages, numatune mode, or everything when O(live=false)) takes
    effect only when it is restarted.
  returned: success
  type: bool
  sample: false
vcpu_pins:
  description: vCPU -> cpuset in the persistent definition.
  returned: success
  type: dict
  sample: {"0": "2"}
emulator_cpus:
  description: The emulator cpuset in the persistent definition.
  returned: success
  type: str
  sample: "3"
memory_mode:
  description: numatune memory mode in the persistent definition.
  returned: success
  type: str
  sample: strict
nodeset:
  description: numatune nodeset in the persistent definition.
  returned: success
  type: str
  sample: "1"
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.change import LIBVIRT_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.live_pins import PIN_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.numa_pin_domain import numa_pin

MODULE_ARGS = dict(
    argument_spec=dict(
        LIBVIRT_OPTIONS,
        name=dict(type="str", required=True),
        hugepages=dict(type="dict", options=dict(size=dict(type="str", required=True), nodeset=dict(type="str"))),
        live=dict(type="bool", default=False),
        **PIN_OPTIONS
    ),
)


def main(host=None):
    run_module(MODULE_ARGS, numa_pin, host=host)


if __name__ == "__main__":
    main()
