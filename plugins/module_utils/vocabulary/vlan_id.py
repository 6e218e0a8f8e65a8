# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An 802.1Q VLAN id as an input, the one rule for every module: 1-4094 (IEEE 802.1Q reserves
0 and 4095). Where a VF's VLAN is set (sriov_vfs), 0 means "no VLAN" and clears it."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

VLAN_MIN, VLAN_MAX = 1, 4094


def check_vlan(value, what, none_is_zero=False):
    """``value`` -> the VLAN id (an int), or None when not given. ``none_is_zero``: 0 is taken
    as no VLAN (returned as 0), where the setting clears a VF's VLAN."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            number = int(str(value), 10) if not isinstance(value, (bool, float)) else None
        except ValueError:
            number = None
        if number is None:
            raise InputError("%s: %r is not a VLAN id (a whole number, %d-%d)" % (what, value, VLAN_MIN, VLAN_MAX))
        value = number
    if value == 0 and none_is_zero:
        return 0
    if not VLAN_MIN <= value <= VLAN_MAX:
        raise InputError("%s: %r is not a VLAN id (%d-%d; 0 and 4095 are reserved by 802.1Q%s)"
                         % (what, value, VLAN_MIN, VLAN_MAX, "; 0 for no VLAN" if none_is_zero else ""))
    return value
