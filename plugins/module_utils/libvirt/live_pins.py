# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pins of a running domain (numa_pin, tenant_domain): the pinning options both modules
take, what of a request the running domain does not have yet, those pins set live, their diff
lines, and what of a new pinning waits for the domain's next start."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import MEMORY_MODES
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import read_pinning
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import LibvirtError

__metaclass__ = type


# The pinning options numa_pin and tenant_domain share.
PIN_OPTIONS = dict(
    vcpu_pins=dict(type="dict"),
    emulator_cpus=dict(type="str"),
    memory_mode=dict(type="str", default="strict", choices=list(MEMORY_MODES)),
    nodeset=dict(type="str"),
)


def live_pin_changes(domain, request):
    """The request's pins and nodeset the running domain does not have: [(kind, vCPU, now, want)].
    vCPUs the running domain does not list are left to its definition."""
    changes = []
    if request.vcpu_pins:
        pins = domain.vcpu_pins()
        for index, cpus in sorted(request.vcpu_pins.items()):
            if index < len(pins) and pins[index] != cpus:
                changes.append(("vcpu", index, pins[index], cpus))
    if request.emulator_cpus is not None:
        now = domain.emulator_pin()
        if now != request.emulator_cpus:
            changes.append(("emulator", None, now, request.emulator_cpus))
    if request.nodeset is not None:
        now = parse_cpulist(domain.numa_nodeset(), "numa_nodeset")
        if now != request.nodeset:
            changes.append(("nodeset", None, now, request.nodeset))
    return changes


def apply_live_pins(domain, name, changes, map_length, run):
    for kind, index, _now, want in changes:
        try:
            if kind == "vcpu":
                domain.pin_vcpu(index, want, map_length)
            elif kind == "emulator":
                domain.pin_emulator(want, map_length)
            else:
                domain.set_numa_nodeset(format_cpulist(want))
        except LibvirtError as exc:
            raise StateError("live %s pinning of %s failed: %s (the persistent definition is updated)" % (kind, name, exc))
        run.changed = True


def pin_diff_lines(changes):
    return [("vcpu %d" % index if kind == "vcpu" else kind, format_cpulist(now), format_cpulist(want))
            for kind, index, now, want in changes]


def pin_restart_reasons(name, before_root, after_root, live):
    """What of a running domain's new pinning waits for its next start."""
    old, new = read_pinning(before_root), read_pinning(after_root)
    reasons = []
    if old["hugepages"] != new["hugepages"]:
        reasons.append("hugepage backing of running domain %s applies at its next start" % name)
    if live and old["memory_mode"] not in (None, new["memory_mode"]):
        reasons.append("numatune mode of running domain %s applies at its next start" % name)
    return reasons
