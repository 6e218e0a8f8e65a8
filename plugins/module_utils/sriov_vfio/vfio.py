# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Binding PCI devices to vfio-pci / pci-stub, safely and persistently.

Binding follows the kernel's documented ``driver_override`` path (as driverctl does):
write the driver name to ``driver_override``, unbind the current driver, ask
``/sys/bus/pci/drivers_probe`` to probe the device again. ``new_id`` is never used: it
would grab every device with that id. Group rules: a VFIO user gets a whole IOMMU group,
so every other endpoint of the group must be held by vfio-pci/pci-stub or driverless.
"""

from __future__ import absolute_import, division, print_function

import errno
import json

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import stage as vfio_stage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import BootFiles, add_diffs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.device_use import (
    VFIO_HOLDERS, isolation, pci_function_of, pfs_kept_for_vfs, usage_of)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import DANGLING_GROUP, GROUP_FIX, dangling_group, group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.host_usage import HostUsage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_ids import parse_vendor_device
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params

__metaclass__ = type


def iommu_off_message(topology):
    vendor = topology.get("cpu_vendor")
    if vendor == "amd":
        fix = "Enable AMD-Vi/IOMMU in the BIOS and add iommu=pt (and amd_iommu=on if it was turned off)"
    else:
        fix = "Add intel_iommu=on iommu=pt"
    return ("the IOMMU is off (/sys/kernel/iommu_groups is empty): vfio-pci cannot take devices. "
            "%s to the kernel command line (gpuvirt.tenancy.iommu_grub does it) and reboot" % fix)


# ---------------------------------------------------------------------------- persistence
def render_udev_rules(devices):
    lines = ["# Installed by the gpuvirt.tenancy collection (vfio_bind, persist: true).",
             "# driver_override is set on add, before the host driver's module is loaded",
             "# (80-drivers.rules); gpuvirt-vfio.service rebinds what was bound earlier."]
    for address in sorted(devices):
        lines.append('ACTION=="add", SUBSYSTEM=="pci", KERNEL=="%s", ATTR{driver_override}="%s"'
                     % (address, devices[address]["driver"]))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- binding
class VfioBinder:
    """Decides and applies driver bindings on ``host`` (reads through ``host.fs``, sysfs
    writes through ``host.kernel``, modprobe through ``host.commands``). ``topology``: the
    host model; ``host_needed``: {address: [reasons]} from HostUsage; ``kept``: {PF: reason}, the
    SR-IOV PFs kept for their VFs (:func:`device_use.pfs_kept_for_vfs`), never taken, even with ``force``."""

    def __init__(self, host, topology, host_needed, kept=None):
        self.host = host
        self.fs = host.fs
        self.topology = topology
        self.pci = topology["pci_devices"]
        self.host_needed = host_needed or {}
        self.kept = kept or {}
        self.vf_sources = {}  # VF address -> its PF, for the VFs selected through vfs_of

    # -- selection -------------------------------------------------------------
    def select(self, devices=None, ids=None, vfs_of=None, allow_empty=False):
        """Addresses named by ``devices``, every device matching ``ids`` and the VFs of
        each PF in ``vfs_of``; each selector that names nothing is an input error, and so is
        naming nothing at all unless ``allow_empty``."""
        selected = []
        for text in devices or []:
            address = normalize_address(text)
            if address is None:
                raise InputError("devices: %r is not a PCI address (use the form 0000:82:00.0)" % text)
            if address not in self.pci:
                raise InputError("devices: no PCI device %s on this host (see lspci -D)" % address)
            selected.append(address)
        for text in ids or []:
            try:
                vendor, device = parse_vendor_device(text)
            except ValueError as exc:
                raise InputError("ids: %s" % exc)
            found = sorted(a for a, d in self.pci.items() if d["vendor_id"] == vendor and d["device_id"] == device)
            if not found:
                raise InputError("ids: no PCI device with id %s on this host" % text)
            selected.extend(found)
        self.vf_sources = {}
        for text in vfs_of or []:
            pf = self.resolve_pf(text, "vfs_of")
            vfs = self.pci[pf]["virtfns"]
            if not vfs:
                raise InputError("vfs_of: PF %s has no VFs; create them first (gpuvirt.tenancy.sriov_vfs)" % pf)
            for vf in vfs:
                self.vf_sources[vf] = pf
            selected.extend(vfs)
        if not selected and not allow_empty:
            raise InputError("devices, ids, vfs_of: name at least one device")
        return sorted(set(selected))

    def resolve_pf(self, text, option):
        address = pci_function_of(self.topology, text)
        if address is None:
            raise InputError("%s: %r is neither a PCI address nor the netdev of a PCI device" % (option, text))
        if address not in self.pci:
            raise InputError("%s: no PCI device %s on this host" % (option, address))
        return address

    # -- planning --------------------------------------------------------------
    def refuse_host_needed(self, targets, force):
        kept = ["%s: %s" % (address, self.kept[address]) for address in targets if address in self.kept]
        if kept:
            raise StateError("refusing to take %s. Nothing was changed. Leave it out of devices and ids" % "; ".join(kept))
        if force:
            return
        refused = []
        for address in targets:
            for reason in self.host_needed.get(address, []):
                refused.append("%s: %s" % (address, reason))
        if refused:
            raise StateError(
                "refusing to take devices the host needs: %s. Nothing was changed. Pick another "
                "device, or set force: true if the host really can do without it" % "; ".join(refused))

    def refuse_kept_peer(self, address, other, force):
        """A group member the host keeps is never bound along (not with bind_group either): the
        group goes to one tenant or to none, as the planner leaves such a group's GPUs and VFs out."""
        reasons = [self.kept[other]] if other in self.kept else [] if force else self.host_needed.get(other) or []
        if reasons:
            raise StateError("%s shares IOMMU group %s with %s, which the host keeps (%s): a VFIO user gets the whole group, "
                             "and a group goes to one tenant or to none. Nothing was changed. For %s: %s"
                             % (address, self.pci[address]["iommu_group"], other, "; ".join(reasons), address, GROUP_FIX))

    def refuse_dangling_groups(self, targets):
        """A device whose ``iommu_group`` link names a group that /sys/kernel/iommu_groups lacks: its
        group's other members cannot be known, so it is refused, naming the device (the rule the
        planner and the tenants stage apply: iommu_groups.dangling_group)."""
        dangling = [address for address in targets if dangling_group(self.topology, address) is not None]
        if dangling:
            raise StateError("%s. Nothing was changed" % "; ".join(
                "%s: %s" % (address, DANGLING_GROUP % (self.pci[address]["iommu_group"], address)) for address in dangling))

    def plan(self, addresses, driver="vfio-pci", group_policy="strict", force=False):
        """A list of per-device plans {address, driver_before, driver_after, ...}; raises
        InputError/StateError (nothing changed) when a rule forbids the binding."""
        targets = list(addresses)
        self.refuse_host_needed(targets, force)
        if driver == "vfio-pci" and not self.topology["iommu"]["enabled"]:
            raise StateError(iommu_off_message(self.topology))
        if driver == "vfio-pci":
            # vfio-pci takes a device only through its IOMMU group: without one, the unbind would
            # leave it with no driver at all
            groupless = [address for address in targets if self.pci[address]["iommu_group"] is None]
            if groupless:
                raise StateError("%s: no IOMMU group (no iommu_group link in sysfs), so vfio-pci cannot take %s. Nothing was "
                                 "changed. Check that the IOMMU covers this device (dmesg: DMAR/AMD-Vi), or bind it to "
                                 "pci-stub (driver: pci-stub) to only keep host drivers off it"
                                 % (", ".join(groupless), "it" if len(groupless) == 1 else "them"))
            self.refuse_dangling_groups(targets)
        if driver != "host":
            extra = []
            for address in targets:
                for other in group_endpoints(self.topology, address):
                    if other in targets or other in extra:
                        continue
                    other_driver = self.pci[other]["driver"]
                    self.refuse_kept_peer(address, other, force)
                    if group_policy == "bind_group":
                        extra.append(other)
                    elif other_driver not in VFIO_HOLDERS + (None,):
                        raise StateError(
                            "%s shares IOMMU group %s with %s, which is bound to the host driver %s: "
                            "a VFIO user gets the whole group. Bind it too (add it to devices, or "
                            "group_policy: bind_group), or move the device to another slot/enable ACS"
                            % (address, self.pci[address]["iommu_group"], other, other_driver))
            targets.extend(extra)
        self.refuse_host_needed(targets, force)
        plans = []
        for address in sorted(set(targets)):
            dev = self.pci[address]
            before = dev["driver"]
            want = None if driver == "host" else driver
            probe_only = False
            if driver == "host":
                # Handed back: no driver_override, and bound to what the kernel picks without one.
                # A holder bound with no override is the host's own default (ids= on the command
                # line): kept. No driver and no override is a run stopped before its probe (or a
                # device with no driver at all): probed again, a change only if a driver binds.
                probe_only = before is None and dev["driver_override"] is None
                rebind = dev["driver_override"] is not None or probe_only
                after = before if not rebind else None
                override_after = None
            else:
                rebind = before != want
                after = want
                override_after = want
            if rebind and before == "vfio-pci" and not force:
                busy = usage_of(self.fs, self.topology, address)
                if busy:
                    raise StateError("%s is in use by a tenant (%s): unbinding it from vfio-pci would block "
                                     "until it is released. Stop the domain/process first, or set force: true"
                                     % (address, "; ".join(busy)))
            group = dev["iommu_group"]
            plans.append({
                "address": address,
                "driver_before": before,
                "driver_after": after,
                "driver_override_before": dev["driver_override"],
                "driver_override_after": override_after,
                "rebind": rebind,
                "probe_only": probe_only,
                "iommu_group": group,
                "vfio_device": "/dev/vfio/%s" % group if driver == "vfio-pci" and group is not None else None,
                "group_added": address not in addresses,
            })
        return plans

    @staticmethod
    def changed(plans):
        """Whether the plans change a binding (a probe-only device counts once a driver took it)."""
        return any((p["rebind"] and not p["probe_only"]) or p["driver_override_before"] != p["driver_override_after"]
                   or (p["probe_only"] and p["driver_after"] is not None) for p in plans)

    # -- applying --------------------------------------------------------------
    def _write(self, run, host_path, value, what, changes_host=True):
        try:
            self.host.kernel.write(host_path, value)
        except (OSError, IOError) as exc:
            name = errno.errorcode.get(exc.errno, str(exc.errno))
            raise StateError("%s: writing %r to %s failed (%s: %s)" % (what, value, host_path, name, exc.strerror))
        if changes_host:
            run.changed = True

    def load_driver(self, driver):
        """Load the driver's module on the live machine when it is not loaded yet (a captured
        tree has what it has)."""
        modprobe = self.host.commands.which("modprobe") if self.host.live else None
        if modprobe:
            self.host.commands.run([modprobe, driver.replace("-", "_")])

    def apply(self, plans, driver, run):
        """Make the planned bindings; ``run.changed`` is set after each sysfs write."""
        if driver in VFIO_HOLDERS and not self.fs.isdir("/sys/bus/pci/drivers/%s" % driver):
            self.load_driver(driver)
            if not self.fs.isdir("/sys/bus/pci/drivers/%s" % driver):
                raise StateError("the %s driver is not available (modprobe %s failed?)" % (driver, driver))
        for plan in plans:
            address = plan["address"]
            base = "/sys/bus/pci/devices/%s" % address
            override_changes = plan["driver_override_before"] != plan["driver_override_after"]
            # The override is set before the unbind when binding, and cleared after it when handing
            # back: a run stopped between two writes leaves a state the next run does not take
            # for done (never a holder bound without its override when the host driver is wanted).
            if override_changes and driver != "host":
                self._write(run, base + "/driver_override", plan["driver_override_after"] or "\n", address)
            if not plan["rebind"]:
                continue
            if self.fs.readlink_name(base + "/driver"):
                self._write(run, base + "/driver/unbind", address, address)
            if override_changes and driver == "host":
                self._write(run, base + "/driver_override", "\n", address)
            self._write(run, "/sys/bus/pci/drivers_probe", address, address, changes_host=not plan["probe_only"])
            now = self.fs.readlink_name(base + "/driver")
            plan["driver_after"] = now
            if plan["probe_only"] and now is not None:
                run.changed = True
            if driver != "host" and now != driver:
                raise StateError("%s: still bound to %s after drivers_probe, not %s (see dmesg)" % (address, now, driver))
            group = self.fs.readlink_name(base + "/iommu_group")
            if driver == "vfio-pci" and group is not None:
                plan["vfio_device"] = "/dev/vfio/%s" % group
        return plans

    # -- persistence -----------------------------------------------------------
    def persist_changes(self, plans, driver, files):
        """Changes to /etc/gpuvirt/vfio.json, the udev rule, modules-load.d and the unit."""
        config = files.load_json(restore.VFIO_CONFIG, {})
        devices = dict(config.get("devices") or {})
        sources = self.vf_sources
        for pf in set(sources.values()):
            # VFs recreated with another count: forget this PF's VFs that no longer exist.
            for address in [a for a, d in devices.items() if d.get("vfs_of") == pf and a not in sources]:
                del devices[address]
        for plan in plans:
            if driver == "host":
                devices.pop(plan["address"], None)
            else:
                entry = {"driver": driver}
                if plan["address"] in sources:
                    entry["vfs_of"] = sources[plan["address"]]
                devices[plan["address"]] = entry
        new_config = json.dumps({"devices": dict(sorted(devices.items()))}, indent=2, sort_keys=True) + "\n"
        changes = files.change(restore.VFIO_CONFIG, new_config)
        changes += files.change(restore.UDEV_RULES, render_udev_rules(devices))
        uses_vfio = any(d.get("driver") == "vfio-pci" for d in devices.values())
        changes += files.change(restore.MODULES_LOAD, "# Installed by gpuvirt.tenancy (vfio_bind).\nvfio-pci\n" if uses_vfio else None)
        changes += files.service_changes(restore.VFIO_UNIT, restore.VFIO_UNIT_TEXT)
        return changes


