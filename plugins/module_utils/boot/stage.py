# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot stage's host-side decisions, made inside iommu_grub's one call from the stage's
desired state as the inventory says it: the NVIDIA host stack kept off the tenants' GPUs
(``gpu_stack``: modprobe.d, the host daemons, the initramfs that carries the module
configuration) and the ConnectX firmware for SR-IOV (``firmware``: SRIOV_EN, NUM_OF_VFS, the
link type of VPI ports, loaded by a firmware reset where allowed). The pure decisions are
:mod:`host_stack` and :mod:`mlxconfig`; this module reads the host model once with the one
topology reader and acts through the host seam, only outside check mode.

Each part has a ``plan`` (reads, decides, adds its diff; every input checked) and an ``apply``
(the writes and commands), so that iommu_grub checks every input of the stage before its first
write."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import captured_programs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.systemd import show_argv, units_by_id
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import host_stack
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import port_modes
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx.pf_lookup import resolve_pf
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.bootloader import DEBIAN_LIKE, RHEL_LIKE, read_os_release
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Diff

__metaclass__ = type

INITRAMFS_TOOLS = {
    # (list the image, rebuild it) per OS family; {release}: the running kernel's
    "Debian": (["lsinitramfs", "/boot/initrd.img-{release}"], ["update-initramfs", "-u", "-k", "{release}"]),
    "RedHat": (["lsinitrd", "/boot/initramfs-{release}.img"], ["dracut", "-f", "--kver", "{release}"]),
}
# The early driver's files that the initramfs carries or is built from (boot/early_driver.py).
EARLY_FILES = (("/etc/modprobe.d/gpuvirt-prebind.conf", True), ("/etc/initramfs-tools/modules", False),
               ("/etc/dracut.conf.d/gpuvirt-prebind.conf", False))
FIRMWARE_PACKAGE = "mstflint"


def os_family(fs):
    """Debian / RedHat / None, from the host's (or the capture's) /etc/os-release."""
    words = read_os_release(fs)
    if words & DEBIAN_LIKE:
        return "Debian"
    if words & RHEL_LIKE:
        return "RedHat"
    return None


def read_model(host, gpu_ids=(), nic_ids=()):
    try:
        return host.topology(gpu_ids or (), nic_ids or ())
    except ValueError as exc:
        raise InputError("gpu_stack.gpu_ids / firmware.nic_ids: %s" % exc)


# -- the NVIDIA host stack ------------------------------------------------------------------
def daemons_to_stop(units, wanted):
    """Units of ``wanted`` that are loaded and still enabled or active."""
    found = []
    for name in wanted:
        unit = units.get(name + ".service") or units.get(name) or {}
        enabled = unit.get("UnitFileState") in ("enabled", "enabled-runtime")
        running = unit.get("ActiveState") in ("active", "activating", "reloading")
        if unit.get("LoadState") == "loaded" and (enabled or running):
            found.append(unit.get("Id") or name + ".service")
    return found


def daemon_states(units, names):
    """``names``' unit-file and active states as systemctl show names them, one unit a line; with
    ``units`` None, as ``systemctl disable --now`` leaves them (disabled, inactive)."""
    lines = []
    for name in names:
        unit = (units or {}).get(name) or {}
        lines.append("%s: UnitFileState=%s ActiveState=%s\n" % (
            name, unit.get("UnitFileState") if units is not None else "disabled",
            unit.get("ActiveState") if units is not None else "inactive"))
    return "".join(lines)


