#!/usr/bin/env python
"""Capture what the collection reads on a host (its sysfs/procfs subset and the files it
edits), as a small tree that every module reads like the host itself with ``root`` set to it:
the input of the preview (docs/preview.md) and of the unit tests' fake roots.

usage: capture_host.py [--root /] [--note TEXT] OUT_DIR | OUT.tar | OUT.tar.gz

What is copied:
  /sys/bus/pci/devices/*      the links, and in each PCI device directory they point to
                              (/sys/devices/pci*/...): small attribute files (vendor,
                              device, class, numa_node, sriov_*, driver_override, ...),
                              the links driver, iommu_group, physfn, virtfn*, and the
                              names under net/ and infiniband/
  /sys/devices/system/node    node*/{cpulist,meminfo,distance}, hugepages counts
  /sys/devices/system/cpu     online/possible/present, cpu*/online, cpu*/topology ids
  /sys/kernel/iommu_groups    groups, their type and device links
  /sys/class/net/*            links, and each netdev's address/operstate/mtu/type/device
  /sys/class/iommu/*          links
  /sys/firmware/acpi/tables   DMAR / IVRS (the IOMMU's ACPI table), when present
  /sys/firmware/efi/efivars   LoaderInfo-<Boot Loader Interface GUID> (the boot loader), when present
  /sys/kernel/mm/hugepages    the page sizes the kernel offers, and their pools
  /proc                       cmdline, cpuinfo (first CPU only), meminfo, boot_id,
                              osrelease, mounts, self/mountinfo, swaps, net/route,
                              net/if_inet6, net/ipv6_route (the devices the host needs)
  files the collection edits  /etc/default/grub and its drop-ins /etc/default/grub.d/*.cfg,
                              /etc/os-release, /usr/lib/os-release,
                              /etc/modprobe.d, /etc/modules-load.d, /etc/initramfs-tools/modules,
                              /etc/dracut.conf.d, /etc/libvirt/qemu/*.xml (defined domains),
                              /run/libvirt/qemu/*.xml (running ones), /etc/gpuvirt, the
                              collection's udev rule
  /etc/systemd/system         the directory itself (the hugepages unit is written there), the
                              collection's units (gpuvirt-*, and the hugetlbfs .mount units it
                              wrote) and their links in multi-user.target.wants
  .capture/                   what programs of the host answered (captured from root / only),
                              stdout as printed, one file each: libvirtd-version.txt
                              (libvirtd --version), qemu-version.txt (qemu-system-x86_64 or
                              /usr/libexec/qemu-kvm --version), systemctl-show-nvidia.txt
                              (systemctl show -p Id,LoadState,UnitFileState,ActiveState of the
                              NVIDIA services); plugins/module_utils/host/captured_programs.py reads them
Symlinks are kept as links (made relative to the capture root); links are never
followed while walking, so sysfs loops cannot recurse. Unreadable files are skipped.
Standard library only, and Python 3.6 syntax, so it runs with any python3 on the host being
captured. The playbook gpuvirt.tenancy.capture runs it on every host and fetches the captures.
"""
import argparse
import datetime
import os
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
NET_ATTRS = ("address", "operstate", "mtu", "type", "carrier", "ifindex")
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
    "/run/libvirt/qemu", "/etc/gpuvirt", "/etc/default/grub.d",
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


