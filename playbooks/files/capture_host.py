#!/usr/bin/env python
"""Capture what the collection reads on a host (its sysfs/procfs subset and the files it
edits), as a small tree that every module reads like the host itself with ``root`` set to it:
the input of the preview (docs/preview.md) and of the unit tests' fake roots.

usage: capture_host.py [--root /] [--note TEXT] OUT_DIR | OUT.tar | OUT.tar.gz

What is copied:
  /sys/bus/pci/devices/*      the links, and in each PCI device directory they point to
                              (/sys/devices/pci*/...): small attribute files (vendor,
                              device, class, numa_node, sriov_*, driver_override, ...;
                              config only of an SR-IOV PF without sriov_offset),
                              the links driver, iommu_group, physfn, virtfn*, the names
                              under net/ and infiniband/, and each RDMA port's link_layer
  /sys/devices/system/node    node*/{cpulist,meminfo,distance}, hugepages counts
  /sys/devices/system/cpu     online/possible/present, cpu*/online, cpu*/topology ids
  /sys/kernel/iommu_groups    groups, their type and device links
  /sys/class/net/*            links, and each netdev's address/operstate/mtu/type/flags/device
  /sys/class/iommu/*          links
  /sys/firmware/acpi/tables   DMAR / IVRS (the IOMMU's ACPI table), when present
  /sys/firmware/efi/efivars   LoaderInfo-<Boot Loader Interface GUID> (the boot loader), when present
  /sys/kernel/mm/hugepages    the page sizes the kernel offers, and their pools
  /sys/module/*               the loaded modules' names (directories only), and
                              /lib/modules/<release>/modules.builtin of the running kernel
  /sys/class/dmi/id           sys_vendor (a VM's hypervisor, such as QEMU)
  /proc                       cmdline, cpuinfo (first CPU only), meminfo, boot_id,
                              osrelease, mounts, self/mountinfo, swaps, net/route,
                              net/if_inet6, net/ipv6_route (the devices the host needs)
  files the collection edits  /etc/default/grub and its drop-ins /etc/default/grub.d/*.cfg,
                              /etc/os-release, /usr/lib/os-release,
                              /etc/modprobe.d, /etc/modules-load.d, /etc/initramfs-tools/modules,
                              /etc/dracut.conf.d, /etc/libvirt/qemu/*.xml (defined domains),
                              /run/libvirt/qemu/*.xml (running ones), /etc/gpuvirt, the
                              collection's udev rule and its boot-time script
                              (/usr/local/libexec/gpuvirt)
  /etc/systemd/system         the directory itself (the hugepages unit is written there), the
                              collection's units (gpuvirt-*, and the hugetlbfs .mount units it
                              wrote) and their links in multi-user.target.wants
  .capture/                   what programs of the host answered (captured from root / only),
                              stdout as printed, one file each: libvirtd-version.txt
                              (libvirtd --version), qemu-version.txt (qemu-system-x86_64 or
                              /usr/libexec/qemu-kvm --version), systemctl-show-nvidia.txt
                              (systemctl show -p Id,LoadState,UnitFileState,ActiveState of the
                              NVIDIA services); plugins/module_utils/host/captured_programs.py reads them
Symlinks are kept as links, relative inside the capture; links are never followed while
walking, so sysfs loops cannot recurse. Every read stays in the tree and every write in the
output: a link is resolved as the host whose root the tree is resolves it (an absolute target
from the tree's root, '..' stopping there), so a mounted image of a host reads as that host and
nothing of the capturing machine is read; a link that loops is left out. Unreadable files are
skipped.
OUT_DIR is new or empty, in an existing directory; OUT.tar(.gz) is in an existing directory (a
file there is replaced). A bad argument (a --root that is no host's tree, an output that is a
file, a tarball in a missing directory, ...) is one line on stderr and exit 2, nothing written.
Standard library only, and Python 3.6 syntax, so it runs with any python3 on the host being
captured. The playbook gpuvirt.tenancy.capture runs it on every host and fetches the captures.
"""
import argparse
import datetime
import os
import posixpath
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import List, Optional

