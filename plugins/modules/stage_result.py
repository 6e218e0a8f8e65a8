#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stage_result
short_description: What a host stage makes of the result of its call
version_added: 0.2.0
description:
  - A host stage takes one result - the preflight gate's check of its call where M(gpuvirt.tenancy.gate_check) answered
    it (RV(gpuvirt.tenancy.gate_check#module:answered)), else its own call's (M(gpuvirt.tenancy.stage_call)) where it ran,
    else V({}) (the stage asked nothing) - and publishes parts of it and reports lines from it. This action gives both, so
    that the stage role only names the facts it sets.
  - The boot stage (V(boot)) - whether the reboot runs now (due, O(reboot_ok), not check mode) or stays required (due and
    not allowed or in check mode, or a firmware change waiting for one), what is pending, a cold boot, the firmware and GPU
    host stack parts; its report is what the ConnectX firmware still needs, what the GPU host stack and ACS decided, the
    host daemons it stops and a cold boot due.
  - The SR-IOV/VFIO stage (V(sriov_vfio)) - the devices bound, their companions, the isolation and the VF part; its report
    is the VFs bound once they exist (check mode) and why the devices cannot go to different tenants.
  - The tenants stage (V(tenants)) - the plan, the domains that are not tenants, the removed tenants and those to restart;
    its report is one message of labelled parts, each left out when empty (what a preview assumes, defined tenants kept or
    re-planned, foreign domains, tenants that do not fit, where each tenant's VFs sit from its GPU, in a preview the NCCL
    each guest stage writes and the VF settings, restarts due).
  - The libvirt host role's hugetlbfs mounts (V(libvirt_mounts)) - the result only.
  - The boot stage's check after its reboot (V(boot_settled)) - its iommu_grub call in check mode, given as O(run)
    alone; the task fails where the new kernel is not yet as the stage wants it (the check failed, a reboot still
    required, hugepage pools to change or not allocated as requested), naming each in RV(unsettled).
  - Runs on the controller; it asks nothing of the host and changes nothing. An action plugin; this file holds its
    documentation.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes
  - gpuvirt.tenancy.attributes.PLATFORM
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing changed the host, so RV(host_changed) is false and a reboot due stays required.
  diff_mode:
    support: none
options:
  stage:
    description: The host stage.
    type: str
    required: true
    choices: [boot, sriov_vfio, tenants, libvirt_mounts, boot_settled]
  checked:
    description:
      - The registered result of the stage's M(gpuvirt.tenancy.gate_check) task (a skipped one is no answer).
      - Required for every stage but V(boot_settled), which takes none.
    type: dict
  run:
    description:
      - The registered result of the stage's M(gpuvirt.tenancy.stage_call) task, or V(null) where it did not run.
      - For V(boot_settled), the registered result of the boot stage's check after its reboot.
    type: dict
  reboot_ok:
    description: The boot stage only - whether a reboot is allowed now (the role's C(<role>_reboot_ok)).
    type: bool
    default: false
  preview:
    description: The tenants stage only - a preview (the report shows the VF settings and the NCCL each guest stage writes).
    type: bool
    default: false
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Take the call's result (the gate's, when it checked this call)
  gpuvirt.tenancy.stage_result:
    stage: tenants
    checked: "{{ __tenant_vms_checked }}"
    run: "{{ __tenant_vms_run | default(none) }}"
    preview: "{{ tenant_vms_preview }}"
  register: __tenant_vms_taken

- name: Report what the stage decided
  ansible.builtin.debug:
    msg: "{{ __tenant_vms_taken.report }}"
  when: __tenant_vms_taken.report | length > 0
"""

RETURN = r"""
unsettled:
  description: The boot stage's check after its reboot - what it still finds to do, one line each; empty when settled.
  returned: O(stage=boot_settled)
  type: list
  elements: str
  sample: ["2M pages on node 0: 1000 allocated of 2048 requested"]
result:
  description: The result the stage takes (the gate's check or the call's), V({}) when the stage asked nothing.
  returned: success
  type: dict
stage_changed:
  description: Whether that result changed (or, in check mode, would change) the host.
  returned: success
  type: bool
host_changed:
  description: Whether a host model read before the stage no longer holds (the result changed the host); never in check mode.
  returned: success
  type: bool
report:
  description:
    - What the stage reports beyond its changes; empty when it has nothing to say.
    - Lines for the boot and SR-IOV/VFIO stages; labelled parts (one-key dicts) for the tenants stage.
  returned: success
  type: list
  elements: raw
reboot_now:
  description: The boot stage - a reboot is due and allowed outside check mode.
  returned: O(stage=boot)
  type: bool
reboot_required:
  description: The boot stage - a reboot stays due (not allowed, check mode, or a firmware change waiting for one).
  returned: O(stage=boot)
  type: bool
pending:
  description: The boot stage - what the reboot is for.
  returned: O(stage=boot)
  type: list
  elements: str
cold_boot_required:
  description: The boot stage - a ConnectX firmware setting needs a power cycle.
  returned: O(stage=boot)
  type: bool
firmware_state:
  description: The boot stage - the firmware part of the result (empty lists when it had no ConnectX work).
  returned: O(stage=boot)
  type: dict
gpu_stack_plan:
  description: The boot stage - the GPU host stack part of the result.
  returned: O(stage=boot)
  type: dict
bound:
  description: The SR-IOV/VFIO stage - the devices on vfio-pci.
  returned: O(stage=sriov_vfio)
  type: list
  elements: raw
companions:
  description: The SR-IOV/VFIO stage - the functions bound with them, of their IOMMU groups.
  returned: O(stage=sriov_vfio)
  type: list
  elements: raw
isolation:
  description: The SR-IOV/VFIO stage - whether the devices can go to different tenants, and why not.
  returned: O(stage=sriov_vfio)
  type: dict
sriov:
  description: The SR-IOV/VFIO stage - the VF part of the result.
  returned: O(stage=sriov_vfio)
  type: dict
plan:
  description: The tenants stage - the plan.
  returned: O(stage=tenants)
  type: dict
foreign:
  description: The tenants stage - the domains that are not tenants, and what they hold.
  returned: O(stage=tenants)
  type: dict
removed:
  description: The tenants stage - the tenants removed.
  returned: O(stage=tenants)
  type: list
  elements: str
restart_required:
  description: The tenants stage - running tenants that keep part of their change until restarted.
  returned: O(stage=tenants)
  type: list
  elements: str
"""