class GpuStack:
    """``spec``: the iommu_grub option ``gpu_stack`` ({tenant_gpus, host_gpus, manage, initramfs});
    ``pre_bind``: (ids, driver) of the call."""

    def __init__(self, host, spec, model, pre_bind_ids, pre_bind_driver):
        self.host = host
        self.spec = spec
        self.family = os_family(host.fs)
        self.plan_ = host_stack.gpu_stack_plan(model, spec.get("tenant_gpus"), spec.get("host_gpus"), pre_bind_ids,
                                               pre_bind_driver, self.family, spec.get("manage", True))
        self.change = None
        self.daemons = []
        self.daemons_read = False
        self.daemons_source = None
        self.units = {}

    @property
    def pre_bind_ids(self):
        return self.plan_["pre_bind_ids"]

    @property
    def kernel_args(self):
        return self.plan_["kernel_args"]

    def plan(self, diff):
        plan = self.plan_
        if plan["active"]:
            before = self.host.read_text(host_stack.MODPROBE_FILE, "gpu_stack")
            if before != plan["modprobe_conf"]:
                self.change = (host_stack.MODPROBE_FILE, before, plan["modprobe_conf"])
                diff.add(host_stack.MODPROBE_FILE, before, plan["modprobe_conf"])
            if plan["services"] and self.host.live:
                systemctl = self.host.commands.which("systemctl")
                if systemctl:
                    _rc, out, _err = self.host.commands.run(
                        show_argv(systemctl, ["%s.service" % name for name in plan["services"]]), check=False)
                    self.units = units_by_id(out)
                    self.daemons = daemons_to_stop(self.units, plan["services"])
                    self.daemons_read = True
            elif plan["services"]:
                # under a capture: the units' state as systemctl showed it on the host when captured
                out = captured_programs.read_output(self.host.fs, captured_programs.NVIDIA_UNITS)
                if out is not None:
                    self.units = units_by_id(out)
                    self.daemons = daemons_to_stop(self.units, plan["services"])
                    self.daemons_read = True
                    self.daemons_source = captured_programs.path_of(captured_programs.NVIDIA_UNITS)
            if self.daemons:
                # in the diff as in the run: each unit as systemctl shows it, then as disable --now leaves it
                diff.add("host daemons (systemctl disable --now)", daemon_states(self.units, self.daemons),
                         daemon_states(None, self.daemons))
        return {"active": plan["active"], "tenant_gpus": plan["tenant_gpus"], "host_gpus": plan["host_gpus"],
                "pre_bind_ids": plan["pre_bind_ids"], "address_prebind": plan["address_prebind"],
                "blacklist": plan["blacklist"], "kernel_args": plan["kernel_args"], "os_family": self.family,
                "modprobe_file": host_stack.MODPROBE_FILE if plan["active"] else None,
                "modprobe_changed": self.change is not None,
                "daemons_stopped": list(self.daemons),
                "daemons_read": self.daemons_read, "daemons_source": self.daemons_source,
                "notes": list(plan["notes"]),
                "changed": self.change is not None or bool(self.daemons)}

    def apply(self, run):
        if self.change:
            real = self.host.path(self.change[0])
            self.host.files.makedirs(real.rsplit("/", 1)[0])
            self.host.files.write(real, self.change[2], mode=0o644)
            run.changed = True
        if self.daemons and self.host.live:
            # under a captured root the units are the captured host's record: nothing to stop here
            systemctl = self.host.commands.which("systemctl", required=True)
            self.host.commands.run([systemctl, "disable", "--now"] + self.daemons)
            run.changed = True


class Initramfs:
    """Rebuilds the running kernel's initramfs when the module configuration it carries changed,
    a file it should carry is missing from it, or the early pre-bind driver is not in it
    (:func:`host_stack.initramfs_reasons`). Read only on the running host: a capture has no image."""

    def __init__(self, host, family):
        self.host = host
        self.family = family
        self.release = (host.fs.read("/proc/sys/kernel/osrelease") or "").strip()
        self.reasons = []
        self.build = None

    def plan(self, early_plan, stack_result, driver_pattern):
        result = {"rebuild": False, "reasons": [], "read": False, "command": None}
        tools = INITRAMFS_TOOLS.get(self.family)
        if not tools or not self.release or not self.host.live:
            result["why_not_read"] = ("not on the running host" if not self.host.live
                                      else "no initramfs tool known for this OS" if not tools else "no kernel release")
            return result
        lister = self.host.commands.which(tools[0][0])
        if not lister:
            result["why_not_read"] = "%s not found" % tools[0][0]
            return result
        argv = [lister] + [a.format(release=self.release) for a in tools[0][1:]]
        rc, listing, err = self.host.commands.run(argv, check=False)
        if rc != 0:
            raise StateError("%s failed (rc=%s): %s" % (" ".join(argv), rc, err.strip()))
        files = []
        early_files = (early_plan or {}).get("files") or {}
        for path, in_image in EARLY_FILES:
            if path in early_files:
                files.append({"path": path, "in_image": in_image, "result": early_files[path]})
        if stack_result and stack_result.get("modprobe_file"):
            files.append({"path": stack_result["modprobe_file"], "in_image": True,
                          "result": {"changed": stack_result["modprobe_changed"]}})
        pattern = driver_pattern if (early_plan or {}).get("in_initramfs") else None
        self.reasons = host_stack.initramfs_reasons(listing, pattern, files)
        self.build = [tools[1][0]] + [a.format(release=self.release) for a in tools[1][1:]]
        result.update(read=True, rebuild=bool(self.reasons), reasons=list(self.reasons), command=self.build)
        return result

    def apply(self, run):
        if self.reasons:
            tool = self.host.commands.which(self.build[0], required=True)
            with run.timed("initramfs"):
                self.host.commands.run([tool] + self.build[1:])
            run.changed = True


