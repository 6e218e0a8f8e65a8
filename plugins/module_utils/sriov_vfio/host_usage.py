# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host itself needs: the PCI devices that must never be handed to a tenant.

A device backs the host when it carries a default route, carries the current SSH
connection, holds a mounted filesystem or active swap, or is the boot disk's controller.
Everything is read through :class:`Sysfs` under a root directory (procfs route tables,
mountinfo, ``/sys/class/net`` and ``/sys/class/block`` links), so tests can point it at a
fake tree; the optional ``ip -j addr`` output only refines which netdev owns an address.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import json

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import is_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.proc_mounts import mount_rows
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

__metaclass__ = type


def pci_address_in_path(host_path):
    """The PCI function nearest the end of a resolved sysfs path, or None
    (``/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda`` -> ``0000:00:02.0``)."""
    for part in reversed([p for p in (host_path or "").split("/") if p]):
        if is_address(part):
            return part
    return None


def _hex_ipv4(text):
    """/proc/net/route stores addresses as little-endian hex: ``0F02000A`` -> 10.0.2.15."""
    value = int(text, 16)
    return ipaddress.IPv4Address(value.to_bytes(4, "little"))


# the columns of the routing tables that count uses (RefCnt, Use; refcnt, use): read as 0 (Sysfs.read_table)
ROUTE_COUNTERS = (4, 5)
IPV6_ROUTE_COUNTERS = (6, 7)


def parse_proc_route(text):
    """Rows of /proc/net/route as dicts: iface, destination, gateway, mask, flags."""
    rows = []
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            rows.append({
                "iface": fields[0],
                "destination": _hex_ipv4(fields[1]),
                "gateway": _hex_ipv4(fields[2]),
                "flags": int(fields[3], 16),
                "mask": _hex_ipv4(fields[7]),
            })
        except ValueError:
            continue
    return rows


def parse_proc_ipv6_route(text):
    """Rows of /proc/net/ipv6_route: destination network, prefix length, flags, iface."""
    rows = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            dest = ipaddress.IPv6Address(int(fields[0], 16))
            prefix = int(fields[1], 16)
        except ValueError:
            continue
        try:
            flags = int(fields[8], 16)
        except ValueError:
            flags = 0
        rows.append({"destination": dest, "prefix": prefix, "flags": flags, "iface": fields[9]})
    return rows


def parse_if_inet6(text):
    """/proc/net/if_inet6: ``{IPv6Address: ifname}``."""
    found = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        try:
            found[ipaddress.IPv6Address(int(fields[0], 16))] = fields[5]
        except ValueError:
            continue
    return found


