# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    """The extra PCI ids the host model classifies as GPUs and NICs (modules that read the host model)."""

    DOCUMENTATION = r"""
options:
  gpu_ids:
    description:
      - Extra C(vendor:device) PCI ids to report as GPUs, besides NVIDIA display controllers.
    type: list
    elements: str
    default: []
  nic_ids:
    description:
      - Extra C(vendor:device) PCI ids to report as NICs, besides network controllers.
    type: list
    elements: str
    default: []
"""
