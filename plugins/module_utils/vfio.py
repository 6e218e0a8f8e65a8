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

from __future__ import annotations

import errno
import json
import os
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import boot_script as boot
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError, atomic_write
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host_usage import HostUsage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.topology import read_topology

PCI_ADDRESS_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ID_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]{4}):(?:0x)?([0-9a-fA-F]{4})$")
VFIO_HOLDERS = ("vfio-pci", "pci-stub")
LIBVIRT_XML_DIRS = ("/etc/libvirt/qemu", "/run/libvirt/qemu")


def normalize_address(text):
    """``81:00.0`` / ``0000:81:00.0`` (any case) -> ``0000:81:00.0``; None if malformed."""
    text = (text or "").strip().lower()
    if re.match(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", text):
        text = "0000:" + text
    return text if PCI_ADDRESS_RE.match(text) else None


class SysfsWriter:
    """Writes sysfs attributes under the same root the reader uses (tests replace it
    with a fake kernel)."""

    def __init__(self, fs):
        self.fs = fs

    def write(self, host_path, value):
        with open(self.fs.path(host_path), "w", encoding="utf-8") as handle:
            handle.write(value)


# ---------------------------------------------------------------------------- in use
def vfio_group_holders(fs, group):
    """PIDs holding ``/dev/vfio/<group>`` open (from /proc/<pid>/fd links)."""
    if group is None:
        return []
    target = "/dev/vfio/%s" % group
    pids = []
    for entry in fs.listdir("/proc"):
        if not entry.isdigit():
            continue
        for fd in fs.listdir("/proc/%s/fd" % entry):
            if fs.realpath("/proc/%s/fd/%s" % (entry, fd)) == target:
                pids.append(int(entry))
                break
    return sorted(pids)


def _hostdev_addresses(text):
    """PCI addresses of ``<hostdev type='pci'>`` sources in a libvirt domain XML."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return set()
    found = set()
    for hostdev in root.iter("hostdev"):
        if hostdev.get("type") != "pci":
            continue
        address = hostdev.find("source/address")
        if address is None:
            continue
        try:
            numbers = tuple(int(address.get(k, "0"), 0) for k in ("domain", "bus", "slot", "function"))
            found.add("%04x:%02x:%02x.%x" % numbers)
        except ValueError:
            continue
    return found


def libvirt_domains_using(fs, address):
    """Names of libvirt domains (defined or running) with ``address`` as a PCI hostdev."""
    names = set()
    for directory in LIBVIRT_XML_DIRS:
        for entry in fs.listdir(directory):
            if entry.endswith(".xml"):
                text = fs.read("%s/%s" % (directory, entry))
                if text and address in _hostdev_addresses(text):
                    names.add(entry[:-4])
    return sorted(names)


def usage_of(fs, topology, address):
    """Why a device is in use by a tenant right now: a list of reasons (empty if free)."""
    dev = topology["pci_devices"].get(address) or {}
    reasons = []
    if dev.get("driver") == "vfio-pci":
        pids = vfio_group_holders(fs, dev.get("iommu_group"))
        if pids:
            reasons.append("/dev/vfio/%s is held open by pid %s" % (dev.get("iommu_group"), ", ".join(str(p) for p in pids)))
    domains = libvirt_domains_using(fs, address)
    if domains:
        reasons.append("attached to libvirt domain %s" % ", ".join(domains))
    return reasons


# ---------------------------------------------------------------------------- groups
def group_endpoints(topology, address):
    """The other endpoints (bridges aside) of a device's IOMMU group."""
    pci = topology["pci_devices"]
    group = (pci.get(address) or {}).get("iommu_group")
    if group is None:
        return []
    members = topology["iommu"]["groups"].get(str(group)) or [
        a for a, d in pci.items() if d.get("iommu_group") == group]
    return [m for m in members if m != address and not (pci.get(m) or {}).get("is_bridge")]


def isolation(topology, addresses, host_needed=None):
    """Can each of ``addresses`` go to a different tenant? Not viable when two of them
    share an IOMMU group (no ACS isolation between them), when a group also holds a
    device the host needs or one on a host driver, or without an IOMMU. Group peers that
    are driverless or on vfio-pci/pci-stub only go along (``notes``).
    Returns {viable, groups: {address: group}, reasons: [...], notes: [...]}."""
    pci = topology["pci_devices"]
    host_needed = host_needed or {}
    reasons, notes = [], []
    groups = {}
    if not topology["iommu"]["enabled"]:
        return {"viable": False, "groups": {a: None for a in addresses}, "notes": [],
                "reasons": ["the IOMMU is off: no device can be isolated"]}
    selected = set(addresses)
    for address in addresses:
        group = (pci.get(address) or {}).get("iommu_group")
        groups[address] = group
        if group is None:
            reasons.append("%s has no IOMMU group" % address)
            continue
        others = group_endpoints(topology, address)
        shared = [o for o in others if o in selected]
        if shared:
            reasons.append("%s shares IOMMU group %s with %s (no ACS isolation between them): "
                           "they can only go to the same tenant" % (address, group, ", ".join(shared)))
        for other in others:
            if other in selected:
                continue
            if other in host_needed:
                reasons.append("IOMMU group %s of %s holds %s, which the host needs" % (group, address, other))
            elif (pci.get(other) or {}).get("driver") not in VFIO_HOLDERS + (None,):
                reasons.append("IOMMU group %s of %s holds %s, bound to the host driver %s"
                               % (group, address, other, pci[other]["driver"]))
            else:
                notes.append("%s goes along with %s to its tenant (IOMMU group %s)" % (other, address, group))
    return {"viable": not reasons, "groups": groups, "reasons": reasons, "notes": notes}


def iommu_off_message(topology):
    vendor = topology.get("cpu_vendor")
    if vendor == "amd":
        fix = "Enable AMD-Vi/IOMMU in the BIOS and add iommu=pt (and amd_iommu=on if it was turned off)"
    else:
        fix = "Add intel_iommu=on iommu=pt"
    return ("the IOMMU is off (/sys/kernel/iommu_groups is empty): vfio-pci cannot take devices. "
            "%s to the kernel command line (gpuvirt.tenancy.iommu_grub does it) and reboot" % fix)


# ---------------------------------------------------------------------------- persistence
class BootFiles:
    """Files under the root that make bindings and VFs come back at boot. Each method
    returns a list of (host_path, before_text, after_text) changes to make."""

    def __init__(self, fs):
        self.fs = fs

    def _raw(self, host_path):
        try:
            with open(self.fs.path(host_path), "r", encoding="utf-8") as handle:
                return handle.read()
        except (OSError, IOError):
            return None

    def load_json(self, host_path, default):
        text = self._raw(host_path)
        if not text:
            return default
        try:
            value = json.loads(text)
        except ValueError:
            return default
        return value if isinstance(value, dict) else default

    def change(self, host_path, after):
        before = self._raw(host_path)
        if before == after:
            return []
        return [(host_path, before, after)]

    def service_changes(self, unit, unit_text):
        changes = self.change(boot.SCRIPT_PATH, boot.SCRIPT)
        changes += self.change("%s/%s" % (boot.UNIT_DIR, unit), unit_text)
        return changes

    def wants_link_missing(self, unit):
        return not os.path.lexists(self.fs.path("%s/%s" % (boot.WANTS_DIR, unit)))

    def apply(self, changes, enable_unit=None):
        for host_path, _before, after in changes:
            path = self.fs.path(host_path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if after is None:
                if os.path.lexists(path):
                    os.unlink(path)
                continue
            mode = 0o755 if host_path == boot.SCRIPT_PATH else 0o644
            atomic_write(path, after, mode=mode)
        if enable_unit and self.wants_link_missing(enable_unit):
            link = self.fs.path("%s/%s" % (boot.WANTS_DIR, enable_unit))
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink("%s/%s" % (boot.UNIT_DIR, enable_unit), link)


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
    """Decides and applies driver bindings. ``topology``: the host model;
    ``host_needed``: {address: [reasons]} from HostUsage; ``writer``: sysfs writer;
    ``modprobe``: callable(module_name) loading a module (or None)."""

    def __init__(self, fs, topology, host_needed, writer=None, modprobe=None):
        self.fs = fs if isinstance(fs, Sysfs) else Sysfs(fs)
        self.topology = topology
        self.pci = topology["pci_devices"]
        self.host_needed = host_needed or {}
        self.writer = writer or SysfsWriter(self.fs)
        self.modprobe = modprobe

    # -- selection -------------------------------------------------------------
    def select(self, devices=None, ids=None, vfs_of=None):
        """Addresses named by ``devices``, every device matching ``ids`` and the VFs of
        each PF in ``vfs_of``; each selector that names nothing is an input error."""
        selected = []
        for text in devices or []:
            address = normalize_address(text)
            if address is None:
                raise InputError("devices: %r is not a PCI address (use the form 0000:82:00.0)" % text)
            if address not in self.pci:
                raise InputError("devices: no PCI device %s on this host (see lspci -D)" % address)
            selected.append(address)
        for text in ids or []:
            match = ID_RE.match(text.strip())
            if not match:
                raise InputError("ids: %r is not a vendor:device id (use the form 10de:2330)" % text)
            vendor, device = ("0x" + match.group(1).lower(), "0x" + match.group(2).lower())
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
        if not selected:
            raise InputError("devices, ids, vfs_of: name at least one device")
        return sorted(set(selected))

    def resolve_pf(self, text, option):
        address = normalize_address(text)
        if address is None:
            netdev = (self.topology.get("netdevs") or {}).get(text)
            address = netdev and netdev.get("pci_address")
            if not address:
                raise InputError("%s: %r is neither a PCI address nor the netdev of a PCI device" % (option, text))
        if address not in self.pci:
            raise InputError("%s: no PCI device %s on this host" % (option, address))
        return address

    # -- planning --------------------------------------------------------------
    def refuse_host_needed(self, targets, force):
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

    def plan(self, addresses, driver="vfio-pci", group_policy="strict", force=False):
        """A list of per-device plans {address, driver_before, driver_after, ...}; raises
        InputError/StateError (nothing changed) when a rule forbids the binding."""
        targets = list(addresses)
        self.refuse_host_needed(targets, force)
        if driver == "vfio-pci" and not self.topology["iommu"]["enabled"]:
            raise StateError(iommu_off_message(self.topology))
        if driver != "host":
            extra = []
            for address in targets:
                for other in group_endpoints(self.topology, address):
                    if other in targets or other in extra:
                        continue
                    other_driver = self.pci[other]["driver"]
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
            if driver == "host":
                rebind = before in VFIO_HOLDERS or dev["driver_override"] is not None
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
                "iommu_group": group,
                "vfio_device": "/dev/vfio/%s" % group if driver == "vfio-pci" and group is not None else None,
                "group_added": address not in addresses,
            })
        return plans

    @staticmethod
    def changed(plans):
        return any(p["rebind"] or p["driver_override_before"] != p["driver_override_after"] for p in plans)

    # -- applying --------------------------------------------------------------
    def _write(self, host_path, value, what):
        try:
            self.writer.write(host_path, value)
        except (OSError, IOError) as exc:
            name = errno.errorcode.get(exc.errno, str(exc.errno))
            raise StateError("%s: writing %r to %s failed (%s: %s)" % (what, value, host_path, name, exc.strerror))

    def apply(self, plans, driver):
        if driver in VFIO_HOLDERS and not self.fs.isdir("/sys/bus/pci/drivers/%s" % driver):
            if self.modprobe:
                self.modprobe(driver.replace("-", "_"))
            if not self.fs.isdir("/sys/bus/pci/drivers/%s" % driver):
                raise StateError("the %s driver is not available (modprobe %s failed?)" % (driver, driver))
        for plan in plans:
            address = plan["address"]
            base = "/sys/bus/pci/devices/%s" % address
            if plan["driver_override_before"] != plan["driver_override_after"]:
                self._write(base + "/driver_override", plan["driver_override_after"] or "\n", address)
            if not plan["rebind"]:
                continue
            current = self.fs.readlink_name(base + "/driver")
            if current:
                self._write(base + "/driver/unbind", address, address)
            self._write("/sys/bus/pci/drivers_probe", address, address)
            now = self.fs.readlink_name(base + "/driver")
            plan["driver_after"] = now
            if driver != "host" and now != driver:
                raise StateError("%s: still bound to %s after drivers_probe, not %s (see dmesg)" % (address, now, driver))
            group = self.fs.readlink_name(base + "/iommu_group")
            if driver == "vfio-pci" and group is not None:
                plan["vfio_device"] = "/dev/vfio/%s" % group
        return plans

    # -- persistence -----------------------------------------------------------
    def persist_changes(self, plans, driver, files=None):
        """Changes to /etc/gpuvirt/vfio.json, the udev rule, modules-load.d and the unit."""
        files = files or BootFiles(self.fs)
        config = files.load_json(boot.VFIO_CONFIG, {})
        devices = dict(config.get("devices") or {})
        sources = getattr(self, "vf_sources", {})
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
        changes = files.change(boot.VFIO_CONFIG, new_config)
        changes += files.change(boot.UDEV_RULES, render_udev_rules(devices))
        uses_vfio = any(d.get("driver") == "vfio-pci" for d in devices.values())
        changes += files.change(boot.MODULES_LOAD, "# Installed by gpuvirt.tenancy (vfio_bind).\nvfio-pci\n" if uses_vfio else None)
        changes += files.service_changes(boot.VFIO_UNIT, boot.VFIO_UNIT_TEXT)
        return changes


