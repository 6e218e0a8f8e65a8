#!/usr/bin/env python
"""The lab host: a QEMU VM with 2 NUMA nodes, an emulated Intel IOMMU and, on NUMA
node 1 behind two PCIe expanders, stand-ins for the hardware the collection manages:

  0000:81:00.0  PCIe switch upstream port (x3130), downstream ports 0000:82:00.0 (xio3130)
                and 0000:82:01.0 (QEMU's generic port, with ACS)
  0000:83:00.0  QEMU "edu" device (1234:11e8, no host driver)       GPU 0, under the switch
  0000:84:00.0  Intel 82576 igb with SR-IOV (8086:10c9, VFs 10ca)   the NIC PF, under the switch;
                                                                    soft-RoCE (rdma_rxe) on its netdev
  0000:c1:00.0  ivshmem-plain (1af4:1110), 2 GiB 64-bit BAR2        GPU 1 (large BAR), own host bridge

plus a management e1000e (SSH forwarded to 127.0.0.1) and a virtio disk on pcie.0.
The devices need QEMU 10.0 (Debian bookworm-backports: lab/install-qemu.sh).

Commands: build, start, wait, up (build + start + wait), stop, status, ssh, console.
State lives in GPUVIRT_LAB_DIR (default: <repo>/.lab):
  images/<recipe-hash>/   cached base image (disk.qcow2) and its SSH key
  run/                    the running lab: qemu.pid, ssh_port, id_ed25519, console.log, qemu.version,
                          disk.qcow2 (a throw-away overlay on the base image), accel, ssh_config

Standard library only.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECIPE = ("build-image.sh", "packages.txt", "image-lib.sh")
QEMU = os.environ.get("GPUVIRT_LAB_QEMU", "qemu-system-x86_64")
DEFAULT_WAIT = int(os.environ.get("GPUVIRT_LAB_WAIT_TIMEOUT", "900"))
# QEMU devices of the lab that Debian 12's QEMU 7.2 lacks (lab/install-qemu.sh installs 10.0).
LAB_DEVICES = ("igb", "x3130-upstream", "xio3130-downstream", "ivshmem-plain")
# The large-BAR GPU stand-in's BAR2 (and memory backend) size.
IVSHMEM_SIZE = os.environ.get("GPUVIRT_LAB_BAR_SIZE", "2G")


class LabError(Exception):
    """An error with a message for the user."""


def log(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def lab_dir() -> str:
    return os.path.abspath(os.environ.get("GPUVIRT_LAB_DIR") or os.path.join(REPO, ".lab"))


def run_dir() -> str:
    return os.path.join(lab_dir(), "run")


def rpath(name: str) -> str:
    return os.path.join(run_dir(), name)


def recipe_hash(recipe: tuple[str, ...] = RECIPE) -> str:
    """The hash of an image's recipe: the files under lab/ that build it."""
    digest = hashlib.sha256()
    for name in recipe:
        with open(os.path.join(HERE, name), "rb") as handle:
            digest.update(name.encode() + b"\0" + handle.read() + b"\0")
    return digest.hexdigest()[:16]


def image_dir() -> str:
    return os.path.join(lab_dir(), "images", recipe_hash())


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def write_text(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def need_tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if not found:
        raise LabError(f"'{name}' not found: install the Debian package {package} (or run scripts/bootstrap.sh)")
    return found


def file_in_use(path: str) -> bool:
    """Whether any process has the file open (a lab's QEMU holds its backing image)."""
    real = os.path.realpath(path)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == real:
                    return True
            except OSError:
                continue
    return False


@contextlib.contextmanager
def locked(name: str, directory: str | None = None):
    """Serialize builds and starts between concurrent callers sharing one lab dir (or ``directory``)."""
    directory = directory or lab_dir()
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f".{name}.lock"), "w", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another {name} in {directory}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


# ---------------------------------------------------------------- build

def cmd_build(args: argparse.Namespace) -> int:
    with locked("build"):
        return _build(args)


