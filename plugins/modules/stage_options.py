#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stage_options
short_description: The options of a host stage's one call, from its role's inputs
version_added: 0.2.0
description:
  - Maps a host stage role's inputs (the stage's desired state as the inventory says it) to the options of the stage's
    one module call, for the preflight gate (M(gpuvirt.tenancy.preflight_info) with
    O(gpuvirt.tenancy.preflight_info#module:stage_checks)) to check before the stage runs.
  - The mapping is the one M(gpuvirt.tenancy.gate_check) applies when the stage runs, so the gate checks the call the
    stage will send. An input that is an option of the stage's module takes that option's type from the module's own
    argument spec; unset options are left out (the module's defaults apply).
  - The boot stage (V(boot)) is a M(gpuvirt.tenancy.iommu_grub) call - the options given as they are, the GPU host stack
    (O(gpuvirt.tenancy.iommu_grub#module:gpu_stack)), the ConnectX firmware when C(firmware_sriov) and C(sriov_pfs) ask
    for it, ACS per path when C(acs) asks for it, and the hugepages call when pages or mounts are asked.
  - The SR-IOV/VFIO stage (V(sriov_vfio)) is a M(gpuvirt.tenancy.vfio_bind) call with the inputs as the options of the
    same name, or V({}) (no call) when they name no PF, GPU or device.
  - The tenants stage (V(tenants)) is a M(gpuvirt.tenancy.tenant_domain) call with
    O(gpuvirt.tenancy.tenant_domain#module:tenants) - the tenants as given, the planner policy with the GPU pool
    (C(gpus)) and the PFs whose VFs are given (C(vf_pfs)), the settings of every tenant, and in a preview
    O(gpuvirt.tenancy.tenant_domain#module:preview).
  - The libvirt host role's hugetlbfs mounts (V(libvirt_mounts), the tenants stage's, before libvirtd starts) are a
    M(gpuvirt.tenancy.hugepages) call with O(gpuvirt.tenancy.hugepages#module:mounts) only (no pages, no boot-time
    arguments, the mount units enabled at every boot), or V({}) (no call) when no mount is asked for.
  - The standalone C(host_sriov) role's call (V(sriov), which the gate does not check) is a M(gpuvirt.tenancy.sriov_vfs)
    call - every PF of C(pfs) (C([{pf, num_vfs, autoprobe}])) with its count, its own C(autoprobe) or the role's,
    C(persist) and C(force), and the settings of each VF a present tenant of C(tenants) names by address
    (O(gpuvirt.tenancy.sriov_vfs#module:vf_settings)).
  - Decides nothing about the host.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  stage:
    description: The host stage.
    type: str
    required: true
    choices: [boot, sriov_vfio, tenants, libvirt_mounts, sriov]
  inputs:
    description:
      - The stage role's inputs without the role's prefix (the role's internal C(__<role>_inputs)), every one given.
      - A bad input fails the task, naming the input and the fix.
    type: dict
    required: true
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: The tenants stage's call, for the preflight gate
  gpuvirt.tenancy.stage_options:
    stage: tenants
    inputs: "{{ __tenant_vms_inputs }}"
  register: __tenant_vms_built
"""

RETURN = r"""
module:
  description: The module of the stage's call.
  returned: success
  type: str
  sample: gpuvirt.tenancy.tenant_domain
options:
  description: The options of the stage's call (without C(root) and C(uri), which the play's module_defaults give).
  returned: success
  type: dict
  sample: {"tenants": [{"name": "t1", "vcpus": 8, "memory_mb": 65536, "gpus": 1}], "policy": {}, "vf_persist": true}
"""
