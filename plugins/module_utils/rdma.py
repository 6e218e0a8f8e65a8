# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RDMA devices as the kernel shows them: the GID table and the RDMA-CM default RoCE mode.

The GID table is read through :class:`Sysfs` from
``/sys/class/infiniband/<dev>/ports/<port>/gids/N`` with ``gid_attrs/types/N`` (``RoCE v2``,
``IB/RoCE v1``) and ``gid_attrs/ndevs/N`` (the netdev). Unused slots answer EINVAL when their
type is read; they are skipped, as show_gids does. The RDMA-CM default RoCE mode lives in
configfs: ``/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_mode`` appears only
after ``mkdir /sys/kernel/config/rdma_cm/<dev>`` and the directory is removed again after use.
"""

from __future__ import annotations

import errno
import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError, atomic_write
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sysfs import Sysfs

IB_CLASS = "/sys/class/infiniband"
CONFIGFS_RDMA_CM = "/sys/kernel/config/rdma_cm"

ROCE_V1 = "RoCE v1"
ROCE_V2 = "RoCE v2"
IB = "IB"

# kernel spelling in configfs / gid_attrs <-> the short names users give
ROCE_MODES = {"v1": "IB/RoCE v1", "v2": "RoCE v2"}
ROCE_MODE_NAMES = {"IB/RoCE v1": "v1", "RoCE v1": "v1", "RoCE v2": "v2"}

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def ipv4_of_gid(gid):
    """Dotted IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``), else None."""
    groups = normalize_gid(gid).split(":")
    if len(groups) != 8 or any(g != "0000" for g in groups[:5]) or groups[5] != "ffff":
        return None
    hi, lo = int(groups[6], 16), int(groups[7], 16)
    return "%d.%d.%d.%d" % (hi >> 8, hi & 0xFF, lo >> 8, lo & 0xFF)


def normalize_gid(gid):
    """GID in the kernel's sysfs spelling: 8 groups of 4 lowercase hex digits.
    Accepts the compressed IPv6 forms ibv_devinfo prints (``fe80::...``, ``::ffff:1.2.3.4``)."""
    text = (gid or "").strip().lower()
    if "." in text:  # trailing dotted quad
        head, quad = text.rsplit(":", 1)
        octets = [int(x) for x in quad.split(".")]
        text = "%s:%02x%02x:%02x%02x" % (head, octets[0], octets[1], octets[2], octets[3])
    if "::" in text:
        left, right = text.split("::", 1)
        lg = [g for g in left.split(":") if g]
        rg = [g for g in right.split(":") if g]
        groups = lg + ["0"] * (8 - len(lg) - len(rg)) + rg
    else:
        groups = text.split(":")
    return ":".join(g.zfill(4) for g in groups)


def gid_type_name(kernel_type, link_layer):
    """``RoCE v2`` / ``RoCE v1`` / ``IB`` from ``gid_attrs/types/N`` and the port's link layer."""
    if kernel_type == "RoCE v2":
        return ROCE_V2
    if (link_layer or "").lower() == "infiniband":
        return IB
    return ROCE_V1


class RdmaReader:
    """Reads RDMA devices, ports and GID tables under a root."""

    def __init__(self, root="/"):
        self.sysfs = root if isinstance(root, Sysfs) else Sysfs(root)

    def devices(self):
        return self.sysfs.listdir(IB_CLASS)

    def ports(self, device):
        ports = []
        for name in self.sysfs.listdir("%s/%s/ports" % (IB_CLASS, device)):
            if name.isdigit():
                ports.append(int(name))
        return sorted(ports)

    def device_for_pci(self, address):
        """RDMA device(s) of a PCI function (``/sys/bus/pci/devices/<addr>/infiniband/``)."""
        return self.sysfs.listdir("/sys/bus/pci/devices/%s/infiniband" % address)

    def device_for_netdev(self, netdev):
        """RDMA devices whose GID table names ``netdev`` (soft-RoCE has no PCI function)."""
        found = []
        for dev in self.devices():
            for port in self.ports(dev):
                if any(e["netdev"] == netdev for e in self.gid_table(dev, port)):
                    found.append(dev)
                    break
        return found

    def link_layer(self, device, port):
        return self.sysfs.read("%s/%s/ports/%d/link_layer" % (IB_CLASS, device, port))

    def port_state(self, device, port):
        return self.sysfs.read("%s/%s/ports/%d/state" % (IB_CLASS, device, port))

    def gid_table(self, device, port):
        """show_gids rows of one port, by index; empty slots (EINVAL on the type, or the zero
        GID) are skipped."""
        base = "%s/%s/ports/%d" % (IB_CLASS, device, port)
        link_layer = self.link_layer(device, port)
        rows = []
        indexes = sorted(int(n) for n in self.sysfs.listdir(base + "/gids") if n.isdigit())
        for index in indexes:
            kernel_type = self.sysfs.read("%s/gid_attrs/types/%d" % (base, index))
            if not kernel_type:
                continue  # EINVAL: unused slot
            gid = self.sysfs.read("%s/gids/%d" % (base, index))
            if not gid or normalize_gid(gid) == ZERO_GID:
                continue
            gid = normalize_gid(gid)
            rows.append({
                "device": device,
                "port": port,
                "index": index,
                "gid": gid,
                "type": gid_type_name(kernel_type, link_layer),
                "netdev": self.sysfs.read("%s/gid_attrs/ndevs/%d" % (base, index)),
                "ipv4": ipv4_of_gid(gid),
            })
        return rows

    def full_table(self, devices=None):
        """Rows for every port of ``devices`` (default: all RDMA devices)."""
        rows = []
        for dev in devices or self.devices():
            for port in self.ports(dev):
                rows.extend(self.gid_table(dev, port))
        return rows


