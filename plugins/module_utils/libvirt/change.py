# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A libvirt module's change, as the features (numa_pin, tenant_domain, tenant_domain_info) make
it: the options every libvirt module has, a domain's stored and running XML parsed (a definition
that does not parse is an error naming the domain), the diffs, and decide-then-act. What the host
bounds a definition by is in host_limits.py, what every domain holds in holdings.py, the pins of a
running domain in live_pins.py."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import parse_xml

__metaclass__ = type


# The options every libvirt module has: the host seam's root (where host files are read) and
# the libvirt connection.
LIBVIRT_OPTIONS = dict(
    root=dict(type="path", default="/"),
    uri=dict(type="str", default="qemu:///system"),
)


def _stored_xml(name, text, which="stored definition"):
    """A domain's XML as libvirt returned it, parsed; a definition that does not parse (libvirt
    keeps what it was given) is a StateError naming the domain, not a traceback."""
    try:
        return parse_xml(text)
    except ET.ParseError as exc:
        raise StateError("domain %s: its %s does not parse as XML (%s); repair it (virsh edit %s) or remove it "
                         "(virsh undefine %s)" % (name, which, exc, name, name))


def _persistent_xml(domain, name):
    return _stored_xml(name, domain.definition())


def _live_xml(domain, name):
    return _stored_xml(name, domain.live_definition(), "running definition")


def _running_diff(name, lines):
    """The running domain's before/after as one diff entry; ``lines``: (label, before, after)."""
    return {"before_header": "%s (running)" % name, "after_header": "%s (running)" % name,
            "before": "".join("%s: %s\n" % (label, now) for label, now, _want in lines),
            "after": "".join("%s: %s\n" % (label, want) for label, _now, want in lines)}


def _definition_diff(name, before, after):
    return {"before_header": "%s (persistent XML)" % name, "after_header": "%s (persistent XML)" % name,
            "before": before, "after": after}


def decide_then_act(change, run):
    """Run a decided ``change`` (:class:`NumaPin`, :class:`TenantDomain`): its diff, its steps
    unless in check mode, its warnings; -> its result fields."""
    run.diff.extend(change.diff())
    if change.changed and not run.check_mode:
        change.apply(run)
    for warning in change.warnings + getattr(change, "notes", []):
        run.warn(warning)
    return change.result()
