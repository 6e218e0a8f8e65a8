#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_layout
short_description: The gpu_mig role's mig_profile call, and the GPUs whose MIG mode change waits for a reboot
version_added: 0.2.0
description:
  - Maps the role C(gpu_mig)'s inputs to the options of its one M(gpuvirt.tenancy.mig_profile) call - O(layout) as the
    call's O(gpuvirt.tenancy.mig_profile#module:layout) when it is a list, as its
    O(gpuvirt.tenancy.mig_profile#module:config_file) and O(gpuvirt.tenancy.mig_profile#module:config) when it is a
    mapping that names a mig-parted v1 file; O(reset) and O(force) as given; O(nvidia_smi) only when set. It is the
    role's one check of its layout - an empty list, a string, or a mapping without both keys fails naming
    C(gpu_mig_layout).
  - Given O(result) instead (the registered M(gpuvirt.tenancy.mig_profile) result), it gives the bus ids of the GPUs whose
    MIG mode change waits for a reboot; with O(after) (the call made after the reboot), from that call where it ran.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  layout:
    description:
      - The layout (C(gpu_mig_layout)) - a M(gpuvirt.tenancy.mig_profile) layout list, or C({config_file, config}).
      - Required unless O(result) is given.
    type: raw
  reset:
    description: The call's O(gpuvirt.tenancy.mig_profile#module:reset).
    type: str
    default: auto
  force:
    description: The call's O(gpuvirt.tenancy.mig_profile#module:force).
    type: bool
    default: false
  nvidia_smi:
    description: The call's O(gpuvirt.tenancy.mig_profile#module:nvidia_smi); empty leaves it out (found on PATH).
    type: str
  result:
    description:
      - The registered result of the role's M(gpuvirt.tenancy.mig_profile) call.
      - Given, the action gives RV(waiting) and RV(reboot_required) only, and takes no other option but O(after).
    type: dict
  after:
    description: The registered result of the call made after the reboot (a skipped one is no call).
    type: dict
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Check the layout and build the mig_profile call
  gpuvirt.tenancy.mig_layout:
    layout: "{{ gpu_mig_layout }}"
    reset: auto
  register: call

- name: Apply the MIG layout
  gpuvirt.tenancy.mig_profile:
    layout: "{{ call.options.layout | default(omit) }}"
    config_file: "{{ call.options.config_file | default(omit) }}"
    config: "{{ call.options.config | default(omit) }}"
    reset: "{{ call.options.reset }}"
    force: "{{ call.options.force }}"
  register: applied

- name: Take the GPUs whose MIG mode change waits for a reboot
  gpuvirt.tenancy.mig_layout:
    result: "{{ applied }}"
  register: waits
"""

RETURN = r"""
options:
  description: The options of the M(gpuvirt.tenancy.mig_profile) call.
  returned: without O(result)
  type: dict
  sample: {layout: [{devices: all, mig_enabled: true, mig_devices: {3g.40gb: 2}}], reset: auto, force: false}
waiting:
  description: The bus ids of the GPUs whose MIG mode change waits for a reboot, in M(gpuvirt.tenancy.mig_profile)'s order.
  returned: with O(result)
  type: list
  elements: str
reboot_required:
  description: Whether any GPU waits (RV(waiting) is not empty).
  returned: with O(result)
  type: bool
"""