# ---------------------------------------------------------------------------- the module
def reload_boot_config(host):
    """Make systemd and udev read the changed unit and rule (live machine only)."""
    if not host.live:
        return
    for argv in (["systemctl", "daemon-reload"], ["udevadm", "control", "--reload"]):
        program = host.commands.which(argv[0])
        if program:
            host.commands.run([program] + argv[1:])


def driver_states(plans):
    """The drivers of the planned devices, before and after, as diff texts."""
    before = dict((p["address"], {"driver": p["driver_before"], "driver_override": p["driver_override_before"]}) for p in plans)
    after = dict((p["address"], {"driver": p["driver_after"], "driver_override": p["driver_override_after"]}) for p in plans)
    return json.dumps(before, indent=2, sort_keys=True) + "\n", json.dumps(after, indent=2, sort_keys=True) + "\n"


def call_pfs(topology, sriov_params, wanted_pfs):
    """The PFs of the call's SR-IOV part (``sriov_params``: sriov_vfs's options) and ``wanted_pfs``
    (``vfs_of``, the PFs of ``sriov_pfs`` with VFs), as addresses (a name nothing matches is
    refused later, naming its option)."""
    texts = list(wanted_pfs)
    if sriov_params is not None:
        texts += [entry["pf"] for entry in sriov_params.get("pfs") or []] + ([sriov_params["pf"]] if sriov_params.get("pf") else [])
    return [address for address in (pci_function_of(topology, text) for text in texts) if address]


