# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An IPv4 address a host can hold, with or without its prefix: the one check of a guest's, a tenant
record's and a management network's addresses."""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

_ADDRESS_RE = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(/(\d{1,2}))?$")


def check_ipv4(value, option, prefix_required):
    """``value`` as an IPv4 address, with ``/prefix`` when ``prefix_required`` and without one
    otherwise (a gateway, a name server), or InputError. Octets without leading zeros (read as
    octal by some tools); never an address no host can hold: 0.0.0.0/8, loopback, link-local,
    multicast, reserved, the broadcast address, nor, with a prefix, its subnet's network or
    broadcast address."""
    match = _ADDRESS_RE.match(str(value or ""))
    ok = match is not None and all(int(part) <= 255 and (part == "0" or not part.startswith("0")) for part in match.groups()[:4])
    if ok and match.group(6) is not None:
        ok = 0 < int(match.group(6)) <= 32 and not match.group(6).startswith("0")
    if not ok or (prefix_required and match.group(6) is None):
        raise InputError("%s: %r is not an IPv4 address%s" % (option, value, " with its prefix, like 10.20.0.11/24"
                                                              if prefix_required else ", like 192.168.150.1"))
    if not prefix_required and match.group(6) is not None:
        raise InputError("%s: %r has a prefix; give the address alone, like %s" % (option, value, value.split("/")[0]))
    interface = ipaddress.ip_interface(u"%s" % value)
    address = interface.ip
    kind = next((word for test, word in ((address in ipaddress.ip_network(u"0.0.0.0/8"), "in 0.0.0.0/8"),
                                         (address.is_loopback, "a loopback address"), (address.is_link_local, "link-local"),
                                         (address.is_multicast, "a multicast address"), (address.is_reserved, "reserved"),
                                         (address == ipaddress.ip_address(u"255.255.255.255"), "the broadcast address"))
                 if test), None)
    network = interface.network
    if kind is None and match.group(6) is not None and network.prefixlen <= 30:
        if address == network.network_address:
            kind = "the network address of %s" % network
        elif address == network.broadcast_address:
            kind = "the broadcast address of %s" % network
    if kind is not None:
        raise InputError("%s: %s is %s, which no host can hold; give a host address" % (option, value, kind))
    return str(value)
