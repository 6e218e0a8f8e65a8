# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An Ethernet MAC address as an input: its form and the addresses no VF may be given.

The one place that reads a MAC address from a user (sriov_vfs, tenant_domain, the planner):
six pairs of hex digits separated by colons, any case, nothing before or after. The all-zero
address is what a VF shows when none is set (the kernel's "no MAC"), and a multicast address
(first byte odd, the broadcast address among them) is no station's: neither goes to a VF."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# \Z, not $: "$" also matches before a trailing newline
MAC_RE = re.compile(r"\A[0-9a-f]{2}(?::[0-9a-f]{2}){5}\Z")
ZERO_MAC = "00:00:00:00:00:00"
BROADCAST_MAC = "ff:ff:ff:ff:ff:ff"


def is_mac(value):
    """Whether ``value`` has the form of a MAC address (any case)."""
    return isinstance(value, str) and bool(MAC_RE.match(value.lower()))


def is_unset(mac):
    """Whether a MAC read from the host means "none set" (absent or all-zero)."""
    return not mac or str(mac).lower() == ZERO_MAC


def check_mac(value, what):
    """A MAC address given for a VF or a tenant -> lower case; InputError naming ``what``."""
    if not is_mac(value):
        raise InputError("%s: %r is not a MAC address like 52:54:00:12:34:56 (six hex pairs separated by colons)" % (what, value))
    mac = value.lower()
    if mac == ZERO_MAC:
        raise InputError("%s: %s is the all-zero address, which means no MAC; give a unicast address such as "
                         "52:54:00:12:34:56, or leave it out" % (what, mac))
    if mac == BROADCAST_MAC:
        raise InputError("%s: %s is the broadcast address; give a unicast one (first byte even)" % (what, mac))
    if int(mac[:2], 16) & 1:
        raise InputError("%s: %s is a multicast address; give a unicast one (first byte even)" % (what, mac))
    return mac


def duplicates(owners):
    """``owners``: [(mac, who)] -> [(mac, [who, ...])] of the MACs given to more than one, in
    the order first seen (unset MACs left out)."""
    seen = {}
    for mac, who in owners:
        if is_unset(mac):
            continue
        seen.setdefault(str(mac).lower(), []).append(who)
    return [(mac, whos) for mac, whos in seen.items() if len(whos) > 1]