def sriov_first(sriov_params, named, wanted_pfs, params, host, run, topology, needed, kept):
    """With an SR-IOV part (``sriov_params``: the options of sriov_vfs, from ``sriov`` or built
    from ``sriov_pfs``): check the devices named outright (``named``, and
    ``ids``) on the host as it is (``kept``: its PFs kept for their VFs), then run sriov_vfs in
    this call (VFs and their settings before they are bound). -> (its result or None, the PFs of
    ``wanted_pfs`` whose VFs it creates only outside check mode)."""
    if sriov_params is None:
        return None, []
    before = VfioBinder(host, topology, needed, kept)
    # the devices named outright are decided now, so that a refusal comes before any VF changes
    selected = before.select(named, params["ids"], None, allow_empty=True)
    before.plan(selected, driver=params["driver"], group_policy=params["group_policy"], force=params["force"])
    wanted = [before.resolve_pf(text, "vfs_of") for text in wanted_pfs]
    result = sriov.sriov_vfs(sriov_params, host, run, topology=topology)
    to_come = []
    if run.check_mode:
        planned = dict((r["pf"], r) for r in (result["pfs"] if "pfs" in result else [result]))
        to_come = sorted(set(pf for pf in wanted if pf in planned and (planned[pf]["recreated"] or not before.pci[pf]["virtfns"])))
    return result, to_come


