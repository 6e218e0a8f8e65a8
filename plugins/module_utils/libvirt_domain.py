# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The libvirt module features: ``numa_pin``, ``tenant_domain`` and ``tenant_domain_info``.

Each opens one connection (``libvirt_connection``, from the module's ``uri``), decides from
the domain's persistent definition (``domain_xml``, pure) and its running state, and only
then acts: define, the live changes, autostart, start or remove. ``tenant_domain`` does so
for one domain or, with ``domains``, for each of a list in order over the one connection.
"""

from __future__ import absolute_import, division, print_function

import time
import xml.etree.ElementTree as ET
from collections import OrderedDict

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.validation import check_required_if

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError, labelled
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.device_use import pci_function_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_devices import device_addresses
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_xml import (
    CPU_QOS, IOTUNE_KEYS, MEMORY_MODES, UNLIMITED_QUOTA, PinRequest, TenantSpec, apply_pinning, check_page_size, copy_tree,
    cputune_qos, disk_targets, firmware_of, held_resources, host_cpus, host_cpus_from_topology, mmio_window_of, network_nics, parse_xml,
    pinning_fields, read_assignment, read_pinning, to_kib, to_text, vcpu_counts)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest_image import (
    GUEST_OPTIONS, GuestRemoval, console_log_path, plan_guest, tenant_paths)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_connection import LibvirtError, NotAnswering, connection
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_network import NETWORK_OPTIONS, NetworkPlan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_service import SERVICE_OPTIONS, read_service
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.pci_bars import read_mmio64_sizes, window_setting_mb
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import Run, nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_request import (
    FIRMWARES, RELAX_OPTION, Claims, limits_of_capabilities, limits_of_topology, over_host, vf_security)

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
# What tenant_domain takes for one domain: its top-level options, or each entry of ``domains``.
TENANT_DOMAIN_OPTIONS = dict(
    name=dict(type="str"),
    state=dict(type="str", default="defined", choices=["defined", "running", "absent"]),
    domain_type=dict(type="str", default="kvm"),
    vcpus=dict(type="int"),
    max_vcpus=dict(type="int"),
    memory_mb=dict(type="int"),
    hugepage_size=dict(type="str"),
    gpus=dict(type="list", elements="str", default=[]),
    vfs=dict(type="list", elements="str", default=[]),
    network_vfs=dict(type="list", elements="raw", default=[]),
    mac=dict(type="str"),
    vlan=dict(type="int"),
    disks=dict(type="list", elements="dict", default=[], options=dict(
        path=dict(type="str", required=True),
        format=dict(type="str", default="qcow2"),
        target=dict(type="str"),
    )),
    machine=dict(type="str"),
    arch=dict(type="str", default="x86_64"),
    firmware=dict(type="str", default="efi", choices=list(FIRMWARES)),
    mmio_window_mb=dict(type="int"),
    qos=dict(type="dict", options=dict(
        cpu_shares=dict(type="int"),
        cpu_period=dict(type="int"),
        cpu_quota=dict(type="int"),
        iotune=dict(type="dict", options=dict((key, dict(type="int")) for key in IOTUNE_KEYS)),
    )),
    live=dict(type="bool", default=False),
    autostart=dict(type="bool"),
    shutdown_timeout=dict(type="int", default=120),
    force_off=dict(type="bool", default=False),
    relax_vf_isolation=dict(type="bool", default=False),
    **dict(PIN_OPTIONS, **GUEST_OPTIONS)
)
# A domain that is not removed needs its size; checked per domain (the top-level state's
# default must not demand a size when the domains come as a list).
TENANT_DOMAIN_REQUIRED_IF = [("state", "defined", ("vcpus", "memory_mb")), ("state", "running", ("vcpus", "memory_mb"))]
# The result fields of one domain that are flags; with ``domains``, each names the domains where it is true.
TENANT_DOMAIN_FLAGS = ("created", "defined", "started", "removed", "stopped", "forced_off", "live_changed", "restart_required",
                       "autostart")


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
        warnings.append("no sysfs resource file for %s: the 64-bit MMIO window of %s leaves their BARs out (give "
                        "mmio_window_mb to size it)" % (", ".join(unknown), spec.name))
    return window_setting_mb(sizes), warnings


def hostdev_macs(root):
    """The MACs of a definition's hostdev interfaces (its VFs' MACs)."""
    return [mac.get("address").lower() for mac in root.findall("devices/interface[@type='hostdev']/mac") if mac.get("address")]


def domain_holdings(conn):
    """{domain: (its PCI devices, its VF MACs)} over every domain on the connection, defined or
    running (a VF as ``<interface type='hostdev'>`` counts; a running one's live XML too)."""
    held = OrderedDict()
    for name in conn.domain_names():
        domain = conn.domain(name)
        if domain is None:
            continue
        roots = [_persistent_xml(domain, name)]
        if domain.is_active():
            roots.append(_live_xml(domain, name))
        devices, macs = [], []
        for root in roots:
            devices.extend(a for a in device_addresses(root) if a not in devices)
            macs.extend(m for m in hostdev_macs(root) if m not in macs)
        held[name] = (devices, macs)
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
    with connection(params["uri"]) as conn:
        return decide_then_act(NumaPin(conn, params["name"], request, params["live"], check_mode=run.check_mode,
                                       host=host_model(conn, host)), run)


# --------------------------------------------------------------------------- tenant domains
class TenantDomain:
    """Define, update (persistently and, with ``live``, on the running domain), pin, set to
    autostart, start or remove one tenant's domain; decide first (``__init__``), then act
    (``apply``). ``pins``: a :class:`PinRequest` written with the definition, so one call defines
    and pins a tenant. ``autostart``: whether the host's boot starts it (None: when its state is
    running)."""

    def __init__(self, conn, spec, state, live=False, shutdown_timeout=120, force_off=False, pins=None,
                 clock=time.monotonic, sleep=time.sleep, host=None, check_mode=False, autostart=None):
        self.conn = conn
        self.host_model = host
        self.spec = spec
        self.state = state
        self.live = live
        self.shutdown_timeout = shutdown_timeout
        self.force_off = force_off
        self.pins = pins
        self._clock, self._sleep = clock, sleep
        self.warnings = []
        self.notes = []
        self.restart_required = False
        self.live_changes = []
        self.pin_changes = []
        self.map_length = None
        self.released = []
        self.stopped = self.forced = False
        self.domain = conn.domain(spec.name)
        self.created = self.domain is None and state != "absent"
        self.active = self.domain.is_active() if self.domain is not None else False
        if self.domain is not None:
            self.before_root = _persistent_xml(self.domain, spec.name)
            self.before_text = to_text(self.before_root)
        else:
            self.before_root = None
            self.before_text = ""
        self.define = self.start = self.remove = False
        self.autostart_before = self.domain.autostart() if self.domain is not None else False
        self.autostart = self.autostart_before
        if state == "absent":
            self.after_root = None
            self.after_text = ""
            self.autostart = False
            self.remove = self.domain is not None
            if self.remove:
                self.released = device_addresses(self.before_root)
                self.stopped = self.active
            return
        spec.qemu_args_kept = conn.keeps_qemu_arguments()
        if spec.mmio_window_mb and not spec.qemu_args_kept:
            self.notes.append("the 64-bit MMIO window of %s (%d MiB) goes to QEMU through <qemu:commandline>, which only "
                              "libvirt's QEMU driver keeps; %s drops it" % (spec.name, spec.mmio_window_mb, conn.uri))
        if self.domain is not None:
            self.after_root = copy_tree(self.before_root)
            self.define = spec.update(self.after_root)
        else:
            self.after_root = spec.build()
            self.define = True
        self.notes.extend(spec.notes)
        if self.active and self.define:
            self._running_domain_changes()
        if pins is not None and pins.pins_anything:
            self._pin(pins)
        self.autostart = state == "running" if autostart is None else autostart
        if self.autostart and self.domain is not None and not self.domain.is_persistent():
            # only a persistent domain starts at boot: writing its definition makes it one
            self.define = True
        self.after_text = to_text(self.after_root)
        self.start = state == "running" and not self.active

    # ------------------------------------------------------------------ decide
    def _running_domain_changes(self):
        """What of a new definition reaches the running domain: live where libvirt can (vCPU count
        within the domain's maximum, CPU shares/quota, disk I/O limits), otherwise restart_required."""
        before, after = self.before_root, self.after_root
        later = []
        if to_kib(before.find("memory").text, before.find("memory").get("unit")) != self.spec.memory_kib:
            later.append("memory")
        if (device_addresses(before) != device_addresses(after) or disk_targets(before) != disk_targets(after)
                or network_nics(before) != network_nics(after)):
            later.append("devices")
        if before.get("type") != after.get("type"):
            later.append("domain type")
        if read_pinning(before)["hugepages"] != read_pinning(after)["hugepages"]:
            later.append("hugepage backing")
        if mmio_window_of(before) != mmio_window_of(after):
            later.append("64-bit MMIO window")
        want_count = self.spec.vcpus
        if vcpu_counts(before) != vcpu_counts(after):
            if not self.live:
                later.append("vCPU count")
            else:
                now, live_max = self.domain.vcpus()
                if now != want_count and want_count <= live_max:
                    self.live_changes.append(("vcpus", None, now, want_count))
                elif now != want_count:
                    later.append("vCPU count %d (the running domain's maximum is %d; max_vcpus raises it from the next start)"
                                 % (want_count, live_max))
        if self.spec.qos is not None:
            if not self.live:
                if cputune_qos(before) != cputune_qos(after):
                    later.append("CPU QoS")
            else:
                try:
                    self._live_qos()
                except LibvirtError as exc:
                    later.append("CPU and disk QoS (its live values cannot be read: %s)" % exc)
        if later:
            self.restart_required = True
            self.warnings.append("running domain %s keeps its %s until it is restarted (the definition is updated; "
                                 "restart the tenant to apply)" % (self.spec.name, ", ".join(later)))

    def _live_qos(self):
        params = self.domain.scheduler()
        want = {}
        for key, _tag, param in CPU_QOS:
            value = self.spec.qos[key]
            if param not in params:
                continue
            if param == "vcpu_quota":
                capped = 0 < params[param] < UNLIMITED_QUOTA
                if value is None and capped:
                    want[param] = -1
                elif value is not None and params[param] != value:
                    want[param] = value
            elif param == "vcpu_period":
                # the period only matters with a quota; the kernel keeps its default otherwise
                if value is not None and params[param] != value:
                    want[param] = value
            elif value is not None and params[param] != value:
                want[param] = value
        if want:
            self.live_changes.append(("scheduler", None, dict((k, params[k]) for k in want), want))
        targets = disk_targets(self.before_root)
        for disk in self.spec.disks:
            target = targets.get(disk["path"])
            if target is None:
                continue
            now = self.domain.block_iotune(target)
            wanted = dict((key, self.spec.qos["iotune"].get(key, 0)) for key in IOTUNE_KEYS)
            current = dict((key, int(now.get(key) or 0)) for key in IOTUNE_KEYS)
            if current != wanted:
                self.live_changes.append(("iotune", target, current, wanted))

    def _pin(self, pins):
        """The pins in the new definition (checked against the host and the vCPUs it defines), and
        on the running domain with ``live``."""
        host = self.host_model or host_cpus(self.conn.capabilities(), self.conn.cpu_map_length())
        self.map_length = host["map_length"]
        pins.validate(host, self.after_root)
        if self.spec.hugepage_kib:
            check_page_size(host, self.spec.hugepage_kib, "hugepage_size")
        unpinned = copy_tree(self.after_root)
        if apply_pinning(self.after_root, pins):
            self.define = True
            reasons = pin_restart_reasons(self.spec.name, unpinned, self.after_root, self.live) if self.active else []
            if self.active and not self.live:
                reasons.append("running domain %s keeps its CPU pins and NUMA nodeset until it is restarted (live is false)"
                               % self.spec.name)
            if reasons:
                self.restart_required = True
                self.warnings.extend(reasons)
        if self.live and self.active:
            self.pin_changes = live_pin_changes(self.domain, pins)

    @property
    def autostart_changed(self):
        return not self.remove and self.autostart != self.autostart_before

    @property
    def changed(self):
        return (self.define or self.start or self.remove or self.autostart_changed or bool(self.live_changes)
                or bool(self.pin_changes))

    # ------------------------------------------------------------------ act
    def apply(self, run):
        if self.remove:
            self._remove(run)
            return
        name = self.spec.name
        if self.define:
            try:
                self.domain = self.conn.define(self.after_text)
            except LibvirtError as exc:
                raise StateError("libvirt refused the definition of %s: %s" % (name, exc))
            run.changed = True
        resized = False
        for kind, target, _now, want in self.live_changes:
            try:
                if kind == "vcpus":
                    self.domain.set_vcpus(want)
                    resized = True
                elif kind == "scheduler":
                    self.domain.set_scheduler(want)
                else:
                    self.domain.set_block_iotune(target, want)
                run.changed = True
            except LibvirtError as exc:
                # the definition is already updated: say what the running domain did not take
                self.restart_required = True
                self.warnings.append("running domain %s did not take its new %s live (%s); it applies when the tenant is "
                                     "restarted" % (name, kind, exc))
        if resized and self.pins is not None and self.pins.pins_anything:
            # the vCPUs the resize brought online are pinned as well
            self.pin_changes = live_pin_changes(self.domain, self.pins)
        apply_live_pins(self.domain, name, self.pin_changes, self.map_length, run)
        if self.autostart_changed:
            try:
                self.domain.set_autostart(self.autostart)
            except LibvirtError as exc:
                raise StateError("setting autostart of %s to %s failed: %s" % (name, self.autostart, exc))
            run.changed = True
        if self.start:
            try:
                self.domain.start()
            except LibvirtError as exc:
                raise StateError("starting %s failed: %s" % (name, exc))
            run.changed = True

    def _remove(self, run):
        name = self.spec.name
        try:
            if self.domain.is_active():
                self.domain.shutdown()
                deadline = self._clock() + self.shutdown_timeout
                while self.domain.is_active() and self._clock() < deadline:
                    self._sleep(1)
                if self.domain.is_active():
                    if not self.force_off:
                        raise StateError("%s did not shut down within %ss (its guest did not act on the ACPI power button); nothing "
                                         "was removed. Shut it down from inside, raise shutdown_timeout, or allow a forced power-off "
                                         "(force_off)" % (name, self.shutdown_timeout))
                    self.domain.destroy()
                    self.forced = True
                run.changed = True
            if self.domain.is_persistent():
                # the NVRAM file (UEFI guests) belongs to the tenant and goes with it; with firmware
                # autoselection the inactive definition may not name it, yet libvirt refuses to
                # undefine the domain without the flag ("cannot undefine domain with nvram")
                self.domain.undefine(nvram=firmware_of(self.before_root) == "efi" or self.before_root.find("os/nvram") is not None)
                run.changed = True
        except LibvirtError as exc:
            raise StateError("removing %s failed: %s" % (name, exc))

    def diff(self):
        diff = [_definition_diff(self.spec.name, self.before_text, self.after_text)]
        lines = [(kind if target is None else "%s %s" % (kind, target), now, want) for kind, target, now, want in self.live_changes]
        lines.extend(pin_diff_lines(self.pin_changes))
        if lines:
            diff.append(_running_diff(self.spec.name, lines))
        if self.autostart_changed:
            header = "%s (autostart)" % self.spec.name
            diff.append({"before_header": header, "after_header": header, "before": "autostart: %s\n" % _on_off(self.autostart_before),
                         "after": "autostart: %s\n" % _on_off(self.autostart)})
        return diff

    def result(self):
        return {"changed": self.changed, "xml": self.after_text, "created": self.created, "defined": self.define,
                "started": self.start, "removed": self.remove, "stopped": self.stopped, "forced_off": self.forced,
                "released_devices": self.released, "live_changed": bool(self.live_changes) or bool(self.pin_changes),
                "restart_required": self.restart_required, "restart_reasons": list(self.warnings), "autostart": self.autostart}


def _on_off(flag):
    return "enable" if flag else "disable"


class DomainRequest:
    """One domain's options, validated without libvirt: its spec, pins and the MMIO window
    (with the warnings that go with it). ``label``: how an error names it (``domains[1]
    (tenant-b)``), None for the module's single domain."""

    def __init__(self, options, host, label=None, check_mode=False):
        self.options = options
        self.label = label
        self.warnings = []
        self.guest = self.removal = None
        with labelled(label):
            if options["shutdown_timeout"] < 0:
                raise InputError("shutdown_timeout: %d is negative; give the seconds to wait for the guest (0 to not wait)"
                                 % options["shutdown_timeout"])
            if options["state"] == "absent":
                self.spec, self.pins = TenantSpec.named(options["name"]), None
                self.removal = GuestRemoval(host, options["name"], options.get("guest_dir"))
                return
            if options.get("image"):
                # the tenant's own disk comes first: the guest boots from it
                disk = {"path": tenant_paths(options["guest_dir"], options["name"])["disk"], "format": "qcow2", "target": None}
                options = dict(options, disks=[disk] + list(options["disks"] or []))
            self.spec = TenantSpec(options)
            if options.get("image") or options.get("management"):
                self._plan_guest(host, options, check_mode)
            self.pins = PinRequest(options["vcpu_pins"], options["emulator_cpus"], options["memory_mode"], options["nodeset"])
            if options["mmio_window_mb"] is None:
                self.spec.mmio_window_mb, self.warnings = mmio_window(self.spec, host.fs)
            try:
                # what libvirt would store must read back: a value no check above knows cannot make a
                # definition that later calls fail to parse
                ET.fromstring(to_text(self.spec.build()))
            except ET.ParseError as exc:
                raise InputError("the definition of %s would not parse as XML (%s): an option holds a character XML cannot "
                                 "carry; remove control characters from the names and paths given" % (self.spec.name, exc))

    @property
    def present(self):
        return self.options["state"] != "absent"

    @property
    def devices(self):
        return list(self.spec.gpus) + list(self.spec.vfs) if self.present else []

    def _plan_guest(self, host, options, check_mode):
        """The guest's disk, seed and management NIC (guest_image), checked and read now."""
        spec = self.spec
        rdma_mac = spec.interfaces[spec.network_vfs[0]]["mac"] if spec.network_vfs else None
        self.guest = plan_guest(host, spec.name, options, rdma_mac=rdma_mac, check_mode=check_mode)
        self.warnings.extend(self.guest.notes)
        spec.seed_cdrom = self.guest.seed_cdrom()
        spec.management = self.guest.management
        if options.get("image"):
            spec.console_log = console_log_path(spec.name)

    def guest_fields(self):
        """What the result says of the guest: its files, console log and management NIC."""
        if self.guest is None:
            return None
        management = self.guest.management
        return {"disk": self.guest.paths["disk"] if self.guest.image else None, "seed": self.guest.seed_cdrom(),
                "console_log": self.spec.console_log, "made": self.guest.changed,
                "management": dict((k, management.get(k)) for k in ("network", "bridge", "mac", "address")) if management else None}

    @property
    def pins_anything(self):
        return self.pins is not None and self.pins.pins_anything

    def check_size(self, limits):
        """Refuse a size above what the host has (``limits``: tenant_request.limits_of_*)."""
        if not self.present:
            return
        beyond = over_host(self.spec.vcpus, self.spec.max_vcpus, self.spec.memory_kib // 1024, limits)
        if beyond:
            with labelled(self.label):
                raise InputError(beyond)

    def check_pins(self, model):
        """Refuse pins or a page size the host does not have, against the vCPUs the request
        defines (the same checks the domain's decision makes), before any domain changes."""
        with labelled(self.label):
            self.pins.validate(model, self.spec.build())
            if self.spec.hugepage_kib:
                check_page_size(model, self.spec.hugepage_kib, "hugepage_size")

    def decide(self, conn, model, check_mode):
        options = self.options
        with labelled(self.label):
            return TenantDomain(conn, self.spec, options["state"], live=options["live"], shutdown_timeout=options["shutdown_timeout"],
                                force_off=options["force_off"], pins=self.pins, host=model if self.pins_anything else None,
                                check_mode=check_mode, autostart=options["autostart"])


def domain_options(entries):
    """Each entry of ``domains`` as the module validates its top-level options (types, choices,
    defaults, the size unless removed); -> [(options, label)]. A bad entry is an InputError that
    names its index, its name and the option; names are unique."""
    validator = ArgumentSpecValidator(dict(TENANT_DOMAIN_OPTIONS, name=dict(type="str", required=True)),
                                      required_if=TENANT_DOMAIN_REQUIRED_IF)
    out, seen = [], {}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = "domains[%d] (%s)" % (index, name) if name else "domains[%d]" % index
        checked = validator.validate(entry)
        if checked.error_messages:
            raise InputError("%s: %s" % (label, "; ".join(checked.error_messages)))
        if name in seen:
            raise InputError("%s: name %s is also domains[%d]; list each domain once" % (label, name, seen[name]))
        seen[name] = index
        out.append((checked.validated_parameters, label))
    return out


def batch_result(results):
    """The module's result with ``domains``: each domain's result by name (in list order, with its
    ``name``), each flag as the names of the domains where it holds, the reasons and released
    devices of all."""
    result = {"changed": any(r["changed"] for r in results),
              "domains": OrderedDict((r["name"], r) for r in results),
              "restart_reasons": [reason for r in results for reason in r["restart_reasons"]],
              "released_devices": [address for r in results for address in r["released_devices"]]}
    for flag in TENANT_DOMAIN_FLAGS:
        result[flag] = [r["name"] for r in results if r[flag]]
    return result


def host_limits(conn, host, topology=None):
    """What bounds a tenant's size: the host model under ``root`` when that is a captured tree (a
    preview against libvirt's test driver), else libvirt's capabilities of the host it runs."""
    if not host.live and host.fs.isdir("/sys/devices/system/node"):
        limits = limits_of_topology(topology or host.topology())
        if limits["cpus"]:
            return limits
    return limits_of_capabilities(conn.capabilities())


def check_assignments(requests, holdings, topology, check_mode):
    """The isolation rules over every domain of the call, in list order, before any change: a
    device to one domain; an IOMMU group whole to one tenant or to none; a PF and its VFs not
    split; a MAC on one VF. Against the other domains (``holdings``, domain_holdings) as each
    entry would find them: a domain the list removes or redefines earlier frees what it held.
    Between entries of the call: an InputError. Against another domain: a StateError (with
    ``held_by``), a warning in check mode (a removal earlier in the run may free it). -> warnings."""
    claims = Claims(topology)
    for name, (devices, macs) in holdings.items():
        claims.hold(name, devices, macs)
    notes = []
    for request in requests:
        name = request.spec.name
        claims.release(name)
        if not request.present:
            continue
        with labelled(request.label):
            held_by = {}
            for address in request.devices:
                if address in claims.held:
                    held_by.setdefault(claims.held[address], []).append(address)
            macs = dict((address, wanted["mac"]) for address, wanted in request.spec.interfaces.items())
            claims.add(name, request.devices, macs=macs)
            errors, with_others = claims.check(name)
            if errors:
                raise InputError("; ".join(errors))
        messages = []
        if held_by:
            messages.append("%s; a PCI device goes to one domain only. Remove it from the other domain (for a tenant: state "
                            "absent) or give this tenant other devices" % (
                                "; ".join("%s held by domain %s" % (", ".join(a), other) for other, a in sorted(held_by.items()))))
        messages.extend(with_others)
        if not messages:
            continue
        if check_mode:
            notes.extend("%s: %s" % (request.label or name, message) for message in messages)
            continue
        error = StateError("%s: %s" % (request.label or name, "; ".join(messages)))
        error.details = {"held_by": held_by} if held_by else None
        raise error
    return notes


def vf_settings_addresses(options, topology):
    """[(label, VF address, settings)] of the VF settings of ``sriov_vfs`` options (``vfs`` of
    each PF, by index or address, and ``vf_settings``)."""
    pci = topology.get("pci_devices") or {}
    entries = options["pfs"] if options.get("pfs") is not None else [options]
    found = []
    for position, entry in enumerate(entries):
        label = "sriov_vfs: pfs[%d]" % position if options.get("pfs") is not None else "sriov_vfs"
        pf = pci_function_of(topology, entry.get("pf") or "")
        virtfns = (pci.get(pf) or {}).get("virtfns") or []
        for index, vf in enumerate(entry.get("vfs") or []):
            address = vf.get("address")
            if address is None and vf.get("index") is not None and 0 <= vf["index"] < len(virtfns):
                address = virtfns[vf["index"]]
            found.append(("%s.vfs[%d]" % (label, index), str(address or "").lower(), vf))
    for index, vf in enumerate(options.get("vf_settings") or []):
        found.append(("sriov_vfs: vf_settings[%d]" % index, str(vf.get("address") or "").lower(), vf))
    return found


def vf_settings_options(params):
    """``sriov_vfs`` (sriov_vfs's options, for the tenants' VFs) validated as that module does, or None."""
    if params.get("sriov_vfs") is None:
        return None
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils import sriov  # only tenant_domain's sriov_vfs needs it
    return nested_params("sriov_vfs", "gpuvirt.tenancy.sriov_vfs", sriov.MODULE_ARGS, params["sriov_vfs"])


def apply_vf_settings(options, host, run):
    """sriov_vfs inside this call (the VFs' MAC, VLAN, spoof check and trust, before any domain
    that holds them is defined or started); -> its result fields."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils import sriov  # as in vf_settings_options
    try:
        return sriov.sriov_vfs(options, host, run)
    except InputError as exc:
        error = InputError("sriov_vfs: %s" % exc)
        error.details = getattr(exc, "details", None)
        raise error


def check_vf_security(requests, vf_options, topology):
    """VF settings of ``sriov_vfs`` with spoof checking off or trust on are refused for a VF of
    a domain of this call that does not opt in (``relax_vf_isolation``); sriov_vfs warns of them."""
    owners = dict((address, request.spec.name) for request in requests for address in request.devices)
    relaxed = set(request.spec.name for request in requests if request.present and request.options.get(RELAX_OPTION))
    vf_security(vf_settings_addresses(vf_options, topology), owners, relaxed)


def make_guest_files(requests, host, run):
    """Every tenant's guest files, after every entry is checked and before any VF or domain
    changes: first the downloads of all (a checksum or size that is wrong stops the call before
    any disk is made), then each tenant's disk and seed."""
    guests = [r.guest for r in requests if r.guest is not None]
    for guest in guests:
        run.diff.extend(guest.diff())
    if run.check_mode:
        return
    for kinds in (("fetch", "checksum"), ("overlay", "copy", "seed")):
        for request in requests:
            if request.guest is not None:
                with labelled(request.label):
                    request.guest.apply(host, run, kinds)


def remove_guest_files(request, host, run, result):
    """After a tenant's domain is removed: the files the collection made for its guest."""
    removal = request.removal
    run.diff.extend(removal.diff())
    if removal.changed:
        result["changed"] = True
        if not run.check_mode:
            removal.apply(host, run)
    result["guest_files_removed"] = list(removal.files)


def tenant_domain(params, host, run):
    """The tenant_domain module: one domain (``name``) or each of ``domains`` in list order, over
    one connection; with ``tenants``, the tenants stage decided on the host (tenant_stage: the
    domains read, the plan, then the same steps for the entries the plan gives). Every domain's
    options are checked (size, pins and devices against the host, the isolation rules against each
    other and the other domains) before any domain changes; then, with ``sriov_vfs``, the
    tenants' VFs get their settings; then each domain is decided and acted on in turn, so that a
    removal or move earlier in the list frees what a later domain takes."""
    if params.get("tenants") is not None:
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils import tenant_stage  # only the tenants stage needs it
        return tenant_stage.tenant_stage(params, host, run)
    batch = params["domains"] is not None
    if batch:
        entries = domain_options(params["domains"])
    else:
        try:
            # as AnsibleModule checks it: an option left out (None) is missing
            check_required_if(TENANT_DOMAIN_REQUIRED_IF, dict((key, value) for key, value in params.items() if value is not None))
        except TypeError as exc:
            raise InputError(str(exc))
        entries = [(params, None)]
    prepared = prepare_domains(entries, params.get("sriov_vfs"), host, run)
    with connection(params["uri"]) as conn:
        return act_on_domains(conn, prepared, batch, params.get("management_network"), host, run)


class PreparedDomains:
    """The entries of one call checked without libvirt: their requests, the ``sriov_vfs``
    options validated, and the host model their devices are checked against."""

    def __init__(self, requests, vf_options, topology):
        self.requests = requests
        self.vf_options = vf_options
        self.topology = topology


def prepare_domains(entries, sriov_vfs, host, run):
    """[(options, label)] (each entry validated as the module's options) -> PreparedDomains:
    each entry's request (spec, pins, guest, MMIO window), the VF settings validated as sriov_vfs
    validates them and checked against the tenants' opt-ins; nothing is read of libvirt."""
    requests = [DomainRequest(options, host, label, check_mode=run.check_mode) for options, label in entries]
    vf_options = vf_settings_options({"sriov_vfs": sriov_vfs})
    for request in requests:
        for warning in request.warnings:
            run.warn(warning)
    devices = any(request.devices for request in requests) or vf_options is not None
    topology = host.topology() if devices or not host.live else None
    if vf_options is not None:
        check_vf_security(requests, vf_options, topology)
    return PreparedDomains(requests, vf_options, topology)


def act_on_domains(conn, prepared, batch, network_options, host, run, first=0):
    """The prepared entries checked against libvirt (sizes, pins, the other domains) and then
    acted on in order: guest files, the management network, the VF settings, each domain. With
    ``first``, the first entries (the removals of the tenants stage) are acted on before the VF
    settings, whose VFs they may hold; the VF settings are then checked before any change."""
    requests, vf_options, topology = prepared.requests, prepared.vf_options, prepared.topology
    limits = host_limits(conn, host, topology) if any(r.present for r in requests) else None
    for request in requests:
        request.check_size(limits)
    model = host_model(conn, host) if any(r.pins_anything for r in requests) else None
    if batch:
        for request in requests:
            if request.pins_anything:
                request.check_pins(model)
    for note in check_assignments(requests, domain_holdings(conn), topology, run.check_mode):
        run.warn(note)
    network = NetworkPlan(conn, network_options) if network_options else None
    if first and vf_options is not None and not run.check_mode:
        # the VF settings come after the removals: checked now, before anything changes
        apply_vf_settings(vf_options, host, Run(check_mode=True, diff=False))
    make_guest_files(requests, host, run)
    if network is not None:
        run.diff.extend(network.diff())
        if network.changed and not run.check_mode:
            network.apply(run)
    results, vf_result = [], None
    for index, request in enumerate(requests):
        if index == first and vf_options is not None:
            vf_result = apply_vf_settings(vf_options, host, run)
        try:
            result = decide_then_act(request.decide(conn, model, run.check_mode), run)
        except (InputError, StateError) as exc:
            if batch:
                # what the domains before this one did is part of the answer
                exc.details = dict(getattr(exc, "details", None) or {}, domains=OrderedDict((r["name"], r) for r in results))
            if vf_result is not None:
                exc.details = dict(getattr(exc, "details", None) or {}, sriov_vfs=vf_result)
            raise
        result["mmio_window_mb"] = getattr(request.spec, "mmio_window_mb", None)
        result["guest"] = request.guest_fields()
        if request.guest is not None and request.guest.changed:
            result["changed"] = True
        if request.removal is not None:
            remove_guest_files(request, host, run, result)
        results.append(dict(result, name=request.spec.name) if batch else result)
    if vf_result is None and vf_options is not None:
        vf_result = apply_vf_settings(vf_options, host, run)
    result = batch_result(results) if batch else results[0]
    if network is not None:
        result["management_network"] = network.result()
        result["changed"] = result["changed"] or network.changed
    if vf_result is not None:
        result["sriov_vfs"] = vf_result
        result["changed"] = result["changed"] or vf_result["changed"]
    return result


# --------------------------------------------------------------------------- what tenants hold
def domain_assignments(conn, names):
    """name -> read_assignment(...) plus ``active``, for the names that are defined."""
    found = {}
    for name in names:
        domain = conn.domain(name)
        if domain is None:
            continue
        assignment = read_assignment(_persistent_xml(domain, name))
        assignment["active"] = domain.is_active()
        found[name] = assignment
    return found


def foreign_domains(conn, names):
    """name -> held_resources(...) plus ``active``, for every domain on the connection whose name
    is not in ``names`` (not a listed tenant)."""
    found = {}
    listed = set(names)
    for name in conn.domain_names():
        if name in listed:
            continue
        domain = conn.domain(name)
        if domain is None:
            continue
        active = domain.is_active()
        held = held_resources(_persistent_xml(domain, name), _live_xml(domain, name) if active else None)
        held["active"] = active
        found[name] = held
    return found


# tenant_domain_info's argument spec (plugins/modules/tenant_domain_info.py), here so that another
# module can run it inside its own call (runner.run_nested: preflight_info's ``libvirt``).
TENANT_DOMAIN_INFO_ARGS = dict(
    argument_spec=dict(
        LIBVIRT_OPTIONS,
        names=dict(type="list", elements="str", required=True),
        foreign=dict(type="bool", default=True),
        service=dict(type="dict", options=SERVICE_OPTIONS),
    ),
)


def tenant_domain_info(params, host, run):  # pylint: disable=unused-argument
    """The tenant_domain_info module: what the named domains (and, with ``foreign``, the others)
    hold; with ``service`` also whether libvirt is installed, enabled and running, and then a
    libvirt that does not answer (not installed or not started yet) is an answer, not a failure:
    ``domains_read`` is false and ``service.message`` says why."""
    service = read_service(host, params["service"]) if params["service"] else None
    # the service options as asked, without the ones left unset (a role compares them to its own)
    asked = dict((key, value) for key, value in params["service"].items() if value is not None) if params["service"] else None
    query = {"names": list(params["names"]), "foreign": params["foreign"], "uri": params["uri"], "service": asked}
    result = {"domains": {}, "foreign": {}, "domains_read": False, "service": service, "query": query}
    try:
        with connection(params["uri"]) as conn:
            result["domains"] = domain_assignments(conn, params["names"])
            result["foreign"] = foreign_domains(conn, params["names"]) if params["foreign"] else {}
            result["domains_read"] = True
    except NotAnswering as exc:
        if service is None:
            raise
        service.update(answers=False, message=str(exc))
        return result
    if service is not None:
        service.update(answers=True, message=None)
    return result


# tenant_domain's argument spec (plugins/modules/tenant_domain.py), here so that the preflight gate
# can check this stage's call inside its own (stage_checks).
# With ``tenants`` (the tenants stage's desired state, decided on the host: tenant_stage), these
# options of one domain are every tenant's settings; the others are refused with it.
TENANT_STAGE_SETTINGS = ("domain_type", "machine", "firmware", "memory_mode", "live", "shutdown_timeout", "force_off")
TENANT_STAGE_OPTIONS = dict(
    tenants=dict(type="list", elements="dict"),
    policy=dict(type="dict"),
    priorities=dict(type="dict"),
    guest_access=dict(type="dict"),
    vf_persist=dict(type="bool"),
    gpu_ids=dict(type="list", elements="str"),
    nic_ids=dict(type="list", elements="str"),
    preview=dict(type="dict", options=dict(
        sriov_pfs=dict(type="list", elements="dict", default=[]),
        hugepages=dict(type="list", elements="dict", default=[]),
        gpus=dict(type="list", elements="str", default=[]),
        vf_addresses=dict(type="dict", default={}),
    )),
)
TENANT_DOMAIN_ARGS = dict(
    argument_spec=dict(LIBVIRT_OPTIONS, domains=dict(type="list", elements="dict"), sriov_vfs=dict(type="dict"),
                       management_network=dict(type="dict", options=NETWORK_OPTIONS),
                       **dict(TENANT_DOMAIN_OPTIONS, **TENANT_STAGE_OPTIONS)),
    required_one_of=[("name", "domains", "tenants")],
    mutually_exclusive=([("domains", option) for option in sorted(TENANT_DOMAIN_OPTIONS)]
                        + [("tenants", option) for option in ["domains", "sriov_vfs"] + sorted(TENANT_DOMAIN_OPTIONS)
                           if option not in TENANT_STAGE_SETTINGS]),
    required_by=dict((option, "tenants") for option in sorted(TENANT_STAGE_OPTIONS) if option != "tenants"),
)
