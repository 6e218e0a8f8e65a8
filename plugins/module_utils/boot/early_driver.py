# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stub driver of ``pci-stub.ids=`` / ``vfio-pci.ids=`` loaded early enough to hold the
devices: built into the kernel it always is; as a module it must be loaded at boot
(modules-load.d), before the devices' own drivers (a modprobe softdep) and, where asked,
from the initramfs (initramfs-tools ``modules`` or a dracut.conf.d file).

:class:`EarlyDriver` reads whether the running kernel has the driver built in
(``/lib/modules/RELEASE/modules.builtin``) and whether it runs now (``/sys/module/NAME``),
plans the files as ``(host_path, before, after)`` changes, and writes them through the
host's file writer. Used by the iommu_grub feature, which decides the reboot."""

from __future__ import absolute_import, division, print_function

import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.bootloader import DEBIAN_LIKE, RHEL_LIKE, read_os_release
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

MODULES_LOAD_FILE = "/etc/modules-load.d/gpuvirt-prebind.conf"
SOFTDEP_FILE = "/etc/modprobe.d/gpuvirt-prebind.conf"
INITRAMFS_TOOLS_MODULES = "/etc/initramfs-tools/modules"
DRACUT_FILE = "/etc/dracut.conf.d/gpuvirt-prebind.conf"
MODULE_NAME = re.compile(r"^[A-Za-z0-9_-]+\Z")


def check_module_name(name, where):
    if not isinstance(name, str) or not MODULE_NAME.match(name):
        raise InputError("%s: %r is not a kernel module name (letters, digits, - and _)" % (where, name))
    return name


def module_file_pattern(name):
    """A line of modules.builtin (or of an initramfs listing) naming the driver's module file:
    ``kernel/drivers/pci/pci-stub.ko``, compressed or not; - and _ are the same to modprobe."""
    parts = [re.escape(part) for part in re.split(r"[-_]", name)]
    return re.compile(r"/%s\.ko(\.[a-z]+)?$" % "[-_]".join(parts), re.M)


def modules_load_text(name):
    return "%s\n" % name


def softdep_text(name, before):
    lines = ["# Written by gpuvirt.tenancy (host_boot): %s claims the pre-bound devices first.\n" % name]
    lines += ["softdep %s pre: %s\n" % (driver, name) for driver in before]
    return "".join(lines)


def with_line(text, line):
    """``text`` with ``line`` appended unless a line already equals it (as lineinfile does)."""
    text = text or ""
    if line in [existing.rstrip("\r") for existing in text.split("\n")]:
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    return text + line + "\n"


def dracut_text(name):
    return 'force_drivers+=" %s "\n' % name


def initramfs_tool(os_words):
    """initramfs-tools on the Debian family, dracut on the RHEL family, else None."""
    if os_words & DEBIAN_LIKE:
        return "initramfs-tools"
    if os_words & RHEL_LIKE:
        return "dracut"
    return None


class EarlyDriver:
    """``spec``: ``{name, softdep_for, initramfs}`` (the iommu_grub option ``early_driver``)."""

    def __init__(self, host, spec):
        self.host = host
        self.name = check_module_name(spec.get("name"), "early_driver.name")
        self.softdep_for = [check_module_name(d, "early_driver.softdep_for") for d in spec.get("softdep_for") or []]
        self.initramfs = bool(spec.get("initramfs"))
        self.changes = []
        self.result = {}

    def builtin(self):
        release = self.host.fs.read("/proc/sys/kernel/osrelease")
        listing = self.host.fs.read("/lib/modules/%s/modules.builtin" % release) if release else None
        return bool(listing) and bool(module_file_pattern(self.name).search(listing))

    def loaded(self):
        return self.host.fs.isdir("/sys/module/" + self.name.replace("-", "_"))

    def _change(self, host_path, after_of_before):
        before = self.host.read_text(host_path, "early_driver")
        after = after_of_before(before)
        if after != before:
            self.changes.append((host_path, before, after))
        return {"changed": after != before}

    def plan(self):
        builtin = self.builtin()
        loaded = self.loaded()
        tool = initramfs_tool(read_os_release(self.host.fs)) if self.initramfs else None
        files = {}
        if not builtin:
            files[MODULES_LOAD_FILE] = self._change(MODULES_LOAD_FILE, lambda _b: modules_load_text(self.name))
            if self.softdep_for:
                files[SOFTDEP_FILE] = self._change(SOFTDEP_FILE, lambda _b: softdep_text(self.name, self.softdep_for))
            if tool == "initramfs-tools":
                files[INITRAMFS_TOOLS_MODULES] = self._change(INITRAMFS_TOOLS_MODULES, lambda b: with_line(b, self.name))
            elif tool == "dracut":
                files[DRACUT_FILE] = self._change(DRACUT_FILE, lambda _b: dracut_text(self.name))
        self.result = {
            "name": self.name,
            "builtin": builtin,
            "loaded": loaded,
            # while the driver does not run, the devices are not held by it: the next boot loads it
            "reboot_required": not loaded,
            "in_initramfs": self.initramfs and not builtin,
            "initramfs_tool": tool,
            "files": files,
            "changed": bool(self.changes),
        }
        return self.result

    def apply(self, run):
        for host_path, _before, after in self.changes:
            real = self.host.path(host_path, "early_driver")
            self.host.files.makedirs(os.path.dirname(real))
            self.host.files.write(real, after, mode=0o644)
            run.changed = True