def read_model(host, params, fresh=False):
    """The host model, the devices of ``gpu_ids`` read as GPUs (again with ``fresh``)."""
    try:
        return host.topology(params.get("gpu_ids") or (), fresh=fresh)
    except ValueError as exc:
        raise InputError("gpu_ids: %s" % exc)


def stage_sriov(params, host, topology):
    """The SR-IOV part of the call: the options of sriov_vfs (``sriov`` as given, or the stage's
    request from ``sriov_pfs``: sriov_vfio/stage.py), or None; and the PFs whose VFs go
    to vfio-pci (``vfs_of`` and the PFs of ``sriov_pfs`` with VFs)."""
    if params.get("sriov") is not None:
        options = nested_params("sriov", "gpuvirt.tenancy.sriov_vfs", sriov.MODULE_ARGS, params["sriov"])
        return options, list(params["vfs_of"] or [])
    options, pfs = vfio_stage.sriov_request(params, host, topology)
    return options, list(params["vfs_of"] or []) + pfs


def vfio_bind(params, host, run):
    """The vfio_bind module: decide, then act unless in check mode; with ``sriov`` or
    ``sriov_pfs``, the VFs first, in the same call; with ``gpus``, the tenant GPUs and the
    functions of their IOMMU groups. The host model and what the host needs are read once, and
    again only after the VFs changed."""
    topology = read_model(host, params)
    needed = HostUsage(host.fs, ip_addr_json=host.ip_addresses_json()).report()
    sriov_params, wanted_pfs = stage_sriov(params, host, topology)
    gpus, companions = vfio_stage.tenant_gpus(topology, params.get("gpus"))
    # the service VM's NVSwitches go to vfio-pci too (its domain's host devices are managed='no')
    switches = []
    if params.get("fabric_vm"):
        # tenancy/fabric_vm only with fabric_vm: a call without a service VM does not import it
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fabric_vm import fabric_switches
        switches = fabric_switches(params["fabric_vm"], topology)
    # /proc and the domain files are read once, and again only when the VFs changed
    kept = pfs_kept_for_vfs(host.fs, topology, call_pfs(topology, sriov_params, wanted_pfs))
    sriov_result, vfs_to_come = sriov_first(sriov_params, list(params["devices"] or []) + gpus + companions + switches, wanted_pfs,
                                            params, host, run, topology, needed, kept)
    if sriov_result is not None and sriov_result["changed"] and not run.check_mode:
        topology = read_model(host, params, fresh=True)
        needed = HostUsage(host.fs, ip_addr_json=host.ip_addresses_json()).report()
        gpus, companions = vfio_stage.tenant_gpus(topology, params.get("gpus"))
        kept = pfs_kept_for_vfs(host.fs, topology, call_pfs(topology, sriov_params, wanted_pfs))
    binder = VfioBinder(host, topology, needed, kept)
    vfs_of = [text for text in wanted_pfs if binder.resolve_pf(text, "vfs_of") not in vfs_to_come]
    addresses = binder.select(list(params["devices"] or []) + gpus + companions + switches, params["ids"], vfs_of,
                              allow_empty=sriov_params is not None or params.get("gpus") is not None or bool(switches))
    driver = params["driver"]
    plans = binder.plan(addresses, driver=driver, group_policy=params["group_policy"], force=params["force"])
    changed = binder.changed(plans)
    files = BootFiles(host)
    changes = binder.persist_changes(plans, driver, files) if params["persist"] else []
    enable = params["persist"] and files.wants_link_missing(restore.VFIO_UNIT)
    before, after = driver_states(plans)
    if not run.check_mode:
        if any(p["rebind"] or p["driver_override_before"] != p["driver_override_after"] for p in plans):
            binder.apply(plans, driver, run)
            changed = binder.changed(plans)
        if changes or enable:
            files.apply(changes, enable_unit=restore.VFIO_UNIT)
            run.changed = True
            reload_boot_config(host)
        after = driver_states(plans)[1]
    for plan in plans:
        if plan["address"] in needed:
            run.warn("force: %s is needed by the host (%s)" % (plan["address"], "; ".join(needed[plan["address"]])))
    run.diff.add("PCI drivers", before, after)
    add_diffs(run.diff, changes)
    return {
        "changed": changed or bool(changes) or bool(enable) or bool(sriov_result and sriov_result["changed"]),
        "devices": [dict((k, p[k]) for k in ("address", "driver_before", "driver_after", "iommu_group", "vfio_device", "group_added"))
                    for p in plans],
        "companions": companions,
        "nvswitches": switches,
        "isolation": isolation(topology, [p["address"] for p in plans if not p["group_added"]],
                               dict(needed, **dict((pf, [why]) for pf, why in kept.items()))),
        "persisted_files": [path for path, _b, _a in changes],
        "sriov": sriov_result,
        "vfs_to_come": vfs_to_come,
    }