def roce_v2_ipv4_index(rows):
    """Lowest index holding a RoCE v2 GID with an IPv4 address, or None."""
    for row in sorted(rows, key=lambda r: r["index"]):
        if row["type"] == ROCE_V2 and row["ipv4"]:
            return row["index"]
    return None


def roce_v2_ipv4_indexes(rows):
    """``{device: {port: index|None}}`` over a table of several ports."""
    result = {}
    for row in rows:
        result.setdefault(row["device"], {}).setdefault(str(row["port"]), None)
    for dev, ports in result.items():
        for port in ports:
            ports[port] = roce_v2_ipv4_index([r for r in rows if r["device"] == dev and str(r["port"]) == port])
    return result


def format_gid_table(rows):
    """The table as show_gids prints it, for error messages."""
    lines = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV"]
    for r in rows:
        ver = {ROCE_V2: "v2", ROCE_V1: "v1"}.get(r["type"], r["type"])
        lines.append("%s\t%s\t%s\t%s\t%s\t%s\t%s" % (r["device"], r["port"], r["index"], r["gid"],
                                                     (r["ipv4"] or "").ljust(15), ver, r["netdev"] or ""))
    return "\n".join(lines)


class RoceModeConfig:
    """RDMA-CM default RoCE mode through configfs."""

    def __init__(self, root="/"):
        self.sysfs = root if isinstance(root, Sysfs) else Sysfs(root)

    def available(self):
        """configfs mounted and rdma_cm loaded."""
        return self.sysfs.isdir(CONFIGFS_RDMA_CM)

    def _mode_path(self, device, port):
        return "%s/%s/ports/%d/default_roce_mode" % (CONFIGFS_RDMA_CM, device, port)

    def _with_device_dir(self, device, func):
        dev_dir = self.sysfs.path("%s/%s" % (CONFIGFS_RDMA_CM, device))
        created = False
        if not os.path.isdir(dev_dir):
            try:
                os.mkdir(dev_dir)
            except OSError as exc:
                if exc.errno == errno.ENODEV:
                    raise StateError("configfs refused %s: the kernel knows no RDMA device %s" % (dev_dir, device))
                raise StateError("cannot create %s: %s" % (dev_dir, exc.strerror))
            created = True
        try:
            return func()
        finally:
            if created:
                try:
                    os.rmdir(dev_dir)
                except OSError:
                    pass

    def read(self, device, port):
        """Short mode name (``v1``/``v2``) or None when the port is unknown to rdma_cm.
        Reading needs the configfs directory: it is created and removed again."""
        def _read():
            return self.sysfs.read(self._mode_path(device, port))
        text = self._with_device_dir(device, _read)
        if text is None:
            return None
        return ROCE_MODE_NAMES.get(text, text)

    def write(self, device, port, mode):
        if mode not in ROCE_MODES:
            raise InputError("default_roce_mode must be one of %s, got %r" % (", ".join(sorted(ROCE_MODES)), mode))

        def _write():
            path = self.sysfs.path(self._mode_path(device, port))
            if not os.path.exists(path):
                raise StateError("%s does not exist: port %d is not a port of %s" % (self._mode_path(device, port), port, device))
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(ROCE_MODES[mode])
        self._with_device_dir(device, _write)