def parse_mountinfo(text):
    """/proc/self/mountinfo rows: major, minor, mountpoint, fstype, source."""
    rows = []
    for line in (text or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        majmin = fields[2].split(":")
        tail = right.split()
        try:
            major, minor = int(majmin[0]), int(majmin[1])
        except (ValueError, IndexError):
            continue
        rows.append({
            "major": major,
            "minor": minor,
            "mountpoint": fields[4].replace("\\040", " "),
            "fstype": tail[0] if tail else None,
            "source": tail[1] if len(tail) > 1 else None,
        })
    return rows


def parse_mounts(text):
    """/proc/mounts rows (fallback when mountinfo is absent): source, mountpoint, fstype."""
    return [{"major": None, "minor": None, "source": row["source"], "mountpoint": row["mountpoint"], "fstype": row["fstype"]}
            for row in mount_rows(text)]


def parse_ssh_connection(text):
    """``SSH_CONNECTION`` is "client_ip client_port server_ip server_port"; the server
    address (this host's end) or None."""
    fields = (text or "").split()
    return parse_address(fields[2]) if len(fields) == 4 else None


def parse_address(text):
    """An address as SSH_CONNECTION writes it (an IPv6 one with its ``%zone``, an IPv4 one mapped
    into IPv6 given as IPv4), or None."""
    if not text:
        return None
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class HostUsage:
    """The PCI devices the host needs, each with the reasons why.

    ``ssh_connection``: the ``SSH_CONNECTION`` value of the current session (None: read
    this process' environment, then its ancestors' ``/proc/<pid>/environ``, since become
    methods reset the environment). ``ip_addr_json``: output of ``ip -j addr`` (optional).
    """

    def __init__(self, root="/", ssh_connection=None, ip_addr_json=None, pid=None):
        self.fs = root if isinstance(root, Sysfs) else Sysfs(root)
        self._ssh_connection = ssh_connection
        self._ip_addr_json = ip_addr_json
        self._pid = pid

    # ------------------------------------------------------------------ netdevs
    def default_route_netdevs(self):
        names = set()
        for row in parse_proc_route(self.fs.read_table("/proc/net/route", ROUTE_COUNTERS)):
            if int(row["destination"]) == 0 and int(row["mask"]) == 0 and row["flags"] & 0x1:
                names.add(row["iface"])
        for row in parse_proc_ipv6_route(self.fs.read_table("/proc/net/ipv6_route", IPV6_ROUTE_COUNTERS)):
            # RTF_UP set, RTF_REJECT (0x200: the "unreachable" default on lo) not.
            if int(row["destination"]) == 0 and row["prefix"] == 0 and row["flags"] & 0x1 and not row["flags"] & 0x200:
                names.add(row["iface"])
        return sorted(names)

    def ssh_server_address(self):
        """This host's address of the SSH session the call came in on (the server's end of
        ``SSH_CONNECTION``), or None."""
        if self._ssh_connection is not None:
            return parse_ssh_connection(self._ssh_connection)
        return parse_address(self.fs.environ_field("SSH_CONNECTION", 2, self._pid))

    def netdev_of_address(self, address):
        """The netdev holding a local address: ``ip -j addr`` when given, else
        /proc/net/if_inet6 (IPv6) or the longest connected route in /proc/net/route (IPv4)."""
        if self._ip_addr_json:
            try:
                links = json.loads(self._ip_addr_json)
            except ValueError:
                links = []
            for link in links if isinstance(links, list) else []:
                for info in link.get("addr_info") or []:
                    try:
                        if ipaddress.ip_address(info.get("local", "")) == address:
                            return link.get("ifname")
                    except ValueError:
                        continue
        if address.version == 6:
            return parse_if_inet6(self.fs.read("/proc/net/if_inet6", "")).get(address)
        best = None
        for row in parse_proc_route(self.fs.read_table("/proc/net/route", ROUTE_COUNTERS)):
            if row["flags"] & 0x2:  # RTF_GATEWAY: not a connected route
                continue
            network = ipaddress.IPv4Network("%s/%s" % (row["destination"], row["mask"]), strict=False)
            if int(network.netmask) == 0 or address not in network:
                continue
            if best is None or network.prefixlen > best[0]:
                best = (network.prefixlen, row["iface"])
        return best[1] if best else None

    def netdev_pci_devices(self, name, _depth=0):
        """PCI functions under a netdev, following lower_* links through bridges, bonds
        and VLANs."""
        if _depth > 8:
            return set()
        real = self.fs.realpath("/sys/class/net/%s" % name)
        address = pci_address_in_path(real)
        if address:
            return {address}
        found = set()
        for entry in self.fs.listdir("/sys/class/net/%s" % name):
            if entry.startswith("lower_"):
                found |= self.netdev_pci_devices(entry[len("lower_"):], _depth + 1)
        return found

    # ------------------------------------------------------------------ block devices
    def block_pci_devices(self, name, _depth=0):
        """PCI functions under a block device (partition, dm, md: through slaves/)."""
        if _depth > 8 or not name:
            return set()
        real = self.fs.realpath("/sys/class/block/%s" % name)
        address = pci_address_in_path(real)
        if address:
            return {address}
        found = set()
        for slave in self.fs.listdir("/sys/class/block/%s/slaves" % name):
            found |= self.block_pci_devices(slave, _depth + 1)
        return found

    def _block_name(self, row):
        if row["major"]:
            real = self.fs.realpath("/sys/dev/block/%d:%d" % (row["major"], row["minor"]))
            if real:
                return real.rstrip("/").rsplit("/", 1)[-1]
        source = row.get("source") or ""
        if source.startswith("/dev/"):
            real = self.fs.realpath(source)
            name = (real or source).rsplit("/", 1)[-1]
            if self.fs.exists("/sys/class/block/%s" % name):
                return name
        return None

    def mounts(self):
        text = self.fs.read("/proc/self/mountinfo")
        rows = parse_mountinfo(text) if text else parse_mounts(self.fs.read("/proc/mounts", ""))
        mounted = []
        for row in rows:
            name = self._block_name(row)
            if name:
                mounted.append((name, row["mountpoint"]))
        return mounted

    def swaps(self):
        names = []
        for line in (self.fs.read("/proc/swaps", "") or "").splitlines()[1:]:
            fields = line.split()
            if fields and fields[0].startswith("/dev/"):
                real = self.fs.realpath(fields[0])
                names.append((real or fields[0]).rsplit("/", 1)[-1])
        return names

    # ------------------------------------------------------------------ report
    def report(self):
        """``{pci_address: [reason, ...]}`` for every device the host needs."""
        needed = {}

        def add(addresses, reason):
            for address in sorted(addresses):
                reasons = needed.setdefault(address, [])
                if reason not in reasons:
                    reasons.append(reason)

        for name in self.default_route_netdevs():
            add(self.netdev_pci_devices(name), "its netdev %s carries a default route" % name)
        ssh = self.ssh_server_address()
        if ssh is not None:
            name = self.netdev_of_address(ssh)
            if name:
                add(self.netdev_pci_devices(name),
                    "its netdev %s carries the current SSH connection (local address %s)" % (name, ssh))
        mounts = self.mounts()
        by_mount = {mountpoint: name for name, mountpoint in mounts}
        for name, mountpoint in mounts:
            add(self.block_pci_devices(name), "block device %s holds the mounted filesystem %s" % (name, mountpoint))
        boot = by_mount.get("/boot") or by_mount.get("/")
        if boot:
            add(self.block_pci_devices(boot), "it is the boot disk controller (%s holds %s)"
                % (boot, "/boot" if "/boot" in by_mount else "/"))
        for name in self.swaps():
            add(self.block_pci_devices(name), "block device %s holds active swap" % name)
        return needed