# vfio_bind's argument spec (plugins/modules/vfio_bind.py), here so that the preflight gate can
# check this stage's call inside its own (stage_checks).
VFIO_BIND_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
        devices=dict(type="list", elements="str"),
        ids=dict(type="list", elements="str"),
        vfs_of=dict(type="list", elements="str"),
        driver=dict(type="str", choices=["vfio-pci", "pci-stub", "host"], default="vfio-pci"),
        group_policy=dict(type="str", choices=["strict", "bind_group"], default="strict"),
        persist=dict(type="bool", default=True),
        force=dict(type="bool", default=False),
        sriov=dict(type="dict"),
        # the SR-IOV/VFIO stage's desired state, decided on the host (sriov_vfio/stage.py)
        sriov_pfs=dict(type="list", elements="dict", options=vfio_stage.SRIOV_PF_OPTIONS),
        gpus=dict(type="list", elements="str"),
        gpu_ids=dict(type="list", elements="str", default=[]),
        autoprobe=dict(type="bool", default=False),
        # the Fabric Manager service VM's NVSwitches (tenancy/fabric_vm), as the tenants stage's fabric_vm gives them
        fabric_vm=dict(type="dict"),
    ),
    required_one_of=[("devices", "ids", "vfs_of", "sriov", "sriov_pfs", "gpus", "fabric_vm")],
    mutually_exclusive=[("sriov", "sriov_pfs")],
)
