#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stage_call
short_description: Make a host stage's one module call with its options given as one dict
version_added: 0.2.0
description:
  - Runs the module of a host stage (V(boot) is M(gpuvirt.tenancy.iommu_grub), V(sriov_vfio) is
    M(gpuvirt.tenancy.vfio_bind), V(tenants) is M(gpuvirt.tenancy.tenant_domain)) on the host with O(options), the
    options M(gpuvirt.tenancy.gate_check) built from the stage role's inputs and handed back where the preflight gate's
    check did not answer the call. A stage role so lists none of its call's options.
  - The call may be given as O(inputs) instead, the stage role's inputs, from which the action builds the options as
    M(gpuvirt.tenancy.gate_check) does - so a role whose call the gate does not check, the standalone C(host_sriov)'s
    (V(sriov), M(gpuvirt.tenancy.sriov_vfs) for every PF), builds and makes its call
    in one task. A bad input fails the task naming it, before any module runs.
  - The module gets the play's C(module_defaults) as a task naming it would (its own, and those of its action groups
    C(group/gpuvirt.tenancy.all) and C(group/gpuvirt.tenancy.libvirt)); O(options) win over them.
  - The result is the module's own. Check mode, diff and C(async) with C(poll) work as for a task of the module.
  - An action plugin; this file holds its documentation.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
attributes:
  check_mode:
    details:
      - The stage's module runs in check mode.
  diff_mode:
    details:
      - The differences of the stage's module.
options:
  stage:
    description: The host stage whose module runs.
    type: str
    required: true
    choices: [boot, sriov_vfio, tenants, libvirt_mounts, sriov]
  options:
    description:
      - The options of the stage module's call (RV(gpuvirt.tenancy.gate_check#module:options)).
      - Give either O(options) or O(inputs).
    type: dict
  inputs:
    description:
      - The stage role's inputs (its variables without the role's prefix), as M(gpuvirt.tenancy.stage_options) takes them.
      - Give either O(options) or O(inputs).
    type: dict
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Build the tenants stage's call and take the gate's check of it
  gpuvirt.tenancy.gate_check:
    check: "{{ preflight_stage_checks_read.tenants | default({}) }}"
    stage: tenants
    inputs: "{{ __tenant_vms_inputs }}"
  register: __tenant_vms_checked

- name: The tenants stage's call, where the gate did not answer it
  gpuvirt.tenancy.stage_call:
    stage: tenants
    options: "{{ __tenant_vms_checked.options }}"
  async: 3600
  poll: 15
  when: not __tenant_vms_checked.answered

- name: The VFs of every PF and the tenants' VF settings, one sriov_vfs call built from the role's inputs
  gpuvirt.tenancy.stage_call:
    stage: sriov
    inputs:
      pfs: "{{ gpuvirt_sriov_pfs }}"
      tenants: "{{ gpuvirt_tenants }}"
      autoprobe: false
      persist: true
      force: false
"""

RETURN = r"""
changed:
  description: Whether the stage's module changed the host (or would, in check mode).
  returned: always
  type: bool
  sample: true
"""
