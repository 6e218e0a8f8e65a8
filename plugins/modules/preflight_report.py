#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_report
short_description: The preflight report of a host, from the gate's one read and the inventory
version_added: 0.2.0
description:
  - Makes the per-host preflight report of the role P(gpuvirt.tenancy.preflight#role) from O(info), the registered
    result of M(gpuvirt.tenancy.preflight_info), and O(desired), the inventory's desired state.
  - The tenant plan is the one the gate's check of the tenants stage made on the host where it is the plan of the host
    as the host stages will leave it (a preview's check, or a host whose boot and SR-IOV/VFIO checks change nothing),
    not made twice; else the planner runs here over the host model with the wanted VFs and hugepages added (as the filter
    P(gpuvirt.tenancy.preflight_projection#filter) gives it), with the GPUs given to tenants and the PFs that get VFs. A
    refusal of the planner is the report's reason, not a failed task; so is a stage's refusal of its call that the gate's
    check found where the stage itself would give it later in the run.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  info:
    description: The registered result of M(gpuvirt.tenancy.preflight_info) (its C(topology), C(firmware), C(stage_checks)).
    type: dict
    required: true
  desired:
    description:
      - The desired state the report checks against - C(host), C(gpus), C(sriov_pfs), C(hugepages), C(tenants),
        C(tenants_from), C(require_iommu_enabled), C(host_reserved_mb) (the role's inputs of those names).
      - C(tenants), C(gpus), C(sriov_pfs) and C(hugepages) also make the plan; C(gpus) unset is every GPU.
    type: dict
    required: true
  policy:
    description: The planner's policy (C(gpuvirt_tenant_policy)).
    type: dict
    default: {}
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read the host
  gpuvirt.tenancy.preflight_info:
    gpu_ids: ["10de:20b0"]
  register: info

- name: Plan the tenants and build the report
  gpuvirt.tenancy.preflight_report:
    info: "{{ info }}"
    policy: "{{ gpuvirt_tenant_policy | default({}) }}"
    desired:
      host: "{{ inventory_hostname }}"
      gpus: "{{ gpuvirt_gpus | default(none) }}"
      sriov_pfs: "{{ gpuvirt_sriov_pfs | default([]) }}"
      hugepages: "{{ gpuvirt_hugepages | default([]) }}"
      tenants: "{{ gpuvirt_tenants | default([]) }}"
  register: built

- name: Show it
  ansible.builtin.debug:
    msg: "{{ built.report.table.split('\n') }}"
"""

RETURN = r"""
report:
  description:
    - The report - C(host), C(status) (the worst check's), C(checks) (each with C(name), C(status), C(detail) and C(fix)),
      C(failures), C(warnings), C(fixes), C(boot_stage), each check's section (C(iommu), C(plan), ...) and C(table), the
      text the role prints.
  returned: success
  type: dict
passed:
  description: No check failed (C(report.status) is not C(fail)).
  returned: success
  type: bool
"""
