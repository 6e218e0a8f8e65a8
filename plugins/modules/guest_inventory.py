#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: guest_inventory
short_description: The tenants' guests that join the inventory, and those that did not answer SSH
version_added: 0.2.0
description:
  - Decides which running tenants' guests join the controller's inventory (the role C(tenant_guests)) - a tenant with
    C(state) V(running), an C(image) and a C(guest.address) - and gives their C(add_host) entries - inventory name (the
    tenant's), group C(gpuvirt_guests), C(ansible_host) (the address without its prefix), C(ansible_user) and
    C(ansible_port) of the access, with the access's C(jump) (default true) an C(ansible_ssh_common_args) with
    C(ProxyJump) through the GPU host, the GPU host's name (C(gpuvirt_tenant_host)), the console log
    (C(gpuvirt_guest_console_log)), the MAC of the tenant's RDMA NIC (C(gpuvirt_guest_vf_mac) - its first VF in the plan,
    else its C(mac), else its C(data_nic)'s), and for a tenant with VFs its NCCL settings of a VM
    (C(gpuvirt_guest_gdr_level), C(gpuvirt_guest_relaxed_ordering), C(gpuvirt_guest_pci_links)).
  - Tenants the inventory lists already (C(groups.all) of the task's variables) are left to it; a tenant's name that is the
    controller's (V(localhost)) or a group's, or that C(add_host) would not take as one host name, fails naming the
    tenant, as does a bad port, boolean or jump host; then no host is added.
  - The tenants are read as the tenant records (the tenants stage reads them alike) - every entry and the rules over the
    list are checked once there, the guest's address, the state, the image, the MACs and the data NIC among them; an
    entry the record refuses, a running guest's or not, fails naming the tenant, the option and the fix, and no host is
    added.
  - Given O(waited) instead (the registered result of a looped C(ansible.builtin.wait_for) over the entries), it gives
    the guests that did not answer SSH, each named with its address, how long it was waited for and its console log on
    the GPU host, and how long each guest was waited for.
  - The role's C(ansible.builtin.add_host) task adds the hosts.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  tenants:
    description: The tenant list (C(gpuvirt_tenants)), each entry as the tenants stage takes it. Required unless O(waited) is given.
    type: list
    elements: dict
  access:
    description: The guests' access (C(gpuvirt_guest_access) - C(user), C(port), C(jump)).
    type: dict
  jump_host:
    description: The GPU host as the controller reaches it (C(name), C(address), C(user), C(port)), the SSH jump.
    type: dict
  plan:
    description: The tenants stage's plan (each tenant's VFs, for the MAC of its first VF and its NCCL settings).
    type: dict
  links:
    description:
      - The tenants stage's C(pci_links) (each tenant's host link facts, for its NCCL topology file).
      - Given, a tenant with VFs and no GPU gets the facts that say so; left out, no tenant gets link facts.
    type: dict
  add:
    description: Whether any host is added (the role's C(tenant_guests_add_hosts)); V(false) gives no entry.
    type: bool
    default: true
  waited:
    description:
      - The registered result of the looped C(ansible.builtin.wait_for) over the entries (each result with its C(item)).
      - Given, the action gives RV(unanswered) and RV(times) only, and takes no other option but O(host_name).
    type: dict
  host_name:
    description: With O(waited), the GPU host's name in the messages (default each entry's C(gpuvirt_tenant_host)).
    type: str
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Decide which running tenants' guests join the inventory
  gpuvirt.tenancy.guest_inventory:
    tenants: "{{ gpuvirt_tenants }}"
    access: "{{ gpuvirt_guest_access }}"
    jump_host: {name: "{{ inventory_hostname }}", address: "{{ ansible_host }}"}
    plan: "{{ tenant_vms_plan }}"
  register: guests

- name: Add them
  ansible.builtin.add_host: "{{ item }}"
  loop: "{{ guests.hosts }}"

- name: Take which guests did not answer SSH
  gpuvirt.tenancy.guest_inventory:
    waited: "{{ waited }}"
    host_name: "{{ inventory_hostname }}"
  register: answers
"""

RETURN = r"""
hosts:
  description: The C(ansible.builtin.add_host) entries of the guests that join the inventory, in the tenants' order.
  returned: without O(waited)
  type: list
  elements: dict
names:
  description: Their inventory names (the tenants' names), in the same order.
  returned: without O(waited)
  type: list
  elements: str
unanswered:
  description: One message per guest that did not answer SSH (skipped waits left out).
  returned: with O(waited)
  type: list
  elements: str
times:
  description: Each waited guest's name and the seconds it was waited for (V(?) where the result has none).
  returned: with O(waited)
  type: list
  elements: list
"""
