# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``numa_pin`` module feature: decide, then apply, the pinning of one domain (persistent
definition, optionally live) over one libvirt connection."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import PinRequest, apply_pinning
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import host_cpus, pinning_fields, read_pinning
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import copy_tree, to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.change import _definition_diff, _persistent_xml, _running_diff, decide_then_act
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.host_limits import host_model
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.live_pins import apply_live_pins, live_pin_changes, pin_diff_lines, pin_restart_reasons
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import LibvirtError

__metaclass__ = type


class NumaPin:
    """Decide, then apply, the pinning of one domain (persistent definition, optionally live)."""

    def __init__(self, conn, name, request, live=False, check_mode=False, host=None):
        self.conn = conn
        self.name = name
        self.request = request
        self.domain = conn.domain(name)
        if self.domain is None:
            raise InputError("name: no domain %s on %s; define it first (for tenants: gpuvirt.tenancy.tenant_domain)" % (name, conn.uri))
        self.host = host or host_cpus(conn.capabilities(), conn.cpu_map_length())
        self.root = _persistent_xml(self.domain, name)
        self.warnings = request.validate(self.host, self.root, strict_vcpus=not check_mode)
        self.before_text = to_text(self.root)
        self.after_root = copy_tree(self.root)
        self.config_changed = apply_pinning(self.after_root, request)
        self.after_text = to_text(self.after_root)
        self.active = self.domain.is_active()
        self.live_changes = live_pin_changes(self.domain, request) if (live and self.active) else []
        self.restart_required = False
        if self.active and self.config_changed:
            reasons = pin_restart_reasons(name, self.root, self.after_root, live)
            self.warnings.extend(reasons)
            self.restart_required = bool(reasons) or not live

    @property
    def changed(self):
        return self.config_changed or bool(self.live_changes)

    def diff(self):
        diff = [_definition_diff(self.name, self.before_text, self.after_text)]
        if self.live_changes:
            diff.append(_running_diff(self.name, pin_diff_lines(self.live_changes)))
        return diff

    def apply(self, run):
        if self.config_changed:
            try:
                self.conn.define(self.after_text)
            except LibvirtError as exc:
                raise StateError("libvirt refused the new definition of %s: %s" % (self.name, exc))
            run.changed = True
        apply_live_pins(self.domain, self.name, self.live_changes, self.host["map_length"], run)

    def result(self):
        result = {
            "changed": self.changed,
            "xml": self.after_text,
            "config_changed": self.config_changed,
            "live_changed": bool(self.live_changes),
            "active": self.active,
            "restart_required": self.restart_required,
        }
        result.update(pinning_fields(read_pinning(self.after_root)))
        return result


def numa_pin(params, host, run):  # pylint: disable=unused-argument
    """The numa_pin module."""
    request = PinRequest(params["vcpu_pins"], params["emulator_cpus"], params["memory_mode"], params["nodeset"], params["hugepages"])
    with host.libvirt(params["uri"]) as conn:
        return decide_then_act(NumaPin(conn, params["name"], request, params["live"], check_mode=run.check_mode,
                                       host=host_model(conn, host)), run)
