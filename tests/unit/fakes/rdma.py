# -*- coding: utf-8 -*-
"""Fake RDMA sysfs/configfs trees built from real ``show_gids`` outputs.

The layout is the kernel's: ``/sys/class/infiniband/<dev>/ports/<p>/gids/N`` (8 groups of
4 hex digits), ``gid_attrs/types/N`` (``RoCE v2`` / ``IB/RoCE v1``), ``gid_attrs/ndevs/N``,
``link_layer``. An unused slot holds the zero GID and its type file cannot be read (the
kernel answers EINVAL; here the type path is a directory, so reading it fails too).
Which GID sits at which index comes from the real show_gids captures in tests/fixtures/rdma.
"""

from __future__ import annotations

import os

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")

ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


def parse_show_gids(text):
    """Rows of a show_gids output: (dev, port, index, gid, ipv4|None, ver, netdev)."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        dev, port, index, gid = fields[0], int(fields[1]), int(fields[2]), fields[3]
        rest = fields[4:]
        ipv4 = rest.pop(0) if len(rest) == 3 else None
        ver, netdev = rest[0], rest[1]
        rows.append((dev, port, index, gid, ipv4, ver, netdev))
    return rows


def read_fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), "r", encoding="utf-8") as handle:
        return handle.read()


def _write(root, host_path, text):
    path = os.path.join(str(root), host_path.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


def add_port(root, dev, port, rows, slots=16, link_layer="Ethernet", pci=None):
    """Write one port's GID table: ``rows`` = [(index, gid, ver 'v1'|'v2', netdev)]."""
    base = "/sys/class/infiniband/%s/ports/%d" % (dev, port)
    _write(root, base + "/link_layer", link_layer)
    _write(root, base + "/state", "4: ACTIVE")
    used = dict((r[0], r) for r in rows)
    for index in range(max(slots, max(used) + 1 if used else 0)):
        if index in used:
            _idx, gid, ver, netdev = used[index]
            _write(root, "%s/gids/%d" % (base, index), gid)
            _write(root, "%s/gid_attrs/types/%d" % (base, index), "RoCE v2" if ver == "v2" else "IB/RoCE v1")
            _write(root, "%s/gid_attrs/ndevs/%d" % (base, index), netdev)
        else:
            _write(root, "%s/gids/%d" % (base, index), ZERO)
            os.makedirs(os.path.join(str(root), ("%s/gid_attrs/types/%d" % (base, index)).lstrip("/")), exist_ok=True)
    if pci:
        os.makedirs(os.path.join(str(root), "sys/bus/pci/devices/%s/infiniband/%s" % (pci, dev)), exist_ok=True)


def tree_from_show_gids(root, text):
    """Build every device/port listed in a show_gids output."""
    ports = {}
    for dev, port, index, gid, _ipv4, ver, netdev in parse_show_gids(text):
        ports.setdefault((dev, port), []).append((index, gid, ver, netdev))
    for (dev, port), rows in ports.items():
        add_port(root, dev, port, rows)
    return ports


class FakeConfigfs:
    """configfs rdma_cm as the kernel behaves: ``mkdir rdma_cm/<dev>`` makes
    ``ports/<p>/default_roce_mode`` appear (ENODEV for a device the kernel does not know),
    ``rmdir`` takes it away; the mode itself stays in the kernel between the two."""

    def __init__(self, root, ports, mode="RoCE v2"):
        self.base = os.path.join(str(root), "sys", "kernel", "config", "rdma_cm")
        os.makedirs(self.base, exist_ok=True)
        self.modes = dict(((dev, port), mode) for dev, port in ports)
        self.mkdirs = []
        self._mkdir = os.mkdir
        self._rmdir = os.rmdir

    def install(self, monkeypatch):
        monkeypatch.setattr(os, "mkdir", self.mkdir)
        monkeypatch.setattr(os, "rmdir", self.rmdir)

    def _dev(self, path):
        path = os.path.abspath(path)
        if os.path.dirname(path) == self.base:
            return os.path.basename(path)
        return None

    def mkdir(self, path, mode=0o777, **kwargs):
        dev = self._dev(path)
        if dev is None:
            return self._mkdir(path, mode, **kwargs)
        ports = [p for d, p in self.modes if d == dev]
        if not ports:
            raise OSError(19, "No such device", path)  # ENODEV
        self._mkdir(path, mode)
        self.mkdirs.append(dev)
        for port in ports:
            os.makedirs(os.path.join(path, "ports", str(port)))
            with open(os.path.join(path, "ports", str(port), "default_roce_mode"), "w", encoding="utf-8") as handle:
                handle.write(self.modes[(dev, port)] + "\n")
        return None

    def rmdir(self, path, **kwargs):
        dev = self._dev(path)
        if dev is None:
            return self._rmdir(path, **kwargs)
        for port in [p for d, p in self.modes if d == dev]:
            mode_path = os.path.join(path, "ports", str(port), "default_roce_mode")
            with open(mode_path, "r", encoding="utf-8") as handle:
                text = handle.read().strip()
            if text not in ("RoCE v2", "IB/RoCE v1"):
                raise AssertionError("the kernel would refuse %r" % text)
            self.modes[(dev, port)] = text
            os.unlink(mode_path)
            self._rmdir(os.path.join(path, "ports", str(port)))
        self._rmdir(os.path.join(path, "ports"))
        return self._rmdir(path)
