#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_fleet
short_description: The GID index compared across the play's guests, and what this guest's NCCL file still needs
version_added: 0.2.0
description:
  - Compares the RoCE v2 + IPv4 GID index across the play's hosts (C(ansible_play_hosts)) from each one's registered
    M(gpuvirt.tenancy.mlx_rocev2) result (O(result_var) in C(hostvars); hosts without one are left out), in host name
    order - RV(rows) (host, device, port, index, GID, type, IPv4), RV(expected) (an integer O(gid_index), else the index
    most hosts have, ties to the first host), RV(outliers) and RV(report) (the C(uniform) policy's failure message).
  - Decides what this host's M(gpuvirt.tenancy.nccl_env) call writes after the comparison (RV(write)) - the fleet's index
    (V(auto), the fleet's under the C(uniform) policy, else the given one), the hosts block's entries (every row with an
    IPv4 GID as C(<ipv4> <host><suffix>)), and whether the call must run at all (what differs from the guest's own decision,
    the first call's C(nccl_env) result).
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  result_var:
    description: The name every host registered its M(gpuvirt.tenancy.mlx_rocev2) result under (this host's is its decision).
    type: str
    required: true
  gid_index:
    description: V(discover), V(auto) or a whole number (the role's C(guest_rdma_gid_index)).
    type: raw
    required: true
  gid_policy:
    description: V(uniform) (one index on every host) or V(per_host).
    type: str
  hosts_suffix:
    description: What each host name gets in the hosts block (V(-rdma)).
    type: str
  options:
    description: The first call's C(nccl_env) options (M(gpuvirt.tenancy.rdma_calls)'s); given, RV(write) holds the second call's options.
    type: dict
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Build the host -> index -> GID -> type table and decide what the NCCL file gets
  gpuvirt.tenancy.rdma_fleet:
    result_var: rocev2
    gid_index: discover
    gid_policy: uniform
    hosts_suffix: -rdma
    options: "{{ calls.rocev2.nccl_env }}"
  register: fleet
"""

RETURN = r"""
rows:
  description: One row per host with a result - C(host), C(device), C(port), C(index), C(gid), C(type), C(ipv4).
  returned: success
  type: list
  elements: dict
expected:
  description: The index compared with (none when no host has one).
  returned: success
  type: int
outliers:
  description: The hosts whose index differs.
  returned: success
  type: list
  elements: str
report:
  description: The C(uniform) policy's failure message (the table, each outlier's row marked).
  returned: success
  type: str
write:
  description:
    - What this host's M(gpuvirt.tenancy.nccl_env) call writes - C(gid_index), C(hosts_entries), C(reasons) (what differs),
      C(pending) (whether the call runs) and, with O(options), C(options) (the call's options).
  returned: success
  type: dict
"""