def _build(args: argparse.Namespace) -> int:
    out = image_dir()
    disk = os.path.join(out, "disk.qcow2")
    if os.path.exists(disk) and not args.force:
        log(f"image up to date: {disk} (recipe {recipe_hash()})")
        return 0
    if os.geteuid() != 0:
        raise LabError("building the image needs root (debootstrap, loop devices, mount): run this as root, e.g. sudo scripts/lab.sh build")
    os.makedirs(out, exist_ok=True)
    started = time.monotonic()
    log(f"building the lab image (recipe {recipe_hash()}) into {out}; this takes several minutes")
    proc = subprocess.run(["bash", os.path.join(HERE, "build-image.sh"), out], check=False)
    if proc.returncode != 0:
        raise LabError(f"image build failed (exit {proc.returncode}); full log: {os.path.join(out, 'build.log')}")
    write_text(os.path.join(out, "recipe.sha256"), recipe_hash() + "\n")
    # Only the image of the current recipe is kept, and any a running QEMU still reads.
    images = os.path.dirname(out)
    for name in os.listdir(images):
        old = os.path.join(images, name)
        if old != out and os.path.isdir(old) and not file_in_use(os.path.join(old, "disk.qcow2")):
            shutil.rmtree(old, ignore_errors=True)
    log(f"image built in {time.monotonic() - started:.0f} s: {disk}")
    return 0


# ---------------------------------------------------------------- process state

