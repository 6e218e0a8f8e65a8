# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    """The host seam's option, shared by every module that reads or changes the host."""

    DOCUMENTATION = r"""
options:
  root:
    description:
      - Directory under which the module reads and changes the host's files (C(/sys), C(/proc),
        C(/etc), C(/dev)); C(/) is the machine itself.
      - Any other directory is a captured or fake host tree (C(playbooks/files/capture_host.py) writes
        one); reads and file edits go under it, and steps that only make sense on the running
        machine (daemon reloads, bootloader updates, service restarts) are skipped.
      - It must be an existing directory; anything else is an error and nothing is changed.
    type: path
    default: /
"""
