#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_reboot
short_description: Reboot a host and wait for it, showing a status line while it waits
version_added: 0.2.0
description:
  - M(ansible.builtin.reboot), with a status line while it waits for the host to come back. The builtin
    reports its attempts to reach the host only at C(-vvv); a GPU server's reboot (firmware, memory
    training of a large host) or a QEMU/TCG lab's takes minutes, silent otherwise.
  - "After a failed attempt to reach the host, when O(status_interval) seconds or more passed since the
    wait began or since the last line, it prints
    C(REBOOT WAIT HOST: N s of BOUND s, not back yet (STEP: last error))."
  - With O(cmdline_wanted) or O(cmdline_unwanted), the reboot is proven as well - the boot ids read before and
    after it (the builtin's own reads) differ, and C(/proc/cmdline), read once after it, holds every argument of
    O(cmdline_wanted) as written and none of O(cmdline_unwanted); otherwise the task fails, naming the boot ids,
    the running command line and what it lacks or still has.
  - Everything else is M(ansible.builtin.reboot)'s, which this action runs (the reboot command, the new
    boot time check, the test command, the options below and the result).
  - An action plugin; this file holds its documentation.
options:
  status_interval:
    description:
      - Seconds between the status lines while the host is not back; V(0) prints none.
      - A line comes after a failed attempt to reach the host, so lines are at least this far apart and at
        most one connection timeout plus the builtin's retry pause (up to 12 s) later than due.
      - A whole number, or a string of its digits; a boolean, a fraction or a negative number fails the task
        before the reboot, naming the value given. The task's arguments are not changed, so a retried task
        (C(until)/C(retries)) keeps this option.
    type: int
    default: 30
  cmdline_wanted:
    description:
      - Kernel command-line arguments the new boot must run with (the boot stage gives its result's C(args_missing)).
      - A list of strings; anything else fails the task before the reboot, naming the value.
    type: list
    elements: str
  cmdline_unwanted:
    description:
      - Kernel command-line arguments the new boot must no longer run with (the boot stage gives its result's
        C(args_unwanted)).
      - A list of strings; anything else fails the task before the reboot, naming the value.
    type: list
    elements: str
  reboot_timeout:
    description:
      - Seconds to wait for the host to come back (the new boot time), then again for the test command to succeed.
    type: int
    default: 600
  msg:
    description: Message broadcast to the host's users before the reboot.
    type: str
    default: Reboot initiated by Ansible
  pre_reboot_delay:
    description: Seconds to wait before the reboot (passed to the shutdown command; minutes on Linux, rounded down).
    type: int
    default: 0
  post_reboot_delay:
    description: Seconds to wait after the host is back, before the result returns.
    type: int
    default: 0
  connect_timeout:
    description: Seconds each attempt to reach the host may wait for its connection; the connection's own setting when not given.
    type: int
  test_command:
    description: Command that must succeed on the host once it is back.
    type: str
    default: whoami
  search_paths:
    description: Directories to look for the C(shutdown) command in.
    type: list
    elements: str
    default: ['/sbin', '/bin', '/usr/sbin', '/usr/bin', '/usr/local/sbin']
  boot_time_command:
    description: Command whose output changes with each boot; its output before and after tells that the host rebooted.
    type: str
    default: cat /proc/sys/kernel/random/boot_id
  reboot_command:
    description: Command (with its arguments) that reboots the host; the distribution's C(shutdown) command when not given.
    type: str
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
attributes:
  check_mode:
    details:
      - In check mode nothing reboots; the result says it would.
  diff_mode:
    support: none
notes:
  - The connection must not be C(local) (the controller would reboot), as for M(ansible.builtin.reboot).
  - The status lines are printed by the controller from the worker of the host's task (Ansible's display),
    so they show in C(ansible-playbook) output, in AWX job output and with any stdout callback that prints
    display lines.
seealso:
  - module: ansible.builtin.reboot
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Reboot into the new kernel command line, a status line every 30 s while it waits
  gpuvirt.tenancy.host_reboot:
    msg: new kernel command line
    reboot_timeout: 900
    status_interval: 30
  register: rebooted

- name: Say how long it took
  ansible.builtin.debug:
    msg: "back after {{ rebooted.elapsed }} s"

- name: Reboot, and fail unless the new kernel runs with intel_iommu=on and without nouveau.modeset=1
  gpuvirt.tenancy.host_reboot:
    cmdline_wanted: [intel_iommu=on, iommu=pt]
    cmdline_unwanted: [nouveau.modeset=1]
"""

RETURN = r"""
rebooted:
  description: Whether the host rebooted.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds the reboot and the wait took.
  returned: always
  type: int
  sample: 136
boot_id_before:
  description: The boot id read before the reboot.
  returned: with O(cmdline_wanted) or O(cmdline_unwanted), after a reboot
  type: str
  sample: 3f1c6a0e-8d6b-4b57-9a52-3c1e9f0d2a11
boot_id:
  description: The boot id read after the reboot.
  returned: with O(cmdline_wanted) or O(cmdline_unwanted), after a reboot
  type: str
  sample: 8b0d2f4e-1c7a-4e39-b6d5-0f2a9c3e7b48
cmdline:
  description: The running kernel's command line after the reboot (C(/proc/cmdline)).
  returned: with O(cmdline_wanted) or O(cmdline_unwanted), after a reboot
  type: str
  sample: BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on iommu=pt
problems:
  description: What the proof found wrong, one line each; empty when the reboot is proven.
  returned: with O(cmdline_wanted) or O(cmdline_unwanted), after a reboot
  type: list
  elements: str
  sample: ["the new command line lacks iommu=pt"]
"""