def qemu_pid() -> int | None:
    """The running lab's QEMU pid, or None (a stale pidfile is removed)."""
    text = read_text(rpath("qemu.pid"))
    if not text:
        return None
    try:
        pid = int(text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        os.unlink(rpath("qemu.pid"))
        return None
    except PermissionError:
        return pid
    cmdline = read_text(f"/proc/{pid}/cmdline") or ""
    if "gpuvirt-lab" not in cmdline:
        os.unlink(rpath("qemu.pid"))
        return None
    return pid


def qemu_version() -> str:
    """QEMU's version line, e.g. "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)"."""
    proc = subprocess.run([QEMU, "--version"], capture_output=True, text=True, check=False)
    return (proc.stdout.splitlines() or ["unknown"])[0].strip()


def need_devices() -> None:
    """The lab's command line needs devices QEMU 7.2 lacks (bookworm-backports' 10.0 has them)."""
    proc = subprocess.run([QEMU, "-device", "help"], capture_output=True, text=True, check=False)
    missing = [dev for dev in LAB_DEVICES if f'name "{dev}"' not in proc.stdout]
    if missing:
        raise LabError(f"{QEMU} ({qemu_version()}) lacks the devices {', '.join(missing)}: "
                       "install the lab's QEMU with lab/install-qemu.sh (root; bookworm-backports)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kill_pid(pid: int, grace: float = 15.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- QEMU command line

def accel_option(accel: str, tcg_threads: str = "single") -> str:
    """QEMU's -accel value. TCG runs in one thread for all vCPUs by default: with a thread per
    vCPU ("multi"), a halted vCPU of the lab kernel sometimes never got its timer interrupt (an
    RCU stall, docs/lab.md "known flake"); on the 2-core machines the lab runs on, one thread
    boots and answers a ping as fast. "multi" is what the bring-up benchmark runs (docs/benchmarks.md):
    there the two stand-in guests' calls on the lab host run side by side, as two guests would."""
    return accel if accel == "kvm" else f"tcg,thread={tcg_threads}"


def qemu_argv(accel: str, disk: str, port: int, console: str, snapshot: bool = False,
              tcg_threads: str = "single") -> list[str]:
    # The lab emulates an Intel IOMMU, so its CPU says Intel too (TCG's "max" CPU would
    # otherwise report the vendor QEMU picks, and the host model reads cpu_vendor).
    # 5-level paging (la57) only slows TCG's page walks down.
    cpu = "host" if accel == "kvm" else "max,vendor=GenuineIntel,la57=off"
    argv = [
        QEMU, "-name", "gpuvirt-lab", "-nodefaults", "-no-user-config",
        "-accel", accel_option(accel, tcg_threads), "-machine", "q35,kernel-irqchip=split", "-cpu", cpu,
        "-m", "4096", "-smp", "8",
        "-object", "memory-backend-ram,id=m0,size=2048M",
        "-object", "memory-backend-ram,id=m1,size=2048M",
        "-numa", "node,nodeid=0,cpus=0-3,memdev=m0",
        "-numa", "node,nodeid=1,cpus=4-7,memdev=m1",
        "-device", "intel-iommu,intremap=on,caching-mode=on",
        # NUMA node 1, host bridge 1: a PCIe expander (bus 0x80) with one root port holding a
        # PCIe switch (upstream port 81:00.0, downstream ports 82:00.0 and 82:01.0): the GPU
        # stand-in and the SR-IOV NIC under one switch, as a GPU and its ConnectX are (PIX).
        # QEMU's xio3130 downstream port has no ACS capability, so the kernel puts everything
        # below one in a single IOMMU group: the igb PF and all its VFs would share one (tried:
        # docs/lab.md). The NIC's downstream port is therefore QEMU's generic PCIe port (the
        # pcie-root-port device, which has ACS) under the same upstream port: each VF gets its
        # own group, and the bridge chain, which is what the host model reads, is the switch's.
        "-device", "pxb-pcie,id=pxb1,bus_nr=0x80,numa_node=1,bus=pcie.0,addr=0x10",
        "-device", "pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1,addr=0x0",
        "-device", "x3130-upstream,id=sw1,bus=rp1",
        "-device", "xio3130-downstream,id=sw1p1,bus=sw1,chassis=11,slot=11,port=1,addr=0x0",
        "-device", "pcie-root-port,id=sw1p2,bus=sw1,chassis=12,slot=12,port=2,addr=0x1",
        "-device", "edu,bus=sw1p1",
        # Intel 82576 with SR-IOV (igb; VFs 8086:10ca take the guest's igbvf driver): the NIC
        # whose VFs tenants get, and the netdev soft-RoCE sits on.
        "-netdev", "user,id=n1,restrict=on,net=10.0.3.0/24",
        "-device", "igb,netdev=n1,bus=sw1p2,mac=52:54:00:00:84:00",
        # NUMA node 1, host bridge 2 (bus 0xc0): a second GPU stand-in with a large 64-bit
        # prefetchable BAR (ivshmem-plain, BAR2 as large as its memory backend; the memory
        # is allocated only where it is touched).
        "-device", "pxb-pcie,id=pxb2,bus_nr=0xc0,numa_node=1,bus=pcie.0,addr=0x11",
        "-device", "pcie-root-port,id=rp2,bus=pxb2,chassis=2,slot=2,addr=0x0",
        "-object", f"memory-backend-ram,id=bigbar,size={IVSHMEM_SIZE}",
        "-device", "ivshmem-plain,memdev=bigbar,bus=rp2",
        # pcie.0: management NIC (SSH) and the disk, at fixed slots.
        "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
        "-device", "e1000e,netdev=n0,bus=pcie.0,addr=0x5,mac=52:54:00:00:05:00",
        "-drive", f"if=none,id=d0,file={disk},format=qcow2,cache=unsafe,discard=unmap",
        "-device", "virtio-blk-pci,drive=d0,bus=pcie.0,addr=0x6",
        "-display", "none", "-vga", "none",
        "-chardev", f"file,id=ser0,path={console}", "-serial", "chardev:ser0",
        "-rtc", "base=utc",
    ]
    if snapshot:
        argv.append("-snapshot")
    return argv


# ---------------------------------------------------------------- accelerator

def kvm_probe(base: str) -> bool:
    """Boot the image briefly under KVM; True only if the kernel starts (its first
    console line appears) within the probe time. Cached per host boot."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    host_boot = read_text("/proc/sys/kernel/random/boot_id") or ""
    cache = os.path.join(lab_dir(), "kvm-probe.json")
    try:
        with open(cache, encoding="utf-8") as handle:
            cached = json.load(handle)
        if cached.get("host_boot_id") == host_boot and cached.get("image") == base:
            return bool(cached["kvm_works"])
    except (OSError, ValueError, KeyError):
        pass
    probe_time = float(os.environ.get("GPUVIRT_LAB_KVM_PROBE_S", "30"))
    console = os.path.join(lab_dir(), "kvm-probe.console.log")
    log(f"probing KVM with a {probe_time:.0f} s boot")
    argv = qemu_argv("kvm", base, free_port(), console, snapshot=True)
    works = False
    with open(os.path.join(lab_dir(), "kvm-probe.stderr"), "wb") as errors, \
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors) as proc:
        try:
            deadline = time.monotonic() + probe_time
            while time.monotonic() < deadline and proc.poll() is None:
                if "Linux version" in (read_text(console) or ""):
                    works = True
                    break
                time.sleep(0.5)
        finally:
            proc.kill()
    write_text(cache, json.dumps({"host_boot_id": host_boot, "image": base, "kvm_works": works}) + "\n")
    log(f"KVM {'works' if works else 'did not boot the kernel: using TCG'}")
    return works


def choose_accel(requested: str, base: str) -> str:
    if requested in ("tcg", "kvm"):
        return requested
    return "kvm" if kvm_probe(base) else "tcg"


# ---------------------------------------------------------------- start / stop

def cmd_start(args: argparse.Namespace) -> int:
    with locked("start"):
        return _start(args)


def _start(args: argparse.Namespace) -> int:
    need_tool(QEMU, "qemu-system-x86")
    need_tool("qemu-img", "qemu-utils")
    need_devices()
    pid = qemu_pid()
    if pid:
        log(f"already running (pid {pid}, ssh port {read_text(rpath('ssh_port'))})")
        return 0
    base = os.path.join(image_dir(), "disk.qcow2")
    if not os.path.exists(base):
        cmd_build(argparse.Namespace(force=False))
    os.makedirs(run_dir(), exist_ok=True)
    disk = rpath("disk.qcow2")
    if args.keep_disk and os.path.exists(disk):
        log(f"keeping the previous disk state {disk}")
    else:
        for name in ("disk.qcow2", "ssh_port", "accel", "console.log", "boot_ids"):
            if os.path.exists(rpath(name)):
                os.unlink(rpath(name))
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, disk], check=True)
    shutil.copyfile(os.path.join(image_dir(), "id_ed25519"), rpath("id_ed25519"))
    os.chmod(rpath("id_ed25519"), 0o600)
    accel = choose_accel(args.accel, base)
    console = rpath("console.log")
    last_error = ""
    for _attempt in range(3):
        port = free_port()
        argv = qemu_argv(accel, disk, port, console, tcg_threads=args.tcg_threads) + ["-pidfile", rpath("qemu.pid"), "-daemonize"]
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            break
        last_error = proc.stderr.strip()
        if "hostfwd" not in last_error and "Could not set up host forwarding" not in last_error:
            break
    else:
        proc = None
    if proc is None or proc.returncode != 0:
        raise LabError(f"QEMU did not start: {last_error}\ncommand: {' '.join(argv)}")
    write_text(rpath("ssh_port"), f"{port}\n")
    write_text(rpath("accel"), accel_option(accel, args.tcg_threads) + "\n")
    write_text(rpath("image"), base + "\n")
    write_text(rpath("qemu.cmdline"), " ".join(argv) + "\n")
    write_text(rpath("qemu.version"), qemu_version() + "\n")
    write_text(rpath("ssh_config"), (
        "Host gpuvirt-lab\n  HostName 127.0.0.1\n  User root\n"
        f"  Port {port}\n  IdentityFile {rpath('id_ed25519')}\n  IdentitiesOnly yes\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    ))
    log(f"started (pid {qemu_pid()}, {accel}, ssh 127.0.0.1:{port}, console {console})")
    return 0


def cmd_stop(_args: argparse.Namespace) -> int:
    pid = qemu_pid()
    if pid:
        kill_pid(pid)
        log(f"stopped (pid {pid})")
    else:
        log("not running")
    for name in ("qemu.pid", "ssh_port"):
        if os.path.exists(rpath(name)):
            os.unlink(rpath(name))
    return 0


# ---------------------------------------------------------------- ssh / wait

def ssh_argv(port: str | None = None, timeout: int = 10) -> list[str]:
    port = port or read_text(rpath("ssh_port"))
    if not port:
        raise LabError("the lab is not running: scripts/lab.sh start")
    return [
        need_tool("ssh", "openssh-client"), "-i", rpath("id_ed25519"), "-p", port,
        "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "LogLevel=ERROR", "-o", f"ConnectTimeout={timeout}", "-o", "BatchMode=yes",
        "root@127.0.0.1",
    ]


# What the lab kernel prints when it panics on a hung boot (its image's kernel args,
# lab/build-image.sh: panic_on_rcu_stall, hung_task_panic): a boot that the lab reset by
# itself, not a reboot of the collection's.
STALL_PANICS = ("Kernel panic - not syncing: RCU Stall", "Kernel panic - not syncing: hung_task: blocked tasks")


def console_boots() -> dict[str, int]:
    """Kernel starts on the serial console (kept across the guest's reboots), and how many of
    them followed a stall panic rather than a reboot someone asked for."""
    text = read_text(rpath("console.log")) or ""
    return {"kernel_starts": text.count("Linux version "),
            "stall_resets": sum(text.count(panic) for panic in STALL_PANICS)}


def console_tail(lines: int = 40) -> str:
    text = read_text(rpath("console.log")) or "(empty console log)"
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")
    return "\n".join(text.splitlines()[-lines:])


def cmd_wait(args: argparse.Namespace) -> int:
    started = time.monotonic()
    deadline = started + args.timeout
    argv = ssh_argv(timeout=10)
    while time.monotonic() < deadline:
        if not qemu_pid():
            raise LabError(f"QEMU exited while waiting for SSH; console log tail:\n{console_tail()}")
        proc = subprocess.run(argv + ["cat /proc/sys/kernel/random/boot_id"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, check=False, timeout=60)
        if proc.returncode == 0:
            log(f"SSH is up after {time.monotonic() - started:.0f} s (boot_id {proc.stdout.strip()})")
            return 0
        time.sleep(3)
    raise LabError(f"no SSH login within {args.timeout} s; console log tail ({rpath('console.log')}):\n{console_tail()}")


def cmd_up(args: argparse.Namespace) -> int:
    """build + start + wait; the lab is stopped again if any step fails or is interrupted."""
    started_here = False
    try:
        cmd_build(argparse.Namespace(force=False))
        started_here = qemu_pid() is None
        cmd_start(args)
        cmd_wait(args)
        started_here = False
        return 0
    finally:
        if started_here:
            log("start failed or interrupted: stopping the lab")
            cmd_stop(args)


def cmd_ssh(args: argparse.Namespace) -> int:
    argv = ssh_argv()
    argv += args.command
    os.execv(argv[0], argv)
    return 0  # not reached


def cmd_status(args: argparse.Namespace) -> int:
    pid = qemu_pid()
    base = os.path.join(image_dir(), "disk.qcow2")
    info = {
        "lab_dir": lab_dir(),
        "image": base if os.path.exists(base) else None,
        "recipe": recipe_hash(),
        "running": bool(pid),
        "pid": pid,
        "accel": read_text(rpath("accel")) if pid else None,
        "ssh_port": int(read_text(rpath("ssh_port")) or 0) or None if pid else None,
        "console_log": rpath("console.log"),
        "qemu_version": read_text(rpath("qemu.version")) if pid else None,
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
    return 0 if pid else 3


def cmd_console(args: argparse.Namespace) -> int:
    print(console_tail(args.lines))
    return 0


def _interrupted(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/lab.sh", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build", help="build the image if its recipe changed (root)")
    p.add_argument("--force", action="store_true", help="rebuild even if cached")
    p.set_defaults(func=cmd_build)
    for name, func, helptext in (("start", cmd_start, "boot the lab (fresh bare disk unless --keep-disk)"),
                                 ("up", cmd_up, "build + start + wait; stops the lab again on failure")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--accel", choices=("auto", "tcg", "kvm"), default=os.environ.get("GPUVIRT_LAB_ACCEL", "auto"),
                       help="auto: KVM only if a short probe boot works, else TCG")
        p.add_argument("--tcg-threads", choices=("single", "multi"), default=os.environ.get("GPUVIRT_LAB_TCG_THREADS", "single"),
                       help="TCG in one thread for all vCPUs (single, the default: docs/lab.md) or one per vCPU (multi)")
        p.add_argument("--keep-disk", action="store_true", help="reuse the previous run's disk instead of a fresh overlay")
        p.add_argument("--timeout", type=int, default=DEFAULT_WAIT, help="seconds to wait for SSH (up)")
        p.set_defaults(func=func)
    p = sub.add_parser("wait", help="wait until SSH answers (bounded)")
    p.add_argument("--timeout", type=int, default=DEFAULT_WAIT)
    p.set_defaults(func=cmd_wait)
    sub.add_parser("stop", help="stop the lab").set_defaults(func=cmd_stop)
    p = sub.add_parser("status", help="show the lab's state (exit 3 when not running)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("ssh", help="ssh into the lab as root")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_ssh)
    p = sub.add_parser("console", help="print the serial console log's tail")
    p.add_argument("--lines", type=int, default=40)
    p.set_defaults(func=cmd_console)
    args = parser.parse_args(argv)
    # An interrupt or a kill (Ctrl-C, a CI timeout, an Ansible task timing out) unwinds
    # through the cleanups, so "up" stops a lab it started; also when the caller ran us
    # in the background with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGHUP, _interrupted)
    try:
        return args.func(args)
    except LabError as err:
        log(f"error: {err}")
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
