#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: libvirt_service
short_description: The libvirt host role's read of libvirt's service, and what it then does
version_added: 0.2.0
description:
  - The read-then-decide step of the role P(gpuvirt.tenancy.libvirt_host#role) - the service question of
    M(gpuvirt.tenancy.tenant_domain_info)'s O(gpuvirt.tenancy.tenant_domain_info#module:service) built from O(name),
    O(uefi) and O(packages) (the preflight gate asks the same one, P(gpuvirt.tenancy.libvirt_gate_query#filter)),
    then the service as read.
  - The read is O(read) (the play's read, the preflight gate's) where it answers that question - made for the same
    service, packages, UEFI and O(uri) - and nothing runs on the host; else one
    M(gpuvirt.tenancy.tenant_domain_info) read on the host, which gets the play's C(module_defaults) as a task naming
    it would.
  - From the read, what the role does - RV(install) (a package missing), RV(start) (a package missing, the service not
    enabled or not active), RV(check) (libvirt did not answer) and RV(apply) (anything at all, a hugetlbfs mount of
    O(mounts) included). On a host where systemd does not run and libvirt answers with nothing missing, nothing is due
    to the service. A host whose packages neither C(dpkg) nor C(rpm) list fails the task, naming the fix.
  - With O(preview) (a preview against a captured host tree, which has no libvirt to ask), nothing is read - the task
    says, one line each, what the role changes on a host (each hugetlbfs mount of O(mounts), the daemon's start or
    restart, OVMF where O(uefi)), shown as M(ansible.builtin.debug) shows its message.
  - An action plugin; this file holds its documentation.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes
  - gpuvirt.tenancy.attributes.PLATFORM
attributes:
  check_mode:
    support: full
    details:
      - The read changes nothing; it runs in check mode too.
  diff_mode:
    support: none
options:
  name:
    description: The libvirt daemon's service name (the role's C(libvirt_host_service)).
    type: str
    default: libvirtd
  uefi:
    description: Whether the tenants need OVMF (the role's C(libvirt_host_uefi)); true, false or their text.
    type: bool
  packages:
    description: The packages libvirt needs; null for the OS family's list (M(gpuvirt.tenancy.tenant_domain_info)'s).
    type: list
    elements: str
  uri:
    description: The libvirt connection URI the read and the role's checks use.
    type: str
  read:
    description:
      - A read the play made already (M(gpuvirt.tenancy.tenant_domain_info)'s result with its C(service) and C(query)),
        taken where it answers the same question; V({}) for none.
    type: dict
    default: {}
  mounts:
    description: The hugetlbfs mounts the role makes (C([{size, path}]), the role's C(libvirt_host_hugetlbfs_mounts)).
    type: list
    elements: dict
    default: []
  preview:
    description: A preview under a captured host tree - say what the role changes, read nothing.
    type: bool
    default: false
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read libvirt's service unless the preflight gate read it for the same question, and decide
  gpuvirt.tenancy.libvirt_service:
    name: libvirtd
    uefi: true
    uri: qemu:///system
    read: "{{ preflight_libvirt_read | default({}) }}"
    mounts: [{size: 1G, path: /dev/hugepages1G}]
  register: libvirt_state

- name: Start libvirtd where it is due
  ansible.builtin.service:
    name: libvirtd
    state: started
    enabled: true
  when: libvirt_state.start
"""

RETURN = r"""
service:
  description: The service as read (M(gpuvirt.tenancy.tenant_domain_info)'s RV(gpuvirt.tenancy.tenant_domain_info#module:service)).
  returned: success, without O(preview)
  type: dict
  sample: {family: Debian, packages: [libvirt-daemon-system, ovmf], missing: [], enabled: enabled, active: active, answers: true}
query:
  description: The service question asked (or answered by O(read)).
  returned: success, without O(preview)
  type: dict
  sample: {name: libvirtd, uefi: true}
read_here:
  description: Whether the service was read on the host (false where O(read) answered the question, and with O(preview)).
  returned: always
  type: bool
install:
  description: A package is missing.
  returned: success, without O(preview)
  type: bool
start:
  description: The service is to be started and enabled (a package missing, not enabled or not active).
  returned: success, without O(preview)
  type: bool
check:
  description: libvirt did not answer; the role checks it again after a start.
  returned: success, without O(preview)
  type: bool
apply:
  description: The role has anything to do (a mount asked, or the service due).
  returned: success, without O(preview)
  type: bool
msg:
  description: With O(preview), what the role changes on a host, one line each.
  returned: with O(preview)
  type: list
  elements: str
"""
