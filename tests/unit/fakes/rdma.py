# -*- coding: utf-8 -*-
"""Fake RDMA sysfs/configfs trees built from real ``show_gids`` outputs, the kernel side of
configfs rdma_cm, and a command runner for the firmware tool stand-ins.

The layout is the kernel's: ``/sys/class/infiniband/<dev>/ports/<p>/gids/N`` (8 groups of
4 hex digits), ``gid_attrs/types/N`` (``RoCE v2`` / ``IB/RoCE v1``), ``gid_attrs/ndevs/N``,
``link_layer``. An unused slot holds the zero GID and its type file cannot be read (the
kernel answers EINVAL; here the type path is a directory, so reading it fails too).
Which GID sits at which index comes from the real show_gids captures in tests/fixtures/rdma.
"""

from __future__ import annotations

import errno
import os
import subprocess

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import CommandError

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
    """configfs rdma_cm as the kernel behaves, as the kernel side of a test :class:`Host`
    (``Host(root, kernel=FakeConfigfs(...))``): ``mkdir rdma_cm/<dev>`` makes
    ``ports/<p>/default_roce_mode`` appear (ENODEV for a device the kernel does not know),
    ``rmdir`` takes it away; the mode itself stays in the kernel between the two, and a write
    of anything but a mode the kernel knows is refused (EINVAL)."""

    CONFIGFS = "/sys/kernel/config/rdma_cm"

    def __init__(self, root, ports, mode="RoCE v2"):
        self.root = str(root)
        self.base = os.path.join(self.root, self.CONFIGFS.lstrip("/"))
        os.makedirs(self.base, exist_ok=True)
        self.modes = dict(((dev, port), mode) for dev, port in ports)
        self.mkdirs = []
        self.writes = []

    def _real(self, host_path):
        return os.path.join(self.root, host_path.lstrip("/"))

    def _dev(self, host_path):
        parent, name = host_path.rstrip("/").rsplit("/", 1)
        if parent != self.CONFIGFS:
            raise OSError(errno.EPERM, "not a configfs rdma_cm object", host_path)
        return name

    def _ports(self, dev):
        return sorted(p for d, p in self.modes if d == dev)

    def mkdir(self, host_path):
        dev = self._dev(host_path)
        if not self._ports(dev):
            raise OSError(errno.ENODEV, "No such device", host_path)
        path = self._real(host_path)
        os.mkdir(path)
        self.mkdirs.append(dev)
        for port in self._ports(dev):
            os.makedirs(os.path.join(path, "ports", str(port)))
            with open(os.path.join(path, "ports", str(port), "default_roce_mode"), "w", encoding="utf-8") as handle:
                handle.write(self.modes[(dev, port)] + "\n")

    def rmdir(self, host_path):
        dev = self._dev(host_path)
        path = self._real(host_path)
        for port in self._ports(dev):
            os.unlink(os.path.join(path, "ports", str(port), "default_roce_mode"))
            os.rmdir(os.path.join(path, "ports", str(port)))
        os.rmdir(os.path.join(path, "ports"))
        os.rmdir(path)

    def write(self, host_path, value):
        self.writes.append((host_path, value))
        parts = host_path[len(self.CONFIGFS) + 1:].split("/")
        if not host_path.startswith(self.CONFIGFS + "/") or len(parts) != 4 or parts[1:4:2] != ["ports", "default_roce_mode"]:
            raise OSError(errno.EACCES, "not a configfs attribute the fake knows", host_path)
        if value.strip() not in ("RoCE v2", "IB/RoCE v1"):
            raise OSError(errno.EINVAL, "Invalid argument", host_path)
        self.modes[(parts[0], int(parts[2]))] = value.strip()
        with open(self._real(host_path), "w", encoding="utf-8") as handle:
            handle.write(value.strip() + "\n")


class StandinCommands:
    """The command runner of a test :class:`Host` that runs the stand-in executables of
    ``fakes/standins`` (``programs``: name -> stand-in path) with ``env`` added, like the
    module's own runner does: argument lists, ``LC_ALL=C``, non-zero exits raised unless
    ``check`` is false."""

    def __init__(self, programs, env=None):
        self.programs = dict(programs)
        self.env = dict(env or {})
        self.calls = []

    def which(self, name, required=False, hint=None):
        if name in self.programs:
            return self.programs[name]
        if required:
            raise StateError("%s was not found on PATH%s; nothing was changed" % (name, ": " + hint if hint else ""))
        return None

    def run(self, argv, check=True, data=None):
        self.calls.append(list(argv))
        env = dict(os.environ, LC_ALL="C", LANG="C", **self.env)
        proc = subprocess.run(list(argv), input=data, capture_output=True, text=True, env=env, check=False)
        if check and proc.returncode != 0:
            raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
        return proc.returncode, proc.stdout, proc.stderr


BOOLEAN = {"False": 0, "True": 1}


def firmware_tool_on_path(tmp_path, monkeypatch, devices, name="mlxconfig"):
    """fakes/standins/mlxconfig on PATH as ``name`` (mlxconfig or mstconfig), the firmware of
    ``devices`` ({PF: {device_type, params}}) in its state file. Returns the state file's path."""
    # pylint: disable=import-outside-toplevel
    import json
    import shutil

    from fakes.paths import STANDINS  # pylint: disable=import-error
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shutil.copy(os.path.join(STANDINS, "mlxconfig"), str(bindir / name))
    state = tmp_path / "fw.json"
    state.write_text(json.dumps({"devices": devices}))
    monkeypatch.setenv("MLXCONFIG_STANDIN_STATE", str(state))
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    return str(state)
