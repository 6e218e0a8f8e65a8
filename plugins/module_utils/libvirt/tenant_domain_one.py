# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One tenant's domain for ``tenant_domain``: its options (:data:`TENANT_DOMAIN_OPTIONS`), its
request checked without libvirt (:class:`DomainRequest`: spec, pins, guest, MMIO window) and
its decision and action on the connection (:class:`TenantDomain`: define, update, live changes,
pins, autostart, start or remove)."""

from __future__ import absolute_import, division, print_function

import time
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError, labelled
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_cells import (
    check_cells_host, check_cells_nodeset, expander_layout, memnode_modes, read_cells)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import device_addresses
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import PinRequest, apply_pinning, check_page_size
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import (
    cputune_qos, disk_targets, firmware_of, host_cpus, mmio_window_of, network_nics, read_pinning, vcpu_counts)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import CPU_QOS, IOTUNE_KEYS, copy_tree, to_kib, to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_options import GUEST_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.change import _definition_diff, _persistent_xml, _running_diff
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.host_limits import mmio_window
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_switch import switch_layout
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.live_pins import (
    PIN_OPTIONS, apply_live_pins, live_pin_changes, pin_diff_lines, pin_restart_reasons)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import LibvirtError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import DEFAULT_FIRMWARE, FIRMWARES, over_host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import TenantSpec, UNLIMITED_QUOTA

__metaclass__ = type


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
    firmware=dict(type="str", default=DEFAULT_FIRMWARE, choices=list(FIRMWARES)),
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
    numa_cells=dict(type="list", elements="dict", default=[], options=dict(
        node=dict(type="int", required=True),
        vcpus=dict(type="str", required=True),
        memory_kib=dict(type="int", required=True),
        devices=dict(type="list", elements="str", default=[]),
    )),
    pcie_switches=dict(type="list", elements="list", default=[]),
    **dict(PIN_OPTIONS, **GUEST_OPTIONS)
)
# A domain that is not removed needs its size; checked per domain (the top-level state's
# default must not demand a size when the domains come as a list).
TENANT_DOMAIN_REQUIRED_IF = [("state", "defined", ("vcpus", "memory_mb")), ("state", "running", ("vcpus", "memory_mb"))]
# The result fields of one domain that are flags; with ``domains``, each names the domains where it is true.
TENANT_DOMAIN_FLAGS = ("created", "defined", "powered_on", "removed", "stopped", "forced_off", "live_changed", "restart_required",
                       "autostart")


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
        # called with the run just before the domain starts (the tenants stage: its Fabric Manager partition activated)
        self.before_start = None
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
        if (read_cells(before) != read_cells(after) or expander_layout(before) != expander_layout(after)
                or memnode_modes(before) != memnode_modes(after)):
            later.append("guest NUMA cells")
        if switch_layout(before) != switch_layout(after):
            later.append("emulated PCIe switches")
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
            if self.before_start is not None:
                self.before_start(run)
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
                "powered_on": self.start, "removed": self.remove, "stopped": self.stopped, "forced_off": self.forced,
                "released_devices": self.released, "live_changed": bool(self.live_changes) or bool(self.pin_changes),
                "restart_required": self.restart_required, "restart_reasons": list(self.warnings), "autostart": self.autostart}


def _on_off(flag):
    return "enable" if flag else "disable"


class DomainRequest:
    """One domain's options, validated without libvirt: its spec, pins and the MMIO window
    (with the warnings that go with it). ``label``: how an error names it (``domains[1]
    (tenant-b)``), None for the module's single domain."""

    def __init__(self, options, host, label=None, check_mode=False, planned=False):
        """``planned``: an entry of the tenants stage (tenant_domain_call.planned_options),
        whose fields the tenant records and the planner made: not checked again."""
        self.options = options
        self.label = label
        self.warnings = []
        self.guest = self.removal = None
        with labelled(label):
            if options["shutdown_timeout"] < 0:
                raise InputError("shutdown_timeout: %d is negative; give the seconds to wait for the guest (0 to not wait)"
                                 % options["shutdown_timeout"])
            if options["state"] == "absent":
                # the guest's files (libvirt/guest_image) only where a tenant is removed or has a guest: a
                # tenant without image, management or data NIC does not import them (each call compiles its imports)
                from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import GuestRemoval
                self.spec, self.pins = TenantSpec.named(options["name"]), None
                self.removal = GuestRemoval(host, options["name"], options.get("guest_dir"))
                return
            if options.get("image"):
                from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import tenant_paths
                # the tenant's own disk comes first: the guest boots from it
                disk = {"path": tenant_paths(options["guest_dir"], options["name"])["disk"], "format": "qcow2", "target": None}
                options = dict(options, disks=[disk] + list(options["disks"] or []))
            self.spec = TenantSpec(options, planned=planned)
            if options.get("image") or options.get("management") or options.get("data_nic") is not None:
                self._plan_guest(host, options, check_mode, planned)
            self.pins = PinRequest(options["vcpu_pins"], options["emulator_cpus"], options["memory_mode"], options["nodeset"])
            check_cells_nodeset(self.spec.cells, self.pins.nodeset, self.spec.name)
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

    def _plan_guest(self, host, options, check_mode, planned=False):
        """The guest's disk, seed, management NIC and data NIC (guest_image), checked and read now."""
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import console_log_path, plan_guest
        spec = self.spec
        vf_mac = spec.interfaces[spec.network_vfs[0]]["mac"] if spec.network_vfs else None
        self.guest = plan_guest(host, spec.name, options, vf_mac=vf_mac, check_mode=check_mode, planned=planned)
        self.warnings.extend(self.guest.notes)
        spec.seed_cdrom = self.guest.seed_cdrom()
        spec.management = self.guest.management
        spec.data_nic = self.guest.data_nic
        if options.get("image"):
            spec.console_log = console_log_path(spec.name)

    def guest_fields(self):
        """What the result says of the guest: its files, console log, management NIC and data NIC."""
        if self.guest is None:
            return None
        management, data_nic = self.guest.management, self.guest.data_nic
        return {"disk": self.guest.paths["disk"] if self.guest.image else None, "seed": self.guest.seed_cdrom(),
                "console_log": self.spec.console_log, "made": self.guest.changed,
                "management": dict((k, management.get(k)) for k in ("network", "bridge", "mac", "address")) if management else None,
                "data_nic": dict((k, data_nic.get(k)) for k in ("network", "bridge", "mac", "vlan")) if data_nic else None}

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

    def check_cells(self, model):
        """Refuse guest cells on nodes the host does not have (``model``: domain_readers.host_cpus),
        before any domain changes."""
        if self.present and self.spec.cells:
            with labelled(self.label):
                check_cells_host(self.spec.cells, model, self.spec.name)

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