PERSIST_SCRIPT = """#!/bin/sh
# Managed by gpuvirt.tenancy (mlx_rocev2): set the RDMA-CM default RoCE mode of an RDMA
# port. Run by udev when the device appears (at boot through coldplug, and on hotplug).
# usage: gpuvirt-roce-mode DEVICE PORT MODE   (MODE: "RoCE v2" or "IB/RoCE v1")
set -e
dev="$1"; port="$2"; shift 2; mode="$*"
[ -d /sys/kernel/config/rdma_cm ] || modprobe rdma_cm
d=/sys/kernel/config/rdma_cm/"$dev"
made=0
[ -d "$d" ] || { mkdir "$d"; made=1; }
printf '%s' "$mode" > "$d/ports/$port/default_roce_mode"
[ "$made" = 0 ] || rmdir "$d"
"""


def persist_rule(device, port, mode, script_path):
    """udev rule that reapplies the mode whenever ``device`` is added."""
    return ("# Managed by gpuvirt.tenancy (mlx_rocev2): RDMA-CM default RoCE mode of %s port %d\n"
            'ACTION=="add", SUBSYSTEM=="infiniband", KERNEL=="%s", RUN+="%s %s %d %s"\n'
            % (device, port, device, script_path, device, port, ROCE_MODES[mode]))


PCI_ADDR_RE = r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"


def _read_file(path):
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except (OSError, IOError):
        return None


