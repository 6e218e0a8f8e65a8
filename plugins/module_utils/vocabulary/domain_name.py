# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's name is its libvirt domain name, and names files (/etc/libvirt/qemu/<name>.xml,
the domain's log and NVRAM): the rules libvirt's QEMU driver applies, checked where the name
first arrives (the planner), so a bad name fails before any host is touched."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value

__metaclass__ = type

# a file name on the host's filesystems
MAX_NAME_BYTES = 255


def check_domain_name(name, what="name"):
    """``name`` when libvirt can define a domain by it; an :class:`InputError` naming ``what``
    and the rule otherwise: a non-empty string without ``/`` (libvirt's QEMU driver refuses it:
    the name is a file name) or control characters (newlines are refused by libvirt too), not
    ``.`` or ``..`` (the tenant's guest files go to a directory of its name), not all digits (virsh would take it for a domain id), at most 255 bytes."""
    if not isinstance(name, str) or not name:
        raise InputError("%s: a domain name is required (a non-empty string), got %r" % (what, name))
    check_line_value(name, what)
    if "/" in name:
        raise InputError("%s: %r holds '/': libvirt uses the name as a file name; choose a name without '/'" % (what, name))
    if name in (".", ".."):
        raise InputError("%s: %r names a directory (the tenant's files go to a directory of its name, which would be the "
                         "one above); choose a name with a letter" % (what, name))
    if name.isdigit():
        raise InputError("%s: %r is all digits: virsh and libvirt tools would take it for a domain id; add a letter" % (what, name))
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InputError("%s: %r is longer than %d bytes (a file name); shorten it" % (what, name[:40] + "...", MAX_NAME_BYTES))
    return name