PCI_ATTRS = (
    "vendor", "device", "class", "revision", "subsystem_vendor", "subsystem_device",
    "numa_node", "local_cpulist", "driver_override", "enable",
    "sriov_totalvfs", "sriov_numvfs", "sriov_offset", "sriov_stride", "sriov_vf_device",
    "sriov_drivers_autoprobe", "current_link_speed", "current_link_width",
    "max_link_speed", "max_link_width", "resource",
)
PCI_LINKS = ("driver", "iommu_group", "physfn")
PCI_NAME_DIRS = ("net", "infiniband")
NET_ATTRS = ("address", "operstate", "mtu", "type", "carrier", "ifindex", "flags")
PROC_FILES = (
    "/proc/cmdline", "/proc/meminfo", "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/osrelease", "/proc/mounts", "/proc/self/mountinfo", "/proc/swaps",
    "/proc/net/route", "/proc/net/if_inet6", "/proc/net/ipv6_route",
)
# Files the collection reads and edits (paths, or directories whose files are all taken).
EDITED_FILES = (
    "/etc/default/grub", "/etc/os-release", "/usr/lib/os-release", "/etc/initramfs-tools/modules",
    "/etc/udev/rules.d/61-gpuvirt-vfio.rules",
)
EDITED_DIRS = (
    "/etc/modprobe.d", "/etc/modules-load.d", "/etc/dracut.conf.d", "/etc/libvirt/qemu",
    "/run/libvirt/qemu", "/etc/gpuvirt", "/etc/default/grub.d", "/usr/local/libexec/gpuvirt",
)
# The collection's own systemd units (hugepages, SR-IOV, VFIO), by name prefix, and the ones it
# names otherwise (the hugetlbfs .mount units), by their first line.
UNIT_DIR, UNIT_PREFIX = "/etc/systemd/system", "gpuvirt-"
UNIT_HEADER = b"# Written by gpuvirt.tenancy"
WANTS_DIR = UNIT_DIR + "/multi-user.target.wants"
# Programs' answers (file under .capture -> the argv candidates, first found runs), as
# plugins/module_utils/host/captured_programs.py reads them.
OUTPUT_DIR = ".capture"
NVIDIA_UNITS = ("nvidia-persistenced.service", "nvidia-fabricmanager.service", "nvidia-dcgm.service", "dcgm.service")
PROGRAMS = (
    ("libvirtd-version.txt", (["libvirtd", "--version"],)),
    ("qemu-version.txt", (["qemu-system-x86_64", "--version"], ["/usr/libexec/qemu-kvm", "--version"])),
    ("systemctl-show-nvidia.txt", (["systemctl", "show", "-p", "Id,LoadState,UnitFileState,ActiveState"] + list(NVIDIA_UNITS),)),
)
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_FILE = 256 * 1024


class CaptureError(Exception):
    """A bad argument or an output that cannot be written: one line for stderr, a non-zero exit."""


