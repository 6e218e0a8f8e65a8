#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: report_file
short_description: Write a JSON report file on the controller, only when it differs
version_added: 0.2.0
description:
  - Writes O(data) as JSON (two-space indented, keys sorted, a final newline) to O(dest) on the controller,
    atomically (a temporary file in the same directory, then a rename), creating the directory; a file that already
    holds that text is left as it is.
  - The preflight role writes each host's JSON report with it. A report is not a change to the host, so the result
    is never C(changed), in check mode too (the report of a preview is written).
  - Runs on the controller and asks nothing of the host; unlike M(ansible.builtin.copy) it runs no module, which
    spares each host two module runs. An action plugin; this file holds its documentation.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes
  - gpuvirt.tenancy.attributes.PLATFORM
attributes:
  check_mode:
    support: full
    details:
      - The report is written in check mode too; it is a file of the controller, not of the host.
  diff_mode:
    support: none
options:
  data:
    description: The report.
    type: dict
    required: true
  dest:
    description: The report file's absolute path on the controller.
    type: path
    required: true
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Write the host's JSON report on the controller
  gpuvirt.tenancy.report_file:
    data: "{{ preflight_report }}"
    dest: "{{ playbook_dir }}/preflight-reports/{{ inventory_hostname }}.json"
"""

RETURN = r"""
written:
  description: Whether the file was written (false when it already held the report).
  returned: success
  type: bool
  sample: true
dest:
  description: The report file's path.
  returned: success
  type: str
  sample: /srv/ansible/preflight-reports/dgx01.json
"""
