#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_netdev
short_description: The netdev that carries a MAC, in gathered facts
version_added: 0.2.0
description:
  - Finds the netdev whose MAC is O(mac) in facts gathered with the C(network) subset (C(interfaces) and each
    C(<name>.macaddress)) - the tenant VF's netdev on which the role C(guest_rdma) makes its soft-RoCE device. A VLAN on the
    VF shares its MAC, so a name with a dot comes last.
  - Fails naming every netdev and its MAC when none carries O(mac).
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  facts:
    description: The gathered facts (C(ansible_facts), with the C(network) subset).
    type: dict
    required: true
  mac:
    description: The MAC (any case).
    type: str
    required: true
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read the netdevs and their MACs
  ansible.builtin.setup:
    gather_subset: ["!all", network]

- name: Find the netdev that carries the VF's MAC
  gpuvirt.tenancy.rdma_netdev:
    facts: "{{ ansible_facts }}"
    mac: "{{ gpuvirt_guest_vf_mac }}"
  register: vf
"""

RETURN = r"""
netdev:
  description: The netdev's name.
  returned: success
  type: str
  sample: enp7s0
"""
