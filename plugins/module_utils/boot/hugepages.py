# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hugepages per NUMA node: at runtime through sysfs, at boot through kernel args, kept
across reboots by a systemd unit.

The host's nodes, their memory and their current pools come from the host model
(:func:`topology.read_topology`). Runtime counts are written to
``/sys/devices/system/node/nodeN/hugepages/hugepages-<kB>kB/nr_hugepages`` and read back:
the kernel may give fewer pages than asked (fragmented memory), and then the previous
counts are written back, so nothing is left half-applied, unless partial results are
allowed. Boot-time pages (1G by default: runtime 1G allocation rarely succeeds) become
``hugepagesz=`` / ``hugepages=`` args, per node (``hugepages=0:N,1:M``) on Linux 5.16 and
later, as one total the kernel splits evenly over the nodes before that.
"""

from __future__ import absolute_import, division, print_function

import os
import posixpath
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import BootFiles
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.script import WANTS_DIR
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.bootloader import GrubCmdlineEdit
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.locks import root_lock
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import kernel_part
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import (
    InputError, StateError, check_line_value)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import (
    GLOBAL_DIR, SIZE_NAMES, SIZES_KB, SYSFS_NAMES)

__metaclass__ = type

NODE_DIR = "/sys/devices/system/node"
PER_NODE_BOOT_SYNTAX = (5, 16)
UNIT_NAME_MAX = 255  # systemd's UNIT_NAME_MAX (256) less the terminating NUL
UNIT_HEADER = "# Written by gpuvirt.tenancy (hugepages module): runtime hugepages per NUMA node, set again at boot.\n"


def kernel_version(release):
    match = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_node(value, where):
    if value is None or str(value).strip().lower() == "all":
        return "all"
    text = str(value).strip()
    if not text.isdigit():
        raise InputError("%s: node %r is not a NUMA node number or all" % (where, value))
    return int(text)


def systemd_escape_path(path):
    """``systemd-escape --path``: ``/dev/hugepages1G`` -> ``dev-hugepages1G``."""
    trimmed = path.strip("/")
    if not trimmed:
        return "-"
    out = []
    for index, char in enumerate(trimmed):
        if char == "/":
            out.append("-")
        elif ord(char) < 128 and (char.isalnum() or char in ":_") or (char == "." and index > 0):
            out.append(char)
        else:
            out.append("".join("\\x%02x" % byte for byte in char.encode("utf-8")))
    return "".join(out)


def unit_value(text):
    """``text`` as a systemd unit file setting keeps it: ``%`` doubled, so that systemd
    does not expand it as a specifier (``%n``, ``%h``)."""
    return text.replace("%", "%%")


def check_unit_name(name, option):
    """A service unit file name systemd loads: its characters (letters, digits, ``:-_.\\@``),
    at most 255 of them, ending in ``.service``."""
    if len(name) > UNIT_NAME_MAX or not re.match(r"^[A-Za-z0-9:_\\@-][A-Za-z0-9:_.\\@-]*\.service\Z", name):
        raise InputError("%s: %r is not a systemd service file name (letters, digits and :-_.\\@, at most %d "
                         "characters, ending in .service); give another name" % (option, name, UNIT_NAME_MAX))
    return name


def parse_mounts(text, default_kb):
    """hugetlbfs mounts of /proc/mounts: {path: page size in kB}; other mounts: {path: fstype}."""
    hugetlbfs, others = {}, {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        path = fields[1].replace("\\040", " ")
        if fields[2] != "hugetlbfs":
            others[path] = fields[2]
            continue
        size_kb = default_kb
        for option in fields[3].split(","):
            if option.startswith("pagesize="):
                size_kb = kernel_args.parse_size_kb(option[len("pagesize="):])
        hugetlbfs[path] = size_kb
    return hugetlbfs, others


class Hugepages:
    """Decide (``plan``), then act (``apply``)."""

    def __init__(self, host, pages, at_boot=("1G",), runtime=True, persist=False,
                 persist_unit="/etc/systemd/system/gpuvirt-hugepages.service", allow_partial=False,
                 boot_config="none", grub_file="/etc/default/grub", variable="GRUB_CMDLINE_LINUX",
                 bootloader_update="auto", mounts=None, enable_units=False):
        self.host = host
        self.fs = host.fs
        self.mounts = mounts or []
        self.mount_actions = []   # (size, path) to mount now
        self.mount_units = []     # (unit path, text, text before)
        self.enable_units = enable_units
        self.units_to_enable = []  # (unit path, its wants link) of the units written but not enabled
        self.pages = pages or []
        self.at_boot = set(at_boot or [])
        self.runtime = runtime
        self.persist = persist
        self.persist_unit = persist_unit
        self.allow_partial = allow_partial
        self.boot_config = boot_config
        self.grub = dict(grub_file=grub_file, variable=variable, bootloader_update=bootloader_update)
        self.topology = None
        self.nodes = {}
        self.wanted = {}         # (size, node) -> count
        self.runtime_changes = []  # (size, node, before, after)
        # boot sizes this kernel cannot reserve per node on its command line (before 5.16): the
        # boot-time unit reserves them per node at the next boot instead, nothing more
        self.boot_unit_sizes = set()
        self.boot_args = []
        self.grub_edit = None
        self.unit_text = None
        self.unit_before = None
        self.result = {}
        self.done = []            # what apply() has changed, for a failure after a change

    # ------------------------------------------------------------------ paths
    def count_path(self, size, node, what="nr_hugepages"):
        per_node = "%s/node%d/hugepages/hugepages-%s/%s" % (NODE_DIR, node, SYSFS_NAMES[size], what)
        if self.fs.exists(per_node) or self.fs.isdir(NODE_DIR + "/node%d" % node):
            return per_node
        return "%s/hugepages-%s/%s" % (GLOBAL_DIR, SYSFS_NAMES[size], what)  # kernel without NUMA

    def read_count(self, size, node, what="nr_hugepages"):
        return self.fs.read_int(self.count_path(size, node, what), default=0)

    def write_count(self, size, node, count):
        """Ask the kernel for ``count`` pages; returns what it holds afterwards."""
        self.host.kernel.write(self.count_path(size, node), "%d\n" % count)
        return self.read_count(size, node)

    # ------------------------------------------------------------------ decide
    def _expand(self):
        wanted = {}
        for position, item in enumerate(self.pages):
            where = "pages[%d]" % position
            if not isinstance(item, dict):
                raise InputError("%s: %r is not a dict with size, count and node" % (where, item))
            size = str(item.get("size") or "")
            if size not in SIZE_NAMES:
                raise InputError("%s: size %r is not 2M or 1G" % (where, item.get("size")))
            count = item.get("count")
            if isinstance(count, bool) or not re.match(r"^[0-9]+\Z", str(count)):
                raise InputError("%s: count %r is not a whole number of pages" % (where, count))
            count = int(count)
            node = parse_node(item.get("node", "all"), where)
            targets = sorted(self.nodes) if node == "all" else [node]
            if node != "all" and node not in self.nodes:
                raise InputError("%s: NUMA node %d does not exist on this host (nodes: %s)"
                                 % (where, node, ", ".join(str(n) for n in sorted(self.nodes)) or "none"))
            for target in targets:
                if (size, target) in wanted and wanted[(size, target)] != count:
                    raise InputError("%s: %s pages on node %d are asked twice (%d and %d); keep one"
                                     % (where, size, target, wanted[(size, target)], count))
                wanted[(size, target)] = count
        for node_id, node in sorted(self.nodes.items()):
            asked_kb = sum(count * SIZES_KB[size] for (size, target), count in wanted.items() if target == node_id)
            memory_mb = node.get("memory_mb")
            if memory_mb is not None and asked_kb > memory_mb * 1024:
                detail = ", ".join("%d x %s" % (count, size) for (size, target), count in sorted(wanted.items())
                                   if target == node_id and count)
                raise InputError("pages: node %d has %d MB of memory; %s (%d MB) does not fit. Ask for fewer pages"
                                 % (node_id, memory_mb, detail, asked_kb // 1024))
        for (size, node_id), count in sorted(wanted.items()):
            info = self.nodes[node_id]["hugepages"].get(SYSFS_NAMES[size], {})
            if count and not info.get("supported", False):
                raise InputError("pages: %s pages are not supported on node %d (no hugepages-%s in sysfs: the CPU "
                                 "lacks the page size or the kernel was built without it)" % (size, node_id, SYSFS_NAMES[size]))
        return wanted

    def _boot_args(self):
        """``{name, value, state}`` items for the boot-time sizes, for iommu_grub's args."""
        items = []
        release = self.topology.get("kernel_release")
        version = kernel_version(release)
        for size in SIZE_NAMES:
            if size not in self.at_boot:
                continue
            counts = {node: count for (s, node), count in self.wanted.items() if s == size}
            if not counts:
                continue
            if not any(counts.values()):
                items.append({"name": "hugepagesz", "value": size, "state": "absent"})
                continue
            if version is not None and version >= PER_NODE_BOOT_SYNTAX:
                value = ",".join("%d:%d" % (node, count) for node, count in sorted(counts.items()))
            else:
                every = [counts.get(node, 0) for node in sorted(self.nodes)]
                if len(set(every)) != 1:
                    # hugepages=N spreads N over every node: reserving per node by that would take
                    # pages nobody asked for, so the boot-time unit reserves them per node instead
                    self.boot_unit_sizes.add(size)
                    continue
                value = str(sum(every))
            items.append({"name": "hugepagesz", "value": size, "state": "present"})
            items.append({"name": "hugepages", "value": value, "state": "present"})
        return items

    def _unit(self):
        lines = [UNIT_HEADER, "[Unit]\n",
                 "Description=Hugepages per NUMA node (gpuvirt.tenancy)\n",
                 "Before=libvirtd.service virtqemud.service\n",
                 "\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"]
        # Larger pages first: they need contiguous memory, which only gets scarcer.
        for (size, node), count in sorted(self.unit_wanted().items(), key=lambda i: (-SIZES_KB[i[0][0]], i[0][1])):
            lines.append("ExecStart=/bin/sh -c 'echo %d > %s'\n" % (count, self.count_path(size, node)))
        lines.append("\n[Install]\nWantedBy=multi-user.target\n")
        return "".join(lines)

    def runtime_wanted(self):
        return {key: count for key, count in self.wanted.items() if key[0] not in self.at_boot}

    def unit_wanted(self):
        """What the boot-time unit reserves: the runtime sizes, and the boot sizes this kernel cannot
        reserve per node on its command line."""
        return {key: count for key, count in self.wanted.items()
                if key[0] not in self.at_boot or key[0] in self.boot_unit_sizes}

    def plan(self):
        self.topology = self.host.topology()
        self.nodes = {node["id"]: node for node in self.topology["numa_nodes"]}
        self.wanted = self._expand()
        self.boot_args = self._boot_args()
        if self.runtime:
            for (size, node), count in sorted(self.runtime_wanted().items()):
                self.host.path(self.count_path(size, node), "pages")  # the sysfs count stays inside the root
                before = self.read_count(size, node)
                if before != count:
                    self.runtime_changes.append((size, node, before, count))
        # Shrink first: it frees memory the growing pools may need.
        self.runtime_changes.sort(key=lambda c: (c[3] > c[2], -SIZES_KB[c[0]], c[1]))
        if self.boot_unit_sizes and not self.persist:
            raise InputError("pages: Linux %s reads no per-node hugepages=N:COUNT (5.16 and later do), so the %s pages "
                             "per node (%s) are reserved at boot by the boot-time unit; set persist: true (or give every "
                             "node the same count)" % (self.topology.get("kernel_release"), ", ".join(sorted(self.boot_unit_sizes)),
                                                       ", ".join("node %d: %d" % (n, c) for (sz, n), c in sorted(self.wanted.items())
                                                                 if sz in self.boot_unit_sizes)))
        if self.persist and (self.unit_wanted() or self.mounts):
            self.host.file_target(self.persist_unit, "persist_unit")
            check_unit_name(os.path.basename(self.persist_unit), "persist_unit")
        if self.persist and self.unit_wanted():
            self.unit_before = self.host.read_text(self.persist_unit, "persist_unit")
            self.unit_text = self._unit()
        ops = kernel_args.args_ops(self.boot_args, option="boot_args")
        if self.boot_config == "grub" and ops:
            self.grub_edit = GrubCmdlineEdit(self.host, ops, **self.grub)
            grub_plan = self.grub_edit.plan()
            reboot, missing, unwanted = grub_plan["reboot_required"], grub_plan["args_missing"], grub_plan["args_unwanted"]
        else:
            running = kernel_part(self.topology.get("cmdline") or [])
            missing, unwanted = kernel_args.pending_changes(ops, running)
            reboot = bool(missing or unwanted)
        # pools the boot-time unit fills at the next boot: a reboot is due while they fall short
        short = [(size, node) for (size, node), count in sorted(self.wanted.items())
                 if size in self.boot_unit_sizes and (self.read_count(size, node) or 0) < count]
        reboot = reboot or bool(short)
        self._plan_mounts()
        self._plan_enable()
        unit_changed = self.unit_text is not None and self.unit_text != self.unit_before
        self.result = {
            "changed": bool(self.runtime_changes) or unit_changed or bool(self.grub_edit and self.grub_edit.result["changed"]),
            "boot_args": self.boot_args,
            "reboot_required": reboot,
            "args_missing": missing,
            "args_unwanted": unwanted,
            "persist_unit": self.persist_unit if self.unit_text is not None else None,
            "persist_unit_changed": unit_changed,
            # sizes reserved per node by the boot-time unit because this kernel's command line cannot
            "boot_unit_sizes": sorted(self.boot_unit_sizes),
            "mounts": [{"size": size, "path": path, "mounted": (size, path) not in self.mount_actions}
                       for size, path in self._wanted_mounts()],
            "mount_units": [unit for unit, _text, _before in self.mount_units],
            "units_enabled": [os.path.basename(unit) for unit, _link in self.units_to_enable],
        }
        self.result["changed"] = self.result["changed"] or bool(self.mount_actions) or bool(self.units_to_enable) or any(
            text != before for _unit, text, before in self.mount_units)
        return self.result

    def _wanted_mounts(self):
        wanted = []
        for position, item in enumerate(self.mounts):
            where = "mounts[%d]" % position
            if not isinstance(item, dict):
                raise InputError("%s: %r is not a dict with size and path" % (where, item))
            size, path = str(item.get("size") or ""), check_line_value(item.get("path") or "", where + ".path")
            if size not in SIZE_NAMES:
                raise InputError("%s: size %r is not 2M or 1G" % (where, item.get("size")))
            if not path.startswith("/") or any(c.isspace() for c in path):
                raise InputError("%s: path %r is not an absolute path without blanks" % (where, path))
            path = path.rstrip("/") or "/"
            normal = posixpath.normpath(path)
            if normal != path or path.startswith("//"):
                # systemd refuses a mount unit whose Where= has '.', '..' or '//' components
                raise InputError("%s: path %r is not normalised (no '.', '..' or '//' components): give %r"
                                 % (where, path, "/" + normal.lstrip("/")))
            if len(systemd_escape_path(path) + ".mount") > UNIT_NAME_MAX:
                raise InputError("%s: path %r makes a mount unit name longer than systemd's %d characters; give a "
                                 "shorter mount point" % (where, path, UNIT_NAME_MAX))
            self.host.path(path, where + ".path")
            wanted.append((size, path))
        paths = [path for _size, path in wanted]
        if len(set(paths)) != len(paths):
            raise InputError("mounts: a path is given twice; give each page size its own mount point")
        return wanted

    def _plan_mounts(self):
        wanted = self._wanted_mounts()
        if not wanted:
            return
        default_kb = None
        for line in self.fs.read_keys("/proc/meminfo", ("Hugepagesize",)).splitlines():
            match = re.match(r"^Hugepagesize:\s+(\d+)\s*kB", line)
            if match:
                default_kb = int(match.group(1))
        hugetlbfs, others = parse_mounts(self.fs.read("/proc/mounts"), default_kb)
        supported = {size for size in SIZE_NAMES if self.fs.isdir("%s/hugepages-%s" % (GLOBAL_DIR, SYSFS_NAMES[size]))}
        for size, path in wanted:
            if size not in supported:
                raise InputError("mounts: %s pages are not supported by this kernel (no %s/hugepages-%s)"
                                 % (size, GLOBAL_DIR, SYSFS_NAMES[size]))
            if path in others:
                raise InputError("mounts: %s is already a %s mount; choose another mount point for %s pages"
                                 % (path, others[path], size))
            if path in hugetlbfs and hugetlbfs[path] != SIZES_KB[size]:
                raise InputError("mounts: %s is a hugetlbfs mount of %s kB pages, not %s; choose another mount point"
                                 % (path, hugetlbfs[path], size))
            if path not in hugetlbfs:
                self.mount_actions.append((size, path))
            if self.persist:
                unit = os.path.join(os.path.dirname(self.persist_unit), systemd_escape_path(path) + ".mount")
                text = "".join([
                    UNIT_HEADER.replace("runtime hugepages per NUMA node", "hugetlbfs mount of %s pages" % size),
                    "[Unit]\nDescription=hugetlbfs with %s pages (gpuvirt.tenancy)\n" % size,
                    "Before=libvirtd.service virtqemud.service\n",
                    "\n[Mount]\nWhat=hugetlbfs\nWhere=%s\nType=hugetlbfs\nOptions=pagesize=%s\n" % (unit_value(path), size),
                    "\n[Install]\nWantedBy=multi-user.target\n",
                ])
                self.mount_units.append((unit, text, self.host.read_text(unit, "persist_unit")))

    def _plan_enable(self):
        """The units this run writes or keeps that systemd does not start at boot yet: an
        enabled unit has its link in multi-user.target.wants (what ``systemctl enable`` makes
        for ``WantedBy=multi-user.target``), so the link decides, on a live host and in a
        captured tree alike."""
        if not self.enable_units:
            return
        units = ([self.persist_unit] if self.unit_text is not None else []) + [unit for unit, _t, _b in self.mount_units]
        boot_files = BootFiles(self.host)
        for unit in units:
            if boot_files.wants_link_missing(os.path.basename(unit)):
                self.units_to_enable.append((unit, "%s/%s" % (WANTS_DIR, os.path.basename(unit))))

    def _enable(self, run, units_written):
        """``systemctl daemon-reload`` after a unit changed and ``systemctl enable`` on the live
        host; under another root the wants links themselves (systemd is not running there)."""
        if self.host.live and (units_written or self.units_to_enable):
            systemctl = self.host.commands.which("systemctl", required=True, hint="the units need systemd")
            if units_written:
                self.host.commands.run([systemctl, "daemon-reload"])
            for unit, _link in self.units_to_enable:
                self.host.commands.run([systemctl, "enable", os.path.basename(unit)])
                run.changed = True
                self.done.append("enabled " + os.path.basename(unit))
            return
        for unit, link in self.units_to_enable:
            real = self.host.path(link, "enable_units", follow=False)
            self.host.files.makedirs(os.path.dirname(real))
            self.host.files.symlink(unit, real)
            run.changed = True
            self.done.append("linked " + link)

    # ------------------------------------------------------------------ act
    def apply(self, run):
        """Set the runtime counts, write the units, mount, edit the GRUB file; never in check
        mode (the caller checks). Returns a list of shortfalls (empty when the kernel gave
        every count asked); with shortfalls and no ``allow_partial``, the previous counts are
        written back and nothing else is done."""
        shortfalls = []
        done = []
        for size, node, before, count in self.runtime_changes:
            try:
                got = self.write_count(size, node, count)
                error = None
            except (OSError, IOError) as exc:
                got, error = self.read_count(size, node), str(exc)
            done.append((size, node, before, count))
            if got != count:
                shortfalls.append({"node": node, "size": size, "requested": count, "allocated": got,
                                   "previous": before, "error": error})
        if shortfalls and not self.allow_partial:
            for size, node, before, _count in reversed(done):
                try:
                    restored = self.write_count(size, node, before)
                except (OSError, IOError):
                    restored = self.read_count(size, node)
                for item in shortfalls:
                    if (item["size"], item["node"]) == (size, node):
                        item["restored_to"] = restored
            return shortfalls
        if done:
            run.changed = True
            self.done.append("runtime counts set: " + ", ".join(
                "node %d %s %d -> %d" % (node, size, before, count) for size, node, before, count in done))
        units_written = []
        if self.result["persist_unit_changed"]:
            self.host.files.write(self.host.path(self.persist_unit, "persist_unit"), self.unit_text, mode=0o644)
            run.changed = True
            units_written.append(self.persist_unit)
            self.done.append("wrote " + self.persist_unit)
        for unit, text, before in self.mount_units:
            if text != before:
                self.host.files.write(self.host.path(unit, "persist_unit"), text, mode=0o644)
                run.changed = True
                units_written.append(unit)
                self.done.append("wrote " + unit)
        if self.enable_units:
            self._enable(run, units_written)
        for size, path in self.mount_actions:
            real = self.host.path(path, "mounts")
            self.host.files.makedirs(real)
            mount = self.host.commands.which("mount", required=True)
            self.host.commands.run([mount, "-t", "hugetlbfs", "-o", "pagesize=%s" % size, "hugetlbfs", real])
            run.changed = True
            self.done.append("mounted %s pages on %s" % (size, path))
        if self.grub_edit is not None:
            self.grub_edit.apply(run)
            if self.grub_edit.result["changed"]:
                self.done.append("edited " + self.grub_edit.grub_file)
        return shortfalls

    def report(self):
        """Per node and size: requested, allocated, free."""
        rows = []
        for node in sorted(self.nodes):
            for size in SIZE_NAMES:
                if (size, node) not in self.wanted:
                    continue
                rows.append({
                    "node": node,
                    "size": size,
                    "requested": self.wanted[(size, node)],
                    "allocated": self.read_count(size, node),
                    "free": self.read_count(size, node, "free_hugepages"),
                    "at_boot": size in self.at_boot,
                })
        return rows

    def add_diff(self, diff):
        """The runtime counts, the units and the GRUB file, before and after."""
        before, after = [], []
        for size, node, old, new in self.runtime_changes:
            path = self.count_path(size, node)
            before.append("%s: %d\n" % (path, old))
            after.append("%s: %d\n" % (path, new))
        diff.add("nr_hugepages", "".join(before), "".join(after))
        if self.result.get("persist_unit_changed"):
            diff.add(self.persist_unit, self.unit_before, self.unit_text)
        for unit, text, before_text in self.mount_units:
            if text != before_text:
                diff.add(unit, before_text, text)
        for unit, link in self.units_to_enable:
            diff.add(link, None, "symbolic link to %s\n" % unit)
        if self.grub_edit is not None and self.grub_edit.result["file_changed"]:
            diff.add(self.grub_edit.grub_file, self.grub_edit.result["before"], self.grub_edit.result["after"])