class Capture:
    """Copies host paths of the tree under ``src_root`` into ``out``. Every read stays in the
    tree and every write in ``out``: a symlink in the tree is resolved as on the host whose root
    the tree is (an absolute target from the tree's root, '..' stopping at it: a mounted image of
    a host reads as that host), never through this machine's own files, and is recreated in the
    capture relative to it, pointing inside it."""

    def __init__(self, src_root: str, out: str):
        self.src = os.path.abspath(src_root)
        self.out = os.path.abspath(out)
        self.real_out = os.path.realpath(self.out)
        self.files = 0
        self.links = 0
        self.skipped = []  # host paths
        self.done = set()  # PCI device directories copied
        self._dirs = {}  # host directory path -> its resolved host path (None: a link loop)

    # --------------------------------------------------------- paths
    def host(self, path: str) -> str:
        """The real path of a host path under the tree; ``path`` must be resolved
        (:meth:`resolve`): every component but the last one no link, no '..'."""
        return os.path.join(self.src, path.lstrip("/"))

    def dest(self, path: str) -> str:
        """The path in the capture of a host path ('..' stops at the capture's root)."""
        return os.path.join(self.out, posixpath.normpath("/" + path).lstrip("/"))

    def _walk(self, start: str, parts: List[str], follow: bool) -> Optional[str]:
        """``parts`` resolved from the resolved host path ``start``: each symlink followed as the
        host resolves it, its absolute target from the tree's root, '..' stopping at the root; the
        last component followed only with ``follow``. None on a link loop (more than 40 links,
        the kernel's bound)."""
        done = [p for p in start.split("/") if p]
        todo = list(reversed(parts))
        links = 0
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if done:
                    done.pop()
                continue
            real = os.path.join(self.src, *(done + [name]))
            if (todo or follow) and os.path.islink(real):
                links += 1
                if links > 40:
                    return None
                try:
                    target = os.readlink(real)
                except OSError:
                    return None
                if target.startswith("/"):
                    done = []
                todo.extend(reversed(target.split("/")))
                continue
            done.append(name)
        return "/" + "/".join(done)

    def resolve(self, path: str, follow: bool = True) -> Optional[str]:
        """The host path ``path`` with its links resolved inside the tree (:meth:`_walk`); its
        last component is followed only with ``follow``. None on a link loop."""
        parent, _sep, name = path.rstrip("/").rpartition("/")
        if parent not in self._dirs:
            self._dirs[parent] = self._walk("/", parent.split("/"), True)
        base = self._dirs[parent]
        if base is None:
            return None
        return self._walk(base, [name], follow) if name else base

    def source(self, path: str, follow: bool = True) -> Optional[str]:
        """The real path to read for a host path, inside the tree; None on a link loop."""
        resolved = self.resolve(path, follow)
        return None if resolved is None else self.host(resolved)

    def writable(self, dst: str) -> str:
        """``dst`` (a path in the capture) with its directory made, once its deepest existing
        directory is checked to be in the capture (a link there that leads out, which this tool
        never makes, is refused before anything is made through it)."""
        existing = os.path.dirname(dst)
        while not os.path.lexists(existing):
            existing = os.path.dirname(existing)
        real = os.path.realpath(existing)
        in_out = existing == self.out or existing.startswith(self.out + os.sep)  # else the capture is not made yet
        if in_out and real != self.real_out and not real.startswith(self.real_out + os.sep):
            raise CaptureError(f"{dst} leads out of the capture {self.out} (to {real}); nothing more was written")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        return dst

    # --------------------------------------------------------- primitives
    def copy_file(self, path: str, first_block_only: bool = False) -> bool:
        """Copy one regular file's content; False when it is not a readable file."""
        src = self.source(path, follow=False)
        if src is None or os.path.islink(src) or not os.path.isfile(src):
            return False
        try:
            with open(src, "rb") as handle:
                data = handle.read(MAX_FILE)
        except OSError:
            self.skipped.append(path)
            return False
        if first_block_only:
            data = data.split(b"\n\n", 1)[0] + b"\n"
        with open(self.writable(self.dest(path)), "wb") as handle:
            handle.write(data)
        self.files += 1
        return True

    def copy_link(self, path: str) -> Optional[str]:
        """Recreate a symlink, its target made relative inside the capture; returns the host path
        it leads to (resolved inside the tree), or None (not a link, or a link loop)."""
        src = self.source(path, follow=False)
        if src is None or not os.path.islink(src):
            return None
        at = self.resolve(path, follow=False)
        text = os.readlink(src)
        named = self._walk("/" if text.startswith("/") else posixpath.dirname(at), text.split("/"), False)
        resolved = self.resolve(path)
        if named is None or resolved is None:
            self.skipped.append(path + " (a link loop)")
            return None
        dst = self.writable(self.dest(at))
        if not os.path.lexists(dst):
            os.symlink(text if self.stays_as_written(at, text, named) else os.path.relpath(self.dest(named), os.path.dirname(dst)), dst)
            self.links += 1
        return resolved

    @staticmethod
    def stays_as_written(at: str, text: str, named: str) -> bool:
        """Whether the relative link ``text`` at host path ``at`` leads, read as written, where it
        leads on the host (``named``): it climbs no higher than the root and passes no link. Such
        a link is copied as it is (``device -> ../../../virtio2`` keeps its last name); another
        is written relative inside the capture to where it leads."""
        if text.startswith("/"):
            return False
        depth = len([p for p in posixpath.dirname(at).split("/") if p])
        for part in text.split("/"):
            depth += -1 if part == ".." else 0 if part in ("", ".") else 1
            if depth < 0:
                return False
        return posixpath.normpath(posixpath.join(posixpath.dirname(at), text)) == named

    def make_dir(self, path: str) -> None:
        os.makedirs(self.writable(self.dest(path)), exist_ok=True)

    def listdir(self, path: str) -> List[str]:
        src = self.source(path)
        try:
            return sorted(os.listdir(src)) if src is not None else []
        except OSError:
            return []

    # --------------------------------------------------------- areas
    def pci_device(self, path: str) -> None:
        """path: a real device directory, /sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0."""
        if path in self.done:
            return
        self.done.add(path)
        self.make_dir(path)
        for name in PCI_ATTRS:
            self.copy_file(f"{path}/{name}")
        if os.path.exists(self.dest(f"{path}/sriov_totalvfs")) and not os.path.exists(self.dest(f"{path}/sriov_offset")):
            # an SR-IOV PF whose kernel has no sriov_offset/sriov_stride: the host model reads its VF
            # offset and stride from the SR-IOV capability in its config space (vocabulary/pci_config.py)
            self.copy_file(f"{path}/config")
        for name in self.listdir(path):
            if name in PCI_LINKS or name.startswith("virtfn"):
                self.copy_link(f"{path}/{name}")
            elif name in PCI_NAME_DIRS:
                self.make_dir(f"{path}/{name}")
                for entry in self.listdir(f"{path}/{name}"):
                    self.make_dir(f"{path}/{name}/{entry}")
                    if name == "infiniband":
                        # a port's mode where no netdev says it (IPoIB not loaded): connectx/port_modes.py
                        for port in self.listdir(f"{path}/{name}/{entry}/ports"):
                            self.copy_file(f"{path}/{name}/{entry}/ports/{port}/link_layer")

    def pci(self) -> None:
        base = "/sys/bus/pci/devices"
        self.make_dir(base)
        for name in self.listdir(base):
            target = self.copy_link(f"{base}/{name}")
            if target:
                self.pci_device(target)

    def numa(self) -> None:
        base = "/sys/devices/system/node"
        for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
            self.copy_file(f"{base}/{name}")
        for node in self.listdir(base):
            if not (node.startswith("node") and node[4:].isdigit()):
                continue
            for name in ("cpulist", "meminfo", "distance"):
                self.copy_file(f"{base}/{node}/{name}")
            for size in self.listdir(f"{base}/{node}/hugepages"):
                for name in ("nr_hugepages", "free_hugepages", "surplus_hugepages"):
                    self.copy_file(f"{base}/{node}/hugepages/{size}/{name}")

    def cpus(self) -> None:
        base = "/sys/devices/system/cpu"
        for name in ("online", "possible", "present"):
            self.copy_file(f"{base}/{name}")
        for cpu in self.listdir(base):
            if not (cpu.startswith("cpu") and cpu[3:].isdigit()):
                continue
            self.make_dir(f"{base}/{cpu}")
            self.copy_file(f"{base}/{cpu}/online")
            for name in ("core_id", "physical_package_id", "die_id", "thread_siblings_list", "core_siblings_list"):
                self.copy_file(f"{base}/{cpu}/topology/{name}")

    def iommu(self) -> None:
        base = "/sys/kernel/iommu_groups"
        self.make_dir(base)
        for group in self.listdir(base):
            self.make_dir(f"{base}/{group}/devices")
            self.copy_file(f"{base}/{group}/type")
            for dev in self.listdir(f"{base}/{group}/devices"):
                self.copy_link(f"{base}/{group}/devices/{dev}")
        for table in ("DMAR", "IVRS"):
            self.copy_file(f"/sys/firmware/acpi/tables/{table}")
        # the boot loader that started this boot (systemd's Boot Loader Interface): a host booted by
        # systemd-boot does not read the GRUB file
        self.copy_file("/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f")
        self.make_dir("/sys/class/iommu")
        for unit in self.listdir("/sys/class/iommu"):
            target = self.copy_link(f"/sys/class/iommu/{unit}")
            if target and os.path.isdir(self.host(target)):
                self.make_dir(target)

    def net(self) -> None:
        base = "/sys/class/net"
        self.make_dir(base)
        for name in self.listdir(base):
            real = self.copy_link(f"{base}/{name}")
            if not real or not os.path.isdir(self.host(real)):
                continue
            self.make_dir(real)
            for attr in NET_ATTRS:
                self.copy_file(f"{real}/{attr}")
            self.copy_link(f"{real}/device")

    def proc(self) -> None:
        for path in PROC_FILES:
            self.copy_file(path)
        self.copy_file("/proc/cpuinfo", first_block_only=True)
        # the hypervisor of a VM (its cpuinfo flags say hypervisor): the host model names it
        self.copy_file("/sys/class/dmi/id/sys_vendor")

    def hugepage_sizes(self) -> None:
        base = "/sys/kernel/mm/hugepages"
        if os.path.isdir(self.source(base) or ""):
            self.make_dir(base)
        for size in self.listdir(base):
            for name in ("nr_hugepages", "free_hugepages", "surplus_hugepages"):
                self.copy_file(f"{base}/{size}/{name}")

    def edited(self) -> None:
        """The host's files the collection edits, so the preview diffs against them."""
        for path in EDITED_FILES:
            self.copy_file(path)
        for base in EDITED_DIRS:
            for name in self.listdir(base):
                if not self.copy_file(f"{base}/{name}"):
                    self.copy_link(f"{base}/{name}")
        if os.path.isdir(self.source(UNIT_DIR) or ""):
            self.make_dir(UNIT_DIR)
        units = []
        for name in self.listdir(UNIT_DIR):
            if name.startswith(UNIT_PREFIX) or self.written_by_collection(f"{UNIT_DIR}/{name}"):
                if self.copy_file(f"{UNIT_DIR}/{name}"):
                    units.append(name)
        for name in units:
            self.copy_link(f"{WANTS_DIR}/{name}")

    def written_by_collection(self, path: str) -> bool:
        src = self.source(path, follow=False)
        if src is None or os.path.islink(src) or not os.path.isfile(src):
            return False
        try:
            with open(src, "rb") as handle:
                return handle.read(len(UNIT_HEADER)) == UNIT_HEADER
        except OSError:
            return False

    def programs(self) -> None:
        """What the host's programs answer (only when capturing the running host: another
        root's programs cannot be run); a missing program leaves no file."""
        if self.src != "/":
            return
        for name, candidates in PROGRAMS:
            for argv in candidates:
                program = shutil.which(argv[0], path=os.environ.get("PATH", "") + ":" + SEARCH_PATH)
                if not program:
                    continue
                try:
                    done = subprocess.run([program] + argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          universal_newlines=True, timeout=30, check=False,
                                          env=dict(os.environ, LC_ALL="C", LANG="C"))
                except (OSError, subprocess.SubprocessError):
                    self.skipped.append(" ".join(argv))
                    break
                if done.returncode == 0 or (argv[0] == "systemctl" and done.stdout.strip()):
                    with open(self.writable(os.path.join(self.out, OUTPUT_DIR, name)), "w", encoding="utf-8") as handle:
                        handle.write(done.stdout)
                    self.files += 1
                else:
                    self.skipped.append(" ".join(argv))
                break

    def kernel_modules(self) -> None:
        """The modules loaded now (/sys/module/<name>, directories only) and those built into the
        running kernel (/lib/modules/<release>/modules.builtin): whether the boot stage's early
        driver is there already."""
        for name in self.listdir("/sys/module"):
            self.make_dir(f"/sys/module/{name}")
        src = self.source("/proc/sys/kernel/osrelease")
        try:
            with open(src or "", "rb") as handle:
                release = handle.read(256).decode("utf-8", "replace").strip()
        except OSError:
            return
        if release and "/" not in release and release not in (".", ".."):
            self.copy_file(f"/lib/modules/{release}/modules.builtin")

    def run(self) -> None:
        self.pci()
        self.numa()
        self.cpus()
        self.hugepage_sizes()
        self.iommu()
        self.net()
        self.proc()
        self.kernel_modules()
        self.edited()
        self.programs()