# ---------------------------------------------------------------------------- module glue
ROOT = "/"
WRITER = SysfsWriter


def run_vfio_bind(module):
    """The vfio_bind module: decide, then act unless in check mode."""
    params = module.params
    fs = Sysfs(ROOT)
    topology = read_topology(ROOT)
    ip_bin = module.get_bin_path("ip") if ROOT == "/" else None
    addr_json = module.run_command([ip_bin, "-j", "addr", "show"])[1] if ip_bin else None
    needed = HostUsage(ROOT, ip_addr_json=addr_json).report()
    modprobe_bin = module.get_bin_path("modprobe") if ROOT == "/" else None

    def modprobe(name):
        if modprobe_bin:
            module.run_command([modprobe_bin, name])

    binder = VfioBinder(fs, topology, needed, writer=WRITER(fs), modprobe=modprobe)
    addresses = binder.select(params["devices"], params["ids"], params["vfs_of"])
    driver = params["driver"]
    plans = binder.plan(addresses, driver=driver, group_policy=params["group_policy"], force=params["force"])
    changed = binder.changed(plans)
    files = BootFiles(fs)
    changes = binder.persist_changes(plans, driver, files) if params["persist"] else []
    enable = params["persist"] and files.wants_link_missing(boot.VFIO_UNIT)
    before = {p["address"]: {"driver": p["driver_before"], "driver_override": p["driver_override_before"]} for p in plans}
    after = {p["address"]: {"driver": p["driver_after"], "driver_override": p["driver_override_after"]} for p in plans}
    if not module.check_mode:
        if changed:
            binder.apply(plans, driver)
        if changes or enable:
            files.apply(changes, enable_unit=boot.VFIO_UNIT)
            if ROOT == "/":
                systemctl = module.get_bin_path("systemctl")
                udevadm = module.get_bin_path("udevadm")
                if systemctl:
                    module.run_command([systemctl, "daemon-reload"])
                if udevadm:
                    module.run_command([udevadm, "control", "--reload"])
        after = {p["address"]: {"driver": p["driver_after"], "driver_override": p["driver_override_after"]} for p in plans}
    for plan in plans:
        if plan["address"] in needed:
            module.warn("force: %s is needed by the host (%s)" % (plan["address"], "; ".join(needed[plan["address"]])))
    diff = [{"before_header": "PCI drivers", "after_header": "PCI drivers",
             "before": json.dumps(before, indent=2, sort_keys=True) + "\n",
             "after": json.dumps(after, indent=2, sort_keys=True) + "\n"}]
    diff += [{"before_header": path, "after_header": path, "before": b or "", "after": a or ""} for path, b, a in changes]
    return {
        "changed": changed or bool(changes) or bool(enable),
        "devices": [{k: p[k] for k in ("address", "driver_before", "driver_after", "iommu_group", "vfio_device", "group_added")}
                    for p in plans],
        "isolation": isolation(topology, [p["address"] for p in plans if not p["group_added"]], needed),
        "persisted_files": [path for path, _b, _a in changes],
        "diff": diff,
    }