def driver_file_pattern(driver):
    """A kernel module file of the pre-bind driver (pci-stub.ko, vfio-pci.ko, compressed or not)."""
    return r"/%s\.ko(\.[a-z]+)?$" % re.sub(r"[-_]", "[-_]", driver)


# -- the ConnectX firmware ------------------------------------------------------------------
def ats_targets(model, ats_pfs, targets):
    """The PFs of ``ats_pfs`` (those whose VFs go to GPU tenants; addresses, short or full, or
    netdev names), each one of the firmware targets (the ConnectX PFs of sriov_pfs that want
    VFs); InputError naming one that is not."""
    known = [t["pf"] for t in targets]
    wanted = []
    for name in ats_pfs or []:
        pf = resolve_pf(model, name) or str(name)
        if pf not in known:
            raise InputError("firmware.ats_pfs: %s is not a ConnectX PF of sriov_pfs that wants VFs (those are: %s); ATS is "
                             "set on the cards whose VFs go to GPU tenants: list PFs of gpuvirt_sriov_pfs"
                             % (pf, ", ".join(known) or "none"))
        if pf not in wanted:
            wanted.append(pf)
    return sorted(wanted)


class Firmware:
    """``spec``: the iommu_grub option ``firmware`` ({sriov_pfs, tool, install, reset, reset_level,
    reset_ok}). Sets SR-IOV on the ConnectX PFs that want VFs for the next firmware load, and
    loads it with a firmware reset when ``reset`` and ``reset_ok`` allow (once per card)."""

    def __init__(self, host, spec, model):
        self.host = host
        self.spec = spec
        pfs = spec.get("sriov_pfs") or []
        self.model = model
        self.link_types = port_modes.link_types(model, pfs)
        self.targets = mlx.firmware_targets(model, pfs)
        self.ats = ats_targets(model, spec.get("ats_pfs"), self.targets)
        self.tools = {"config": None, "reset": None}
        self.sets = {}
        self.pending = {}
        self.install = False

    def _find(self):
        found = []
        for name in ("mlxconfig", "mstconfig", "mlxfwreset", "mstfwreset"):
            path = self.host.commands.which(name)
            if path:
                found.append(path)
        return mlx.pick_tools(found)

    def plan(self, diff):
        result = {"targets": [t["pf"] for t in self.targets], "ats": list(self.ats), "tool": None, "read": False, "changes": {},
                  "link_type_changes": {}, "pending": [], "cold_boot": [], "reset": [], "messages": [],
                  "reset_devices": [], "changed": False}
        if not self.targets:
            return result
        if not self.host.live:
            result["messages"].append("ConnectX firmware of %s not read: a capture holds no firmware tool answers "
                                      "(preflight reads them on the host)%s" % (", ".join(result["targets"]), (
                                          "; on the host the boot stage sets %s=True on %s (ATS for GPUDirect RDMA in "
                                          "the tenants)" % (mlx.ATS_PARAM, ", ".join(self.ats))) if self.ats else ""))
            return result
        self.tools = self._find()
        if not self.tools["config"]:
            self.install = bool(self.spec.get("install"))
            result["messages"].append("ConnectX firmware of %s not read: neither mlxconfig nor mstconfig is installed%s"
                                      % (", ".join(result["targets"]),
                                         "; %s is installed by this call" % FIRMWARE_PACKAGE if self.install else
                                         "; install NVIDIA MFT or mstflint"))
            result["changed"] = self.install
            return result
        result["tool"] = self.tools["config"]
        for target in self.targets:
            fw = mlx.FirmwareConfig(self.tools["config"], target["pf"], self.host)
            parsed = fw.query()
            shown = mlx.report(parsed)
            wanted = mlx.sriov_firmware(shown, target["num_vfs"])
            for port in mlx.LINK_TYPE_PARAMS:
                wanted.pop(port, None)
            found, _source = port_modes.ports_of(self.model, target["pf"], {"status": "ok", "params": shown})
            ports, switching, refusal = port_modes.decide(target["pf"], found, self.link_types.get(target["pf"]))
            if refusal:
                raise InputError(refusal)
            wanted.update(ports)
            if target["pf"] in self.ats:
                wanted.update(mlx.ats_firmware(shown, target["pf"]))
            changes = fw.plan(parsed, wanted)
            if switching:
                result["link_type_changes"][target["pf"]] = dict((c["port"], "%s -> %s" % (c["from"], c["to"])) for c in switching)
            before = dict((k, shown[k]["next"]) for k in wanted)
            after = dict(before, **dict((k, mlx.render_value(v)) for k, v in changes.items()))
            diff.add("firmware %s (%s, next boot)" % (target["pf"], self.tools["config"].rsplit("/", 1)[-1]),
                     "".join("%s=%s\n" % kv for kv in sorted(before.items())),
                     "".join("%s=%s\n" % kv for kv in sorted(after.items())))
            if changes:
                self.sets[target["pf"]] = (fw, changes, wanted)
                result["changes"][target["pf"]] = dict((k, mlx.render_value(v)) for k, v in changes.items())
            pending = mlx.pending(parsed)
            self.pending[target["pf"]] = sorted(set(pending) | set(k for k in changes
                                                                   if not mlx.value_matches(changes[k], shown[k]["current"])))
        result["read"] = True
        result["changed"] = bool(self.sets)
        result.update(self.outcome(None, None))
        return result

    def outcome(self, reset_rc, after):
        return mlx.firmware_outcome(self.pending, reset_rc, after, self.tools["reset"],
                                    bool(self.spec.get("reset", True)))

    def apply(self, run, result):
        """The install, the sets and, when allowed, the resets; ``result`` updated with the outcome."""
        if self.install:
            # then read and set in the same call, with the tool just installed
            self._install(run)
            self.install = False
            result.update(self.plan(Diff(False)))
        for _pf, (fw, changes, wanted) in sorted(self.sets.items()):
            fw.set(changes)
            run.changed = True
            still = fw.plan(fw.query(), wanted)
            if still:
                raise StateError("firmware: %s accepted the set but Next Boot still differs for %s on %s"
                                 % (fw.tool, ", ".join(sorted(still)), fw.device))
        outcome = self.outcome(None, None)
        if not (outcome["reset_devices"] and self.spec.get("reset_ok")):
            result.update(outcome)
            return
        reset_rc, after = {}, {}
        # a reset loads Next Boot into Current: the queries before it no longer hold
        self.host.forget_reads()
        for device in outcome["reset_devices"]:
            with run.timed("firmware_reset"):
                rc, _out, _err = self.host.commands.run(
                    [self.tools["reset"], "-d", device, "--level", str(self.spec.get("reset_level", 3)), "-y", "reset"],
                    check=False)
            reset_rc[device] = rc
            run.changed = True
        for pf in outcome["pending"]:
            after[pf] = mlx.pending(mlx.FirmwareConfig(self.tools["config"], pf, self.host).query())
        result.update(self.outcome(reset_rc, after), reset_ran=sorted(reset_rc))

    def _install(self, run):
        for manager, argv in (("apt-get", ["install", "-y", "-q", FIRMWARE_PACKAGE]),
                              ("dnf", ["install", "-y", FIRMWARE_PACKAGE]), ("yum", ["install", "-y", FIRMWARE_PACKAGE])):
            path = self.host.commands.which(manager)
            if path:
                with run.timed("firmware_install"):
                    self.host.commands.run([path] + argv)
                run.changed = True
                return
        raise StateError("firmware: neither mlxconfig nor mstconfig is installed and no apt-get/dnf/yum to install "
                         "%s: install NVIDIA MFT or mstflint on the host" % FIRMWARE_PACKAGE)
