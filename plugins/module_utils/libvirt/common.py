# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the libvirt module features (numa_pin, tenant_domain, tenant_domain_info) share: the
options every libvirt module has, a domain's stored and running XML parsed (a definition that
does not parse is an error naming the domain), the diffs, decide-then-act, the host model pins
are checked against, the MMIO window, what every domain on a connection holds, and the live pins
of a running domain."""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET
from collections import OrderedDict

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.captured_programs import MAXPHYSADDR_LIBVIRT, maxphysaddr_supported
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_addresses
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import MEMORY_MODES
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import (
    host_cpus, host_cpus_from_topology, read_pinning)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import parse_xml
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import LibvirtError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_bars import read_mmio64_sizes, window_setting_mb

__metaclass__ = type


# The options every libvirt module has: the host seam's root (where host files are read) and
# the libvirt connection.
LIBVIRT_OPTIONS = dict(
    root=dict(type="path", default="/"),
    uri=dict(type="str", default="qemu:///system"),
)
# The pinning options numa_pin and tenant_domain share.
PIN_OPTIONS = dict(
    vcpu_pins=dict(type="dict"),
    emulator_cpus=dict(type="str"),
    memory_mode=dict(type="str", default="strict", choices=list(MEMORY_MODES)),
    nodeset=dict(type="str"),
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


def host_model(conn, host):
    """The host's NUMA cells, CPUs and hugepage sizes that pins are checked against: the host
    model read under ``root`` when that is a captured host tree (a preview, where ``uri`` is
    libvirt's test driver, not that host), else libvirt's capabilities."""
    if not host.live and host.fs.isdir("/sys/devices/system/node"):
        model = host_cpus_from_topology(host.topology())
        if model["cpus"]:
            return model
    return host_cpus(conn.capabilities(), conn.cpu_map_length())


def maxphysaddr_gate(conn, host, topology=None):
    """-> (whether the host's libvirt takes ``<maxphysaddr>``: True, False or None when unknown,
    the versions it was decided on): a captured tree's from the capture (the host model's
    ``hypervisor``; the ``uri`` of a preview is libvirt's test driver, not that host's), the
    running host's from the connection."""
    if host.live:
        versions = conn.hypervisor_versions()
    else:
        versions = (topology if topology is not None else host.topology()).get("hypervisor") or {}
    return maxphysaddr_supported(versions), versions


def maxphysaddr_note(specs, supported, versions):
    """The one line a call says when the gate decided a definition's ``<maxphysaddr>`` (left out
    on an older libvirt, written with the version unknown), naming the domains; else None."""
    wanted = "libvirt %s" % ".".join(str(part) for part in MAXPHYSADDR_LIBVIRT)
    left_out = sorted(spec.name for spec in specs if getattr(spec, "phys_bits", None) == "left out")
    if left_out:
        return ("libvirt %s on this host predates <maxphysaddr> (%s): left out of the definition of %s; a GPU with large "
                "BARs may then need a host CPU with enough physical address bits for guest RAM and its 64-bit MMIO "
                "window (or a newer libvirt)" % (versions.get("libvirt"), wanted, ", ".join(left_out)))
    written = sorted(spec.name for spec in specs if getattr(spec, "phys_bits", None) == "written")
    if written and supported is None:
        return ("the libvirt version of this host is unknown (the capture holds no .capture/libvirtd-version.txt): "
                "<maxphysaddr mode='passthrough'/> is written into the definition of %s, which needs %s or later"
                % (", ".join(written), wanted))
    return None


def mmio_window(spec, fs):
    """-> (the 64-bit window OVMF needs for the tenant's devices in MiB or None, warnings):
    from each device's sysfs ``resource`` (pci_bars)."""
    if spec.firmware != "efi":
        return None, []
    sizes, unknown = [], []
    for address in spec.gpus + spec.vfs:
        found = read_mmio64_sizes(fs, address)
        if found is None:
            unknown.append(address)
        else:
            sizes.extend(found)
    warnings = []
    if unknown:
        warnings.append("no whole sysfs resource file for %s (missing, empty, truncated or not the kernel's format): "
                        "the 64-bit MMIO window of %s leaves their BARs out (give mmio_window_mb to size it, or "
                        "capture the host again)" % (", ".join(unknown), spec.name))
    return window_setting_mb(sizes), warnings


def interface_macs(root):
    """The MACs of a definition's interfaces: its VFs' (hostdev interfaces) and its virtio NICs'."""
    return [mac.get("address").lower() for mac in root.findall("devices/interface/mac") if mac.get("address")]


def disk_files(root):
    """The files a definition's disks and cdroms are (``<source file=...>``): what the domain
    writes, or a seed it reads. Not their backing files: a base image is shared by overlays."""
    files = []
    for source in root.findall("devices/disk/source"):
        if source.get("file") and source.get("file") not in files:
            files.append(source.get("file"))
    return files


def domain_holdings(conn):
    """{domain: (its PCI devices, its interfaces' MACs, its disks' files)} over every domain on the connection, defined or
    running (a VF as ``<interface type='hostdev'>`` counts, and so does a virtio NIC's MAC; a running
    one's live XML too)."""
    held = OrderedDict()
    for name in conn.domain_names():
        domain = conn.domain(name)
        if domain is None:
            continue
        roots = [_persistent_xml(domain, name)]
        if domain.is_active():
            roots.append(_live_xml(domain, name))
        devices, macs, files = [], [], []
        for root in roots:
            devices.extend(a for a in device_addresses(root) if a not in devices)
            macs.extend(m for m in interface_macs(root) if m not in macs)
            files.extend(f for f in disk_files(root) if f not in files)
        held[name] = (devices, macs, files)
    return held


# --------------------------------------------------------------------------- pins of a running domain
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
