#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: fabric_partition
short_description: Fabric Manager partitions of an NVSwitch board activated or deactivated through fmpm
version_added: 0.1.0
description:
  - In the Shared NVSwitch virtualization model (NVIDIA Fabric Manager user guide) a tenant's GPUs reach each other
    over NVLink only once the Fabric Manager has activated the partition that holds exactly them, before the tenant
    starts; the partition is deactivated when the tenant leaves. This module does that through NVIDIA's C(fmpm)
    (FM Partition Manager, U(https://github.com/NVIDIA/Fabric-Manager-Client)), run where it reaches the Fabric
    Manager (the service VM that holds the NVSwitches, or with O(hostname) over TCP).
  - It reads C(fmpm -l) first and decides every step before the first one; a partition the Fabric Manager does not
    list, one whose GPUs differ from O(partitions[].physical_ids), or one whose GPUs another active partition holds is
    refused with the reason and nothing is changed. Deactivations run before activations (C(fmpm -d ID), C(fmpm -a ID)).
  - Partitions the call does not name are left as they are.
  - The tenants stage takes the same steps for each tenant in its own call (M(gpuvirt.tenancy.tenant_domain) with
    O(gpuvirt.tenancy.tenant_domain#module:tenants) and O(gpuvirt.tenancy.tenant_domain#module:fabric_manager), role
    variable C(tenant_vms_fabric_manager)), a tenant's partition activated between its definition and its start.
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
options:
  partitions:
    description: The partitions to bring to a state, each named once.
    type: list
    elements: dict
    required: true
    suboptions:
      id:
        description: The partition ID, as C(fmpm -l) lists it (the plan's C(nvswitch_partition.id)).
        type: int
        required: true
      state:
        description: V(active) activates the partition (before its tenant starts); V(inactive) deactivates it (after its tenant left).
        type: str
        choices: [active, inactive]
        default: active
      physical_ids:
        description:
          - The GPU physical IDs (module IDs) the partition must hold (the plan's C(nvswitch_partition.physical_ids)); the
            call is refused when the Fabric Manager lists other GPUs for it. Not checked when left out.
        type: list
        elements: int
  fmpm:
    description: The fmpm program; found on PATH when not given.
    type: path
  hostname:
    description: The Fabric Manager's address, passed as C(--hostname) (its C(FM_CMD_BIND_INTERFACE)); fmpm's default is 127.0.0.1.
    type: str
notes:
  - fmpm 1.0.1 connects over TCP to O(hostname) (or 127.0.0.1) even when given C(--unix-domain-socket) (its C(fmpm.cpp)
    overwrites the address before it connects), so this module offers no socket option.
"""

EXAMPLES = r"""
- name: Activate tenant-a's partition before it starts (the plan's partition 3, modules 1 and 3)
  gpuvirt.tenancy.fabric_partition:
    partitions:
      - id: 3
        physical_ids: [1, 3]

- name: Tenant-a left; its partition back for another tenant
  gpuvirt.tenancy.fabric_partition:
    partitions:
      - id: 3
        state: inactive
"""

RETURN = r"""
activated:
  description: The partition IDs activated (or, in check mode, to be activated).
  returned: success
  type: list
  elements: int
  sample: [3]
deactivated:
  description: The partition IDs deactivated (or, in check mode, to be deactivated).
  returned: success
  type: list
  elements: int
  sample: []
partitions:
  description: Every partition the Fabric Manager lists, by ID, with C(active), C(physical_ids) and C(gpus) (PCI bus IDs), as read last.
  returned: success
  type: dict
  sample: {"3": {"active": true, "physical_ids": [1, 3], "gpus": ["00000000:1B:00.0", "00000000:52:00.0"]}}
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric import partition_call

MODULE_ARGS = partition_call.MODULE_ARGS


def main(host=None):
    run_module(MODULE_ARGS, partition_call.fabric_partition, host=host)


if __name__ == "__main__":
    main()
