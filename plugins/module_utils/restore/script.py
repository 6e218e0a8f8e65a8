# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time restore script for SR-IOV VFs and vfio-pci bindings, and its units.

``sriov_vfs`` and ``vfio_bind`` (``persist: true``) install the same script, a config
file each under /etc/gpuvirt/, and one systemd unit each, ordered before libvirtd so that
tenant domains start on recreated VFs that are already held by vfio-pci. The script uses
only the Python standard library and writes the same sysfs files the modules write.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SCRIPT_PATH = "/usr/local/libexec/gpuvirt/gpuvirt-sriov-vfio"
SRIOV_CONFIG = "/etc/gpuvirt/sriov.json"
VFIO_CONFIG = "/etc/gpuvirt/vfio.json"
UNIT_DIR = "/etc/systemd/system"
WANTS_DIR = "/etc/systemd/system/multi-user.target.wants"
SRIOV_UNIT = "gpuvirt-sriov.service"
VFIO_UNIT = "gpuvirt-vfio.service"
UDEV_RULES = "/etc/udev/rules.d/61-gpuvirt-vfio.rules"
MODULES_LOAD = "/etc/modules-load.d/gpuvirt-vfio.conf"

SCRIPT = r'''#!/usr/bin/python3
# Installed by the gpuvirt.tenancy collection (sriov_vfs / vfio_bind, persist: true).
# Recreates SR-IOV VFs and their settings (sriov) and binds devices to their
# driver_override driver (vfio), at boot before libvirtd. Standard library only.
"""usage: gpuvirt-sriov-vfio {sriov|vfio} [--root DIR] [--wait SECONDS]"""
import json
import os
import subprocess
import sys
import time


def log(msg):
    sys.stdout.write("gpuvirt: %s\n" % msg)
    sys.stdout.flush()


class Tree:
    """The host's files under ``root`` ("/" at boot, a test tree otherwise). Sysfs writes go
    through ``writer(path, value)`` when one is given (a stand-in for the kernel)."""

    def __init__(self, root="/", writer=None):
        self.root = root
        self.writer = writer

    @property
    def live(self):
        return self.root == "/"

    def p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path):
        try:
            with open(self.p(path)) as handle:
                return handle.read().strip()
        except OSError:
            return None

    def write(self, path, value):
        if self.writer is not None:
            self.writer(path, value)
            return
        with open(self.p(path), "w") as handle:
            handle.write(value)

    def driver_of(self, addr):
        try:
            return os.path.basename(os.readlink(self.p("/sys/bus/pci/devices/%s/driver" % addr)))
        except OSError:
            return None

    def load_config(self, path):
        try:
            with open(self.p(path)) as handle:
                return json.load(handle)
        except (OSError, ValueError) as exc:
            log("cannot read %s: %s" % (path, exc))
            return None


def wait_for(check, deadline):
    """Poll until check() or the run's shared deadline: devices that never come (a VF
    dropped by a smaller count) cost the boot at most one wait in all."""
    while True:
        if check():
            return True
        if time.time() >= deadline:
            return False
        time.sleep(0.5)


def restore_sriov(tree, wait):
    config = tree.load_config("/etc/gpuvirt/sriov.json")
    deadline = time.time() + wait
    failed = 0
    for pf, want in sorted(((config or {}).get("pfs") or {}).items()):
        base = "/sys/bus/pci/devices/%s" % pf
        # The PF's driver (mlx5_core, nvme, ...) may still be loading.
        if not wait_for(lambda: tree.read(base + "/sriov_totalvfs") is not None and tree.driver_of(pf), deadline):
            log("%s: no SR-IOV capable PF with a driver after %ds, skipped" % (pf, wait))
            failed += 1
            continue
        try:
            if want.get("autoprobe") is not None:
                tree.write(base + "/sriov_drivers_autoprobe", "1" if want["autoprobe"] else "0")
            current = int(tree.read(base + "/sriov_numvfs") or 0)
            if current != want["num_vfs"]:
                if current:
                    tree.write(base + "/sriov_numvfs", "0")
                if want["num_vfs"]:
                    tree.write(base + "/sriov_numvfs", str(want["num_vfs"]))
            log("%s: %d VFs" % (pf, want["num_vfs"]))
        except OSError as exc:
            log("%s: setting %d VFs failed: %s" % (pf, want["num_vfs"], exc))
            failed += 1
            continue
        netdevs = sorted(os.listdir(tree.p(base + "/net"))) if os.path.isdir(tree.p(base + "/net")) else []
        # A PF that no network configuration names comes up down, and libvirt will not start
        # a domain holding one of its VFs as <interface type='hostdev'> then.
        if want.get("link_up") and netdevs:
            argv = ["ip", "link", "set", "dev", netdevs[0], "up"]
            if not tree.live:
                log("would run: %s" % " ".join(argv))
            elif subprocess.call(argv) != 0:
                log("%s: %s failed" % (pf, " ".join(argv)))
                failed += 1
        for vf in want.get("vfs") or []:
            if not netdevs:
                log("%s: no netdev, VF settings skipped" % pf)
                break
            argv = ["ip", "link", "set", "dev", netdevs[0], "vf", str(vf["index"])]
            for key, word in (("mac", "mac"), ("vlan", "vlan"), ("qos", "qos")):
                if vf.get(key) is not None and not (key == "qos" and vf.get("vlan") is None):
                    argv += [word, str(vf[key])]
            for key, word in (("spoofchk", "spoofchk"), ("trust", "trust")):
                if vf.get(key) is not None:
                    argv += [word, "on" if vf[key] else "off"]
            if vf.get("link_state"):
                argv += ["state", vf["link_state"]]
            if not tree.live:
                log("would run: %s" % " ".join(argv))
                continue
            if subprocess.call(argv) != 0:
                log("%s: %s failed" % (pf, " ".join(argv)))
                failed += 1
    return failed


def restore_vfio(tree, wait):
    config = tree.load_config("/etc/gpuvirt/vfio.json")
    devices = sorted(((config or {}).get("devices") or {}).items())
    deadline = time.time() + wait
    failed = 0
    if any(d.get("driver") == "vfio-pci" for _a, d in devices) and tree.live:
        subprocess.call(["modprobe", "vfio-pci"])
    for addr, want in devices:
        driver = want.get("driver")
        base = "/sys/bus/pci/devices/%s" % addr
        if not wait_for(lambda: os.path.exists(tree.p(base + "/driver_override")), deadline):
            log("%s: not present, skipped" % addr)
            continue
        try:
            if tree.read(base + "/driver_override") != driver:
                tree.write(base + "/driver_override", driver)
            current = tree.driver_of(addr)
            if current != driver:
                if current:
                    tree.write(base + "/driver/unbind", addr)
                tree.write("/sys/bus/pci/drivers_probe", addr)
        except OSError as exc:
            log("%s: binding to %s failed: %s" % (addr, driver, exc))
        after = tree.driver_of(addr)
        log("%s: driver %s" % (addr, after))
        if after != driver:
            failed += 1
    return failed


def main(argv):
    args = list(argv)
    wait = 60
    root = "/"
    if "--root" in args:
        root = args.pop(args.index("--root") + 1)
        args.remove("--root")
    if "--wait" in args:
        wait = int(args.pop(args.index("--wait") + 1))
        args.remove("--wait")
    if args == ["sriov"]:
        return 1 if restore_sriov(Tree(root), wait) else 0
    if args == ["vfio"]:
        return 1 if restore_vfio(Tree(root), wait) else 0
    sys.stderr.write(__doc__ + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def _restore_unit(module, description, after, before, step):
    """The oneshot unit that runs the restore script's ``step`` at boot, as ``module`` installs it."""
    return """# Installed by the gpuvirt.tenancy collection (%s, persist: true).
[Unit]
Description=gpuvirt: %s
After=%s
Before=%s

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/python3 %s %s

[Install]
WantedBy=multi-user.target
""" % (module, description, after, before, SCRIPT_PATH, step)


SRIOV_UNIT_TEXT = _restore_unit("sriov_vfs", "recreate SR-IOV VFs and their settings",
                                "systemd-udev-settle.service systemd-modules-load.service",
                                "gpuvirt-vfio.service libvirtd.service virtqemud.service", "sriov")
VFIO_UNIT_TEXT = _restore_unit("vfio_bind", "bind devices to vfio-pci (driver_override)",
                               "systemd-udev-settle.service systemd-modules-load.service gpuvirt-sriov.service",
                               "libvirtd.service virtqemud.service", "vfio")