def size_of(tree: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(tree):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total


TAR_ENDINGS = (".tar", ".tar.gz", ".tgz")
USAGE = "capture_host.py [--root DIR] [--note TEXT] OUT_DIR | OUT.tar | OUT.tar.gz"


class Parser(argparse.ArgumentParser):
    """argparse, its errors one line (a CaptureError) instead of the usage and a line."""

    def error(self, message):
        raise CaptureError(f"{message} (usage: {USAGE})")


def check_root(root: str) -> None:
    """The tree to capture: a directory holding /sys, /proc or /etc (as the host resolves them)."""
    if not os.path.isdir(root):
        what = "does not exist" if not os.path.lexists(root) else "is not a directory"
        raise CaptureError(f"--root {root} {what}: give the root of the host's tree (default /, or a mounted image of the host)")
    probe = Capture(root, os.devnull)
    if not any(os.path.isdir(probe.source(path) or "") for path in ("/sys", "/proc", "/etc")):
        raise CaptureError(f"--root {root} holds no /sys, /proc or /etc: it is not the root of a host; give the host's / "
                           "or a mounted image of it")


def check_output(out: str) -> bool:
    """Whether ``out`` is a tarball (by its ending) the capture can go to, or a new or empty
    directory in an existing one; nothing is made here."""
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise CaptureError(f"the directory of {out} ({parent}) does not exist or is not a directory: make it first, "
                           "or give an output in an existing directory")
    if out.endswith(TAR_ENDINGS):
        if os.path.isdir(out):
            raise CaptureError(f"{out} is a directory: give a file name for the tarball (an existing file is replaced)")
        writable = out if os.path.exists(out) else parent
    else:
        if os.path.lexists(out) and not os.path.isdir(out):
            raise CaptureError(f"{out} exists and is not a directory: give a new directory, or a name ending in "
                               ".tar or .tar.gz for a tarball")
        if os.path.isdir(out) and os.listdir(out):
            raise CaptureError(f"{out} exists and is not empty: give a new directory")
        writable = out if os.path.isdir(out) else parent
    if not os.access(writable, os.W_OK):
        raise CaptureError(f"{writable} is not writable by this user: give an output where it can write, or run as its owner")
    return out.endswith(TAR_ENDINGS)


def write_capture(args: argparse.Namespace, work: str) -> Capture:
    cap = Capture(args.root, work)
    cap.run()
    osrelease = (open(cap.dest("/proc/sys/kernel/osrelease"), encoding="utf-8").read().strip()
                 if os.path.isfile(cap.dest("/proc/sys/kernel/osrelease")) else "unknown")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(cap.writable(os.path.join(work, ".source.txt")), "w", encoding="utf-8") as handle:
        handle.write(
            f"Captured {stamp} by playbooks/files/capture_host.py from root {args.root} (kernel {osrelease}).\n"
            + (f"{args.note}\n" if args.note else "")
            + "A subset of /sys and /proc and the files the collection edits (see the tool's docstring),\n"
            "symlinks kept relative to this directory, /proc/cpuinfo trimmed to its first CPU block.\n"
            f"{cap.files} files, {cap.links} links; unreadable and skipped: {len(cap.skipped)}"
            + (f" ({', '.join(cap.skipped[:20])})" if cap.skipped else "") + ".\n"
        )
    return cap


def remove_written(directory: str, keep_dir: bool) -> None:
    """Remove what the capture wrote into ``directory`` (new, or empty before), and the directory
    itself unless it was there before."""
    if not keep_dir:
        shutil.rmtree(directory, ignore_errors=True)
        return
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


def capture(argv: Optional[List[str]]) -> int:
    parser = Parser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("out", help="output directory (new or empty), or a .tar / .tar.gz file")
    parser.add_argument("--root", default="/", help="root of the tree to capture (default /)")
    parser.add_argument("--note", default="", help="a line added to .source.txt (what the host is)")
    args = parser.parse_args(argv)
    check_root(args.root)
    as_tar = check_output(args.out)
    existed = os.path.exists(args.out)
    work = tempfile.mkdtemp(prefix="capture-host.") if as_tar else args.out
    try:
        if not as_tar and not existed:
            os.mkdir(work)
        cap = write_capture(args, work)
        if as_tar:
            mode = "w:gz" if args.out.endswith(("gz", "tgz")) else "w"
            with tarfile.open(args.out, mode) as tar:
                tar.add(work, arcname=".")
    except (OSError, CaptureError) as exc:
        if as_tar and not existed and os.path.isfile(args.out):
            os.unlink(args.out)
        elif not as_tar and os.path.isdir(work):
            remove_written(work, keep_dir=existed)
        detail = exc if isinstance(exc, CaptureError) else f"{exc.strerror or exc} ({exc.filename or args.out})"
        left = "the tarball there was replaced and may be incomplete" if as_tar and existed else "what it had written is removed"
        raise CaptureError(f"cannot write the capture {args.out}: {detail}; {left}") from None
    finally:
        if as_tar:
            shutil.rmtree(work, ignore_errors=True)
    size = os.path.getsize(args.out) if as_tar else size_of(work)
    print(f"capture_host: {cap.files} files, {cap.links} links, {size} bytes -> {args.out}", file=sys.stderr)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """The tool: 0 and one line on stderr when the capture is written; 2 and one line naming the
    argument or the output and the fix otherwise, with nothing written."""
    try:
        return capture(argv)
    except CaptureError as exc:
        print(f"capture_host: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