# The module's argument spec (plugins/modules/hugepages.py), here so that iommu_grub can run
# hugepages inside its own call (runner.run_nested) with the same validation.
MODULE_ARGS = dict(
    argument_spec=dict(
        pages=dict(type="list", elements="dict", required=True, options=dict(
            size=dict(type="str", required=True, choices=["2M", "1G"]),
            count=dict(type="int", required=True),
            node=dict(type="raw", default="all"),
        )),
        at_boot=dict(type="list", elements="str", default=["1G"], choices=["2M", "1G"]),
        runtime=dict(type="bool", default=True),
        persist=dict(type="bool", default=False),
        persist_unit=dict(type="path", default="/etc/systemd/system/gpuvirt-hugepages.service"),
        enable_units=dict(type="bool", default=True),
        mounts=dict(type="list", elements="dict", default=[], options=dict(
            size=dict(type="str", required=True, choices=["2M", "1G"]),
            path=dict(type="path", required=True),
        )),
        allow_partial=dict(type="bool", default=False),
        boot_config=dict(type="str", default="grub", choices=["grub", "none"]),
        grub_file=dict(type="path", default="/etc/default/grub"),
        variable=dict(type="str", default="GRUB_CMDLINE_LINUX",
                      choices=["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"]),
        bootloader_update=dict(type="str", default="auto", choices=["auto", "none"]),
        root=dict(type="path", default="/"),
    ),
)

