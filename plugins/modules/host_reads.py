#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_reads
short_description: Make again the reads a preflight gate run made of the host, and digest their answers
version_added: 0.2.0
description:
  - Makes each read of O(records) on the host again (a file or sysfs attribute, a directory listing, a link, a program
    that only reads, a libvirt read) and returns a digest of each answer, in order.
  - The action of M(gpuvirt.tenancy.preflight_info) calls it with the reads the gate's last run with the same options
    made (that run's C(host_reads)); where every digest is the one that run had, the gate's result then is its result now,
    and the gate's own call, which compiles every stage's checks, is not made. Not meant to be called by hand.
  - Ships only the host seam (the code that reads the host), not the stages' code.
options:
  records:
    description:
      - The reads, as M(gpuvirt.tenancy.preflight_info) recorded them (V([part, [[name, args, kwargs]]]), part one of
        V(fs), V(host), V(commands), V(libvirt)). Anything else is refused before any read is made.
    type: list
    elements: raw
    required: true
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.host
seealso:
  - module: gpuvirt.tenancy.preflight_info
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read the kernel's command line and the list of PCI devices again, and digest the answers
  gpuvirt.tenancy.host_reads:
    records:
      - [fs, [[read, [/proc/cmdline], {}]]]
      - [fs, [[listdir, [/sys/bus/pci/devices], {}]]]
  register: __reads
"""

RETURN = r"""
digests:
  description: The digest of each read's answer (its value, or the error it raised), in the order of O(records).
  returned: success
  type: list
  elements: str
  sample: ["3f1c0a9b2e4d5f60", "a07e52c19d3b4e81"]
python:
  description: The major and minor version of the Python that made the reads.
  returned: success
  type: list
  elements: int
  sample: [3, 11]
"""

import sys

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.reads import read_again
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module

MODULE_ARGS = dict(argument_spec=dict(root=dict(type="path", default="/"),
                                      records=dict(type="list", elements="raw", required=True)))


def host_reads(params, host, run):  # pylint: disable=unused-argument
    return {"digests": read_again(host, params["records"]), "python": list(sys.version_info[:2])}


def main(host=None):
    run_module(MODULE_ARGS, host_reads, host=host)


if __name__ == "__main__":
    main()