class MlxRoceV2:
    """What the mlx_rocev2 module does, decided before acting: firmware parameters, the
    RDMA-CM default RoCE mode (and its persistence), the GID table."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.sysfs = Sysfs(self.params["root"])
        self.reader = RdmaReader(self.sysfs)
        self.result = {"changed": False, "reboot_required": False}
        self.diff = {"before": {}, "after": {}}
        self.actions = []

    # -- firmware --------------------------------------------------------------
    def _tool(self):
        wanted = self.params["tool"]
        names = ["mlxconfig", "mstconfig"] if wanted == "auto" else [wanted]
        path = None
        for name in names:
            path = self.module.get_bin_path(name)
            if path:
                break
        if not path:
            raise InputError("tool: %s not found on the host: install NVIDIA MFT (mlxconfig) or mstflint (mstconfig), "
                             "or set tool to the one installed" % " / ".join(names))
        device = self.params["device"]

        def run(argv):
            return self.module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})
        return mlx.FirmwareConfig(path, device, run, sysfs=self.sysfs)

    def plan_firmware(self):
        wanted = self.params["firmware"] or {}
        device = self.params["device"]
        if wanted and not device:
            raise InputError("device: firmware settings need the PCI address of the ConnectX PF in device")
        if not device:
            return None
        if re.match(PCI_ADDR_RE, device):
            address = device if len(device) > 7 and device.count(":") == 2 else "0000:" + device
            if not self.sysfs.exists("/sys/bus/pci/devices/%s" % address.lower()):
                raise InputError("device: no PCI device %s on this host: give the address of the ConnectX PF "
                                 "as 'lspci -D -d 15b3:' lists it" % device)
        fw = self._tool()
        parsed = fw.query()
        changes = fw.plan(parsed, wanted)
        self.result["firmware_tool"] = fw.tool
        self.result["firmware_changes"] = dict((k, mlx.render_value(v)) for k, v in changes.items())
        before = mlx.report(parsed, wanted)
        self.diff["before"]["firmware"] = dict((k, v["next"]) for k, v in before.items())
        after_next = dict(self.diff["before"]["firmware"])
        after_next.update(self.result["firmware_changes"])
        self.diff["after"]["firmware"] = after_next
        return fw, parsed, changes

    def apply_firmware(self, planned):
        if planned is None:
            return
        fw, parsed, changes = planned
        wanted = self.params["firmware"] or {}
        if changes:
            self.result["changed"] = True
            if not self.module.check_mode:
                fw.set(changes)
                parsed = fw.query()
                still = fw.plan(parsed, wanted)
                if still:
                    raise StateError("firmware: %s accepted the set but Next Boot still differs for %s"
                                     % (fw.tool, ", ".join(sorted(still))))
            else:
                for key, value in changes.items():
                    parsed["params"][key]["next"] = mlx.render_value(value)
        self.result["firmware"] = mlx.report(parsed, wanted)
        pend = []
        for key, entry in parsed["params"].items():
            if entry.get("current") is None:
                continue
            if key in changes and self.module.check_mode:
                if not mlx.value_matches(changes[key], entry["current"]):
                    pend.append(key)
            elif entry["current"] != entry["next"]:
                pend.append(key)
        self.result["pending_parameters"] = sorted(pend)
        self.result["reboot_required"] = bool(pend)

    # -- RDMA-CM mode ----------------------------------------------------------
    def rdma_device(self):
        name = self.params["rdma_device"]
        if name:
            if name not in self.reader.devices():
                raise InputError("rdma_device: no RDMA device %s (known: %s): check 'rdma link show'"
                                 % (name, ", ".join(self.reader.devices()) or "none"))
            return name
        device = self.params["device"]
        if device:
            address = device if device.count(":") == 2 else "0000:" + device
            found = self.reader.device_for_pci(address.lower())
            if found:
                return found[0]
            raise InputError("rdma_device: PF %s has no RDMA device (is mlx5_core/mlx5_ib loaded?); "
                             "name it in rdma_device" % device)
        return None

    def plan_mode(self, dev):
        port = self.params["port"]
        if port not in self.reader.ports(dev):
            raise InputError("port: %s has no port %d (ports: %s)" % (dev, port, self.reader.ports(dev)))
        mode = self.params["default_roce_mode"]
        config = RoceModeConfig(self.sysfs)
        loaded = config.available()
        current = config.read(dev, port) if loaded else None
        if loaded and current is None:
            raise StateError("rdma_cm has no port %d for %s in configfs" % (port, dev))
        self.diff["before"]["default_roce_mode"] = current
        self.diff["after"]["default_roce_mode"] = mode
        plan = {"config": config, "load": not loaded, "set": current != mode}
        if self.params["persist"]:
            script = self.params["persist_script"]
            rule_path = os.path.join(self.params["persist_rules_dir"], "70-gpuvirt-roce-%s.rules" % dev)
            files = {script: PERSIST_SCRIPT, rule_path: persist_rule(dev, port, mode, script)}
            plan["files"] = {}
            for path, content in files.items():
                old = _read_file(path)
                if old != content:
                    plan["files"][path] = content
                self.diff["before"][path] = old or ""
                self.diff["after"][path] = content
        return plan

    def apply_mode(self, dev, plan):
        port = self.params["port"]
        if plan["load"] or plan["set"] or plan.get("files"):
            self.result["changed"] = True
        if not self.module.check_mode:
            if plan["load"]:
                modprobe = self.module.get_bin_path("modprobe", required=True)
                rc, _out, err = self.module.run_command([modprobe, "rdma_cm"])
                if rc != 0 or not plan["config"].available():
                    raise StateError("cannot load rdma_cm (%s): is configfs mounted on /sys/kernel/config?" % err.strip())
                plan["set"] = plan["config"].read(dev, port) != self.params["default_roce_mode"]
            if plan["set"]:
                plan["config"].write(dev, port, self.params["default_roce_mode"])
            for path, content in plan.get("files", {}).items():
                directory = os.path.dirname(path)
                if not os.path.isdir(directory):
                    os.makedirs(directory, 0o755)
                atomic_write(path, content, mode=0o755 if path == self.params["persist_script"] else 0o644)
            self.result["default_roce_mode"] = plan["config"].read(dev, port)
        else:
            self.result["default_roce_mode"] = self.params["default_roce_mode"]

    # -- all -------------------------------------------------------------------
    def run(self):
        if not self.params["device"] and not self.params["rdma_device"]:
            raise InputError("device or rdma_device: give the ConnectX PF's PCI address (device) and/or the RDMA "
                             "device name (rdma_device, e.g. mlx5_0 or rxe0)")
        planned_fw = self.plan_firmware()
        mode = None if self.params["default_roce_mode"] == "unchanged" else self.params["default_roce_mode"]
        dev = self.rdma_device() if (self.params["rdma_device"] or mode) else None
        plan = self.plan_mode(dev) if dev and mode else None
        self.apply_firmware(planned_fw)
        if plan:
            self.apply_mode(dev, plan)
        if dev:
            rows = self.reader.full_table([dev])
            self.result["rdma_device"] = dev
            self.result["port"] = self.params["port"]
            self.result["gid_table"] = rows
            self.result["roce_v2_ipv4_index"] = roce_v2_ipv4_indexes(rows)
        if self.module._diff:  # pylint: disable=protected-access
            self.result["diff"] = self.diff
        return self.result
