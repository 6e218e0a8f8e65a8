# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe affinity levels between two devices, as ``nvidia-smi topo -m`` prints them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# nearest first: one PCIe switch, several switches, the host bridge, the NUMA node, across nodes
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def rank(level):
    """0 for PIX .. 4 for SYS; len(LEVELS) for an unknown level (farthest)."""
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)