# The options a module that writes the GRUB file itself (iommu_grub) does not take for the
# hugepages it runs: it puts the boot sizes into its own edit.
GRUB_OPTIONS = ("boot_config", "grub_file", "variable", "bootloader_update")
WITHOUT_GRUB_ARGS = dict(argument_spec=dict((key, value) for key, value in MODULE_ARGS["argument_spec"].items()
                                            if key not in GRUB_OPTIONS))


def hugepages_plan(params, host):
    """Decide (nothing is written): the manager, with ``manager.result`` and ``manager.boot_args``."""
    # without the GRUB options (WITHOUT_GRUB_ARGS) the boot sizes go to the caller: boot_config none
    grub = dict((key, params[key]) for key in GRUB_OPTIONS if key in params)
    manager = Hugepages(host, params["pages"], at_boot=params["at_boot"], runtime=params["runtime"],
                        persist=params["persist"], persist_unit=params["persist_unit"],
                        allow_partial=params["allow_partial"], mounts=params["mounts"],
                        enable_units=params["enable_units"], **grub)
    manager.plan()
    return manager


def hugepages_act(manager, params, run):
    """Act on what ``hugepages_plan`` decided (unless in check mode); the module's result. A
    shortfall the kernel leaves fails the run (previous counts written back) unless ``allow_partial``."""
    result = dict(manager.result)
    try:
        shortfalls = [] if run.check_mode else manager.apply(run)
    except (OSError, IOError) as exc:
        error = StateError("hugepages: %s failed (%s) after: %s" % (
            getattr(exc, "filename", None) or "a step", exc.strerror or exc, "; ".join(manager.done) or "nothing"))
        error.details = {"done": manager.done}
        raise error
    except StateError as exc:
        exc.details = dict(getattr(exc, "details", None) or {}, done=manager.done)
        raise
    result["pages"] = manager.report()
    result["shortfalls"] = shortfalls
    manager.add_diff(run.diff)
    if shortfalls:
        lines = ["node %d: asked %d x %s, the kernel gave %d" % (s["node"], s["requested"], s["size"], s["allocated"])
                 + (" (%s)" % s["error"] if s["error"] else "") for s in shortfalls]
        if not params["allow_partial"]:
            result["changed"] = False
            error = StateError("hugepages: %s; previous counts written back (free memory on the node, reserve at boot "
                               "with at_boot, or set allow_partial: true to keep what the kernel gives)" % "; ".join(lines))
            error.details = result
            raise error
        run.warn("hugepages: " + "; ".join(lines))
    return result


def hugepages(params, host, run):
    """The hugepages module: decide, then act unless in check mode; one call at a time per root,
    as iommu_grub (both edit the GRUB file)."""
    with root_lock(host.root, "hugepages"):
        return hugepages_act(hugepages_plan(params, host), params, run)
