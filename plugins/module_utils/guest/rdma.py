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

from __future__ import absolute_import, division, print_function

import errno

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

__metaclass__ = type

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

    def netdevs_with_mac(self, mac):
        """Netdevs whose address is ``mac`` (/sys/class/net/<name>/address), sorted. A VLAN or
        bridge on top of the VF shares its MAC: the ones that are not a PCI function's come after."""
        mac = str(mac).lower()
        found = [name for name in self.sysfs.listdir("/sys/class/net")
                 if (self.sysfs.read("/sys/class/net/%s/address" % name) or "").lower() == mac]
        return sorted(found, key=lambda name: (self.sysfs.readlink_name("/sys/class/net/%s/device" % name) is None, name))

    def device_for_netdev_mac(self, mac):
        """-> (netdev, RDMA device or None) of the netdev that carries ``mac`` (the VF the host
        gave the tenant): the RDMA device of its PCI function (mlx5 VF), else the one whose GID
        table names the netdev (soft-RoCE on it); None when no netdev has the MAC."""
        netdevs = self.netdevs_with_mac(mac)
        if not netdevs:
            return None
        netdev = netdevs[0]
        address = self.sysfs.readlink_name("/sys/class/net/%s/device" % netdev)
        found = (self.device_for_pci(address) if address else []) or self.device_for_netdev(netdev)
        return netdev, (found[0] if found else None)

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


def parse_ibv_devices(text):
    """The device names ``ibv_devices`` (libibverbs' utilities) lists: the first word of each line
    under its ``------`` rule; [] for its empty table. These are the devices the verbs library
    sees, which needs the device's userspace provider (Debian's ibverbs-providers): without it,
    ``rdma link`` shows the device and verbs do not."""
    names, table = [], False
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].startswith("---"):
            table = True
        elif table:
            names.append(words[0])
    return names


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
    """RDMA-CM default RoCE mode through configfs, on the host seam: the directory is made and
    removed through the host's kernel writer (configfs answers mkdir with ENODEV for a device
    the kernel does not know), the mode is written as a kernel attribute."""

    def __init__(self, host):
        self.host = host

    def available(self):
        """configfs mounted and rdma_cm loaded."""
        return self.host.fs.isdir(CONFIGFS_RDMA_CM)

    def _mode_path(self, device, port):
        return "%s/%s/ports/%d/default_roce_mode" % (CONFIGFS_RDMA_CM, device, port)

    def _with_device_dir(self, device, func):
        dev_dir = "%s/%s" % (CONFIGFS_RDMA_CM, device)
        created = False
        if not self.host.fs.isdir(dev_dir):
            try:
                self.host.kernel.mkdir(dev_dir)
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
                    self.host.kernel.rmdir(dev_dir)
                except OSError:
                    pass

    def read(self, device, port):
        """Short mode name (``v1``/``v2``) or None when the port is unknown to rdma_cm.
        Reading needs the configfs directory: it is created and removed again."""
        text = self._with_device_dir(device, lambda: self.host.fs.read(self._mode_path(device, port)))
        if text is None:
            return None
        return ROCE_MODE_NAMES.get(text, text)

    def write(self, device, port, mode):
        if mode not in ROCE_MODES:
            raise InputError("default_roce_mode must be one of %s, got %r" % (", ".join(sorted(ROCE_MODES)), mode))

        def _write():
            path = self._mode_path(device, port)
            if not self.host.fs.exists(path):
                raise StateError("%s does not exist: port %d is not a port of %s" % (path, port, device))
            self.host.kernel.write(path, ROCE_MODES[mode])
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
