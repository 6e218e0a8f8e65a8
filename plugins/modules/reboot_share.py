#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: reboot_share
short_description: Share a rolling play's reboot budget among the batch's hosts that need a reboot
version_added: 0.2.0
description:
  - The rolling bring-up's reboot budget (C(gpuvirt_reboot_budget), docs/fleet.md) - at most O(budget) hosts of this
    play's batch (C(ansible_play_batch)) reboot now, those whose boot stage needs a reboot (each host's
    C(host_boot_reboot_required), read from C(hostvars)), in batch order. Counting only the hosts that need one is
    what lets every host converge within ceil(hosts needing a reboot / budget) runs.
  - Every host of the batch runs this task after its boot stage's call (so that each host's flag is set); each gets
    the same share and whether it is in it (RV(reboot_now)).
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  budget:
    description:
      - How many hosts of the batch may reboot now; a whole number, 0 or more (or its text). Anything else fails the
        task, naming C(gpuvirt_reboot_budget).
    type: int
    required: true
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Share the batch's reboot budget among its hosts that need a reboot
  gpuvirt.tenancy.reboot_share:
    budget: "{{ gpuvirt_reboot_budget }}"
  register: budget_share

- name: Reboot the hosts the budget lets
  ansible.builtin.include_role:
    name: gpuvirt.tenancy.host_boot
  vars:
    host_boot_reboot_ok: true
  when: budget_share.reboot_now
"""

RETURN = r"""
rebooting:
  description: The hosts of the batch that reboot now, in batch order.
  returned: success
  type: list
  elements: str
  sample: [dgx01, dgx03]
reboot_now:
  description: Whether this host is one of them.
  returned: success
  type: bool
"""
