# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the Fabric Manager is reached: the options of fabric_partition and of the tenants stage's
``fabric_manager``, apart from the code that runs ``fmpm`` (partition_call.py), so that a module's
argument spec names them without importing that code."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

FABRIC_MANAGER_OPTIONS = dict(
    fmpm=dict(type="path"),
    hostname=dict(type="str"),
)
