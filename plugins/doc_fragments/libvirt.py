# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    """What the libvirt modules (numa_pin, tenant_domain, tenant_domain_info) share."""

    # Every libvirt module: the connection, and the library it needs.
    DOCUMENTATION = r"""
options:
  uri:
    description:
      - libvirt connection URI. The domains are read and changed through this connection, also when
        O(root) names a captured tree.
    type: str
    default: qemu:///system
requirements:
  - libvirt-python (python3-libvirt) on the managed host
"""

    # A module that manages one domain.
    DOMAIN = r"""
options:
  name:
    description: The domain name (for a tenant, the tenant name).
    type: str
    required: true
"""

    # The vCPU, emulator and NUMA memory pinning numa_pin and tenant_domain write.
    PINS = r"""
options:
  vcpu_pins:
    description:
      - vCPU number -> host cpuset (V(3), V(2-3,6)). The domain's C(vcpupin) elements become exactly these.
    type: dict
  emulator_cpus:
    description: Host cpuset for the emulator threads (C(emulatorpin)).
    type: str
  memory_mode:
    description: C(numatune) memory mode; applied together with O(nodeset).
    type: str
    choices: [strict, preferred, interleave, restrictive]
    default: strict
  nodeset:
    description: Host NUMA nodes for the guest memory (C(numatune/memory/@nodeset)), e.g. V(1).
    type: str
"""