class Capture:
    def __init__(self, src_root: str, out: str):
        self.src = os.path.abspath(src_root)
        self.out = os.path.abspath(out)
        self.files = 0
        self.links = 0
        self.skipped = []  # host paths
        self.done = set()  # PCI device directories copied

    def host(self, path: str) -> str:
        return os.path.join(self.src, path.lstrip("/"))

    def dest(self, path: str) -> str:
        return os.path.join(self.out, path.lstrip("/"))

    # --------------------------------------------------------- primitives
    def copy_file(self, path: str, first_block_only: bool = False) -> bool:
        """Copy one regular file's content; False when it is not a readable file."""
        src = self.host(path)
        if os.path.islink(src) or not os.path.isfile(src):
            return False
        try:
            with open(src, "rb") as handle:
                data = handle.read(MAX_FILE)
        except OSError:
            self.skipped.append(path)
            return False
        if first_block_only:
            data = data.split(b"\n\n", 1)[0] + b"\n"
        os.makedirs(os.path.dirname(self.dest(path)), exist_ok=True)
        with open(self.dest(path), "wb") as handle:
            handle.write(data)
        self.files += 1
        return True

    def copy_link(self, path: str) -> Optional[str]:
        """Recreate a symlink; returns its target as a host path (resolved), or None."""
        src = self.host(path)
        if not os.path.islink(src):
            return None
        target = os.readlink(src)
        if os.path.isabs(target):
            target = os.path.relpath(self.dest(target), os.path.dirname(self.dest(path)))
        dst = self.dest(path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.lexists(dst):
            os.symlink(target, dst)
            self.links += 1
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(src)))
        return resolved if resolved.startswith("/") else "/" + resolved

    def make_dir(self, path: str) -> None:
        os.makedirs(self.dest(path), exist_ok=True)

    def listdir(self, path: str) -> List[str]:
        try:
            return sorted(os.listdir(self.host(path)))
        except OSError:
            return []

    def real(self, path: str) -> str:
        """A host path with every link resolved (inside the source root)."""
        real = os.path.realpath(self.host(path))
        return "/" + os.path.relpath(real, self.src) if self.src != "/" else real

    # --------------------------------------------------------- areas
    def pci_device(self, path: str) -> None:
        """path: a real device directory, /sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0."""
        if path in self.done:
            return
        self.done.add(path)
        self.make_dir(path)
        for name in PCI_ATTRS:
            self.copy_file(f"{path}/{name}")
        for name in self.listdir(path):
            if name in PCI_LINKS or name.startswith("virtfn"):
                self.copy_link(f"{path}/{name}")
            elif name in PCI_NAME_DIRS:
                for entry in self.listdir(f"{path}/{name}"):
                    self.make_dir(f"{path}/{name}/{entry}")

    def pci(self) -> None:
        base = "/sys/bus/pci/devices"
        self.make_dir(base)
        for name in self.listdir(base):
            if self.copy_link(f"{base}/{name}"):
                self.pci_device(self.real(f"{base}/{name}"))

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
            if target:
                self.make_dir(target)

    def net(self) -> None:
        base = "/sys/class/net"
        self.make_dir(base)
        for name in self.listdir(base):
            if not self.copy_link(f"{base}/{name}"):
                continue
            real = self.real(f"{base}/{name}")
            self.make_dir(real)
            for attr in NET_ATTRS:
                self.copy_file(f"{real}/{attr}")
            self.copy_link(f"{real}/device")

    def proc(self) -> None:
        for path in PROC_FILES:
            self.copy_file(path)
        self.copy_file("/proc/cpuinfo", first_block_only=True)

    def hugepage_sizes(self) -> None:
        base = "/sys/kernel/mm/hugepages"
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
        if os.path.isdir(self.host(UNIT_DIR)):
            self.make_dir(UNIT_DIR)
        units = []
        for name in self.listdir(UNIT_DIR):
            if name.startswith(UNIT_PREFIX) or self.written_by_collection(f"{UNIT_DIR}/{name}"):
                if self.copy_file(f"{UNIT_DIR}/{name}"):
                    units.append(name)
        for name in units:
            self.copy_link(f"{WANTS_DIR}/{name}")

    def written_by_collection(self, path: str) -> bool:
        src = self.host(path)
        if os.path.islink(src) or not os.path.isfile(src):
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
                    path = os.path.join(self.out, OUTPUT_DIR, name)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "w", encoding="utf-8") as handle:
                        handle.write(done.stdout)
                    self.files += 1
                else:
                    self.skipped.append(" ".join(argv))
                break

    def run(self) -> None:
        self.pci()
        self.numa()
        self.cpus()
        self.hugepage_sizes()
        self.iommu()
        self.net()
        self.proc()
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


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("out", help="output directory, or a .tar / .tar.gz file")
    parser.add_argument("--root", default="/", help="root of the tree to capture (default /)")
    parser.add_argument("--note", default="", help="a line added to .source.txt (what the host is)")
    args = parser.parse_args(argv)

    as_tar = args.out.endswith((".tar", ".tar.gz", ".tgz"))
    work = tempfile.mkdtemp(prefix="capture-host.") if as_tar else args.out
    if not as_tar:
        if os.path.exists(work) and os.listdir(work):
            print(f"capture_host: {work} exists and is not empty: give a new directory", file=sys.stderr)
            return 2
        os.makedirs(work, exist_ok=True)
    cap = Capture(args.root, work)
    cap.run()
    osrelease = (open(cap.dest("/proc/sys/kernel/osrelease"), encoding="utf-8").read().strip()
                 if os.path.exists(cap.dest("/proc/sys/kernel/osrelease")) else "unknown")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(os.path.join(work, ".source.txt"), "w", encoding="utf-8") as handle:
        handle.write(
            f"Captured {stamp} by tools/capture_host.py from root {args.root} (kernel {osrelease}).\n"
            + (f"{args.note}\n" if args.note else "")
            + "A subset of /sys and /proc and the files the collection edits (see the tool's docstring),\n"
            "symlinks kept relative to this directory, /proc/cpuinfo trimmed to its first CPU block.\n"
            f"{cap.files} files, {cap.links} links; unreadable and skipped: {len(cap.skipped)}"
            + (f" ({', '.join(cap.skipped[:20])})" if cap.skipped else "") + ".\n"
        )
    if as_tar:
        mode = "w:gz" if args.out.endswith(("gz", "tgz")) else "w"
        with tarfile.open(args.out, mode) as tar:
            tar.add(work, arcname=".")
        shutil.rmtree(work)
    size = os.path.getsize(args.out) if as_tar else size_of(work)
    print(f"capture_host: {cap.files} files, {cap.links} links, {size} bytes -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
