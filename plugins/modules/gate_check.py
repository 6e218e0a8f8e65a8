#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gate_check
short_description: Take the preflight gate's check of a host stage's call as that call's result
version_added: 0.2.0
description:
  - The preflight gate (M(gpuvirt.tenancy.preflight_info) with O(gpuvirt.tenancy.preflight_info#module:stage_checks)) checks
    each host stage's call, with the options this run gives it, in check mode inside its one call. This action answers
    a stage about to make its call with the gate's result, so that the stage makes no call of its own.
  - The call is given as O(options), or as O(stage) and O(inputs), the stage role's inputs, which the action maps to
    the options of the stage's module (the mapping the stage's call and M(gpuvirt.tenancy.stage_options) take too).
  - It answers only when the gate checked exactly these options, its check ran without error, and either the check
    changes nothing or the task runs in check mode (the stage's own call would then be the very check the gate made).
    Otherwise RV(answered) is false and the stage makes its call.
  - An answer is shown as the call's own result, its C(changed) and, with C(--diff), its differences.
  - The caller must only give a check made on the host as it is now; the host stages give it only while no stage of
    the play has changed the host since the gate.
  - Runs on the controller; it asks nothing of the host. An action plugin; this file holds its documentation.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
attributes:
  check_mode:
    details:
      - In check mode a check that would change something answers too, with C(changed) true.
  diff_mode:
    details:
      - The differences of the gate's check, when the gate ran with C(--diff).
options:
  check:
    description:
      - One stage of the gate's RV(gpuvirt.tenancy.preflight_info#module:stage_checks) (C(module), C(options),
        C(changed), C(result), C(error)), or V({}) or V(null) when the gate checked none.
    type: dict
  options:
    description:
      - The options of the module call the stage would make now.
      - Give either this or O(stage) and O(inputs).
    type: dict
  stage:
    description:
      - The host stage whose call O(inputs) give; given with O(inputs), instead of O(options).
    type: str
    choices: [boot, sriov_vfio, tenants, libvirt_mounts]
  inputs:
    description:
      - The stage role's inputs, without the role's prefix (the role's internal C(__<role>_inputs)); with O(stage).
    type: dict
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Take the gate's check of exactly this call
  gpuvirt.tenancy.gate_check:
    check: "{{ preflight_stage_checks_read.sriov_vfio | default({}) }}"
    options: "{{ __vfio_options }}"
  register: __vfio_checked

- name: Build the tenants stage's call from its role's inputs and take the gate's check of it
  gpuvirt.tenancy.gate_check:
    check: "{{ preflight_stage_checks_read.tenants | default({}) }}"
    stage: tenants
    inputs: "{{ __tenant_vms_inputs }}"
  register: __tenant_vms_checked

- name: Make the call only where the gate did not answer it
  gpuvirt.tenancy.vfio_bind:
    sriov_pfs: "{{ __vfio_options.sriov_pfs }}"
    gpus: "{{ __vfio_options.gpus }}"
  register: __vfio_run
  when: not __vfio_checked.answered
"""

RETURN = r"""
answered:
  description: Whether the gate's check answers this call (then the stage makes no call).
  returned: always
  type: bool
  sample: true
options:
  description:
    - The options as given, or built from O(stage) and O(inputs) (a stage that builds them in this task makes its call
      with them when not RV(answered)).
  returned: always
  type: dict
  sample: {"devices": ["0000:82:00.0"]}
result:
  description: The gate's check-mode result of the call when RV(answered), else an empty dict.
  returned: always
  type: dict
  sample: {"changed": false, "reboot_required": false}
"""
