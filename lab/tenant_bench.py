#!/usr/bin/env python
"""The tenant bench: the collection's tenants stage and guest stages run for real, with tenants
booted one level deep by this machine's own libvirt (docs/lab.md, "The tenant bench").

This machine is the GPU host in the roles' sense (inventories/bench: tenants without GPUs or VFs,
domain type qemu, UEFI, an overlay on a Debian 12 cloud image and a NoCloud seed each, the
management network the tenants stage defines, a data NIC each on a libvirt network). libvirtd and
virtlogd run inside the network namespace gpuvirt-bench, which has no uplink: every bridge, tap
and guest address lives there, and ansible-playbook runs there too (`ip netns exec`).

  up       build the tenant image (cached by its recipe), make the namespace, start the daemons,
           define the data networks, make the bench's SSH key
  run      up, then the phases below, then the report; exit 1 when a check fails
  bench    the provisioning benchmark: for each count of tenants, from a bench without domains,
           the tenants stage's start to each tenant's SSH banner, against its own boot to SSH
  down     undefine the bench's domains and networks, stop the daemons, delete the namespace and
           the guests' files (the image stays cached)
  status   whether the daemons run, and the bench's domains

The phases of `run` (each asserted; what each read is in $GPUVIRT_BENCH_RUN):
  1. playbooks/lab/tenant_bench.yml: the tenants stage (bench-a, bench-b on data network
     gpuvirt-bench-ab), the guest stages, the checks inside the guests (cloud-init, user, key,
     host name, NICs by MAC, verbs, the NCCL GID index, ibv_rc_pingpong between them);
  2. the same again: nothing changes (changed=0 on every host);
  3. bench-a restarted by libvirt (destroy, start), bench-b removed, bench-c started alone on
     gpuvirt-bench-c (inventories/bench/phase2.yml): bench-a answers again with a new boot id,
     bench-c reaches bench-a neither by ping nor by RDMA, bench-b's files are gone and every other
     file (bench-a's, the base image) is as it was.

State: $GPUVIRT_BENCH_DIR (default /var/lib/gpuvirt-bench, outside the checkout so that the
image is built once per machine): images/<recipe hash>/disk.qcow2, run/. Needs root.
Standard library only.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from lab import kill_pid, locked, recipe_hash as lab_recipe_hash  # noqa: E402  pylint: disable=wrong-import-position

NETNS = "gpuvirt-bench"
URI = "qemu:///system"
RECIPE = ("tenant-image.sh", "image-lib.sh")
DOMAINS = ("bench-a", "bench-b", "bench-c")
# The data networks the inventory's tenants name (isolated: a bridge each, no address, no uplink).
DATA_NETWORKS = {"gpuvirt-bench-ab": "gvb-ab", "gpuvirt-bench-c": "gvb-c"}
MGMT_NETWORK = "gpuvirt-bench-mgmt"
QEMU_CONF = "/etc/libvirt/qemu.conf"
QEMU_CONF_BLOCK = ("# gpuvirt tenant bench: QEMU runs as root. /dev/kvm belongs to another group on the machines\n"
                   "# the bench runs on, and libvirt then probes QEMU again on every call (86 s a define).\n"
                   'user = "root"\ngroup = "root"\n')
PIDS = {"virtlogd": "/run/virtlogd.pid", "libvirtd": "/run/libvirtd.pid"}
PLAYBOOK = "playbooks/lab/tenant_bench.yml"
INVENTORY = "inventories/bench"
PHASE2 = "inventories/bench/phase2.yml"
BANNER_TIMEOUT = int(os.environ.get("GPUVIRT_BENCH_BANNER_TIMEOUT", "900"))


class BenchError(Exception):
    """An error with a message for the user."""


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def bench_dir() -> str:
    return os.path.abspath(os.environ.get("GPUVIRT_BENCH_DIR") or "/var/lib/gpuvirt-bench")


def run_dir() -> str:
    return os.path.join(bench_dir(), "run")


def rpath(*names: str) -> str:
    return os.path.join(run_dir(), *names)


def recipe_hash() -> str:
    return lab_recipe_hash(RECIPE)


def sh(argv: list[str], check: bool = True, netns: bool = False, **kwargs) -> subprocess.CompletedProcess:
    if netns:
        argv = ["ip", "netns", "exec", NETNS] + argv
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False, **kwargs)
    if check and done.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")
    return done


def virsh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh(["virsh", "-q", "-c", URI] + list(args), check=check)


# ---------------------------------------------------------------- up

def image() -> str:
    """The tenant image of the current recipe, built when missing; older ones are removed."""
    images = os.path.join(bench_dir(), "images")
    out = os.path.join(images, recipe_hash())
    disk = os.path.join(out, "disk.qcow2")
    if os.path.isfile(disk):
        return disk
    log(f"building the tenant image (recipe {recipe_hash()}) into {out}; this takes a few minutes")
    start = time.monotonic()
    done = subprocess.run(["bash", os.path.join(HERE, "tenant-image.sh"), out], check=False)
    if done.returncode != 0:
        raise BenchError(f"the tenant image build failed (exit {done.returncode}); its log: {out}/build.log")
    log(f"tenant image built in {time.monotonic() - start:.0f} s")
    for name in os.listdir(images):
        if name != recipe_hash():
            shutil.rmtree(os.path.join(images, name), ignore_errors=True)
    return disk


def pid_of(name: str) -> int | None:
    try:
        with open(PIDS[name], encoding="utf-8") as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def in_netns(pid: int) -> bool:
    return sh(["ip", "netns", "identify", str(pid)], check=False).stdout.strip() == NETNS


def qemu_conf() -> None:
    """QEMU as root in libvirt's qemu.conf (a marked block, added once)."""
    try:
        with open(QEMU_CONF, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise BenchError(f"{QEMU_CONF} is missing: install libvirt-daemon-driver-qemu (scripts/bootstrap.sh)") from None
    if QEMU_CONF_BLOCK in text:
        return
    if re.search(r'^\s*(user|group)\s*=', text, re.M):
        raise BenchError(f"{QEMU_CONF} sets user or group already; the bench needs user = \"root\" and group = \"root\"")
    with open(QEMU_CONF, "a", encoding="utf-8") as handle:
        handle.write("\n" + QEMU_CONF_BLOCK)


def daemons_up() -> None:
    if sh(["ip", "netns", "list"]).stdout.split().count(NETNS) == 0:
        sh(["ip", "netns", "add", NETNS])
    sh(["ip", "-n", NETNS, "link", "set", "lo", "up"])
    for name in ("virtlogd", "libvirtd"):
        pid = pid_of(name)
        if pid is not None and not in_netns(pid):
            raise BenchError(f"{name} (pid {pid}) runs outside the namespace {NETNS}: stop it first (kill {pid})")
        if pid is None:
            qemu_conf()
            sh([name, "-d"], netns=True)
    deadline = time.monotonic() + 60
    while virsh("version", check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise BenchError(f"libvirtd does not answer on {URI} 60 s after its start")
        time.sleep(0.5)


def networks_up() -> None:
    have = virsh("net-list", "--all", "--name").stdout.split()
    active = virsh("net-list", "--name").stdout.split()
    for name, bridge in DATA_NETWORKS.items():
        if name not in have:
            path = rpath(f"{name}.xml")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(f"<network><name>{name}</name><bridge name='{bridge}' stp='off'/></network>\n")
            virsh("net-define", path)
        if name not in active:
            virsh("net-start", name)


def cmd_up(_args: argparse.Namespace | None = None) -> int:
    if os.geteuid() != 0:
        raise BenchError("must run as root (a network namespace, libvirtd, the image build)")
    for tool, package in (("virsh", "libvirt-clients"), ("libvirtd", "libvirt-daemon-system"), ("ip", "iproute2"),
                          ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None:
            raise BenchError(f"'{tool}' not found: install {package} (scripts/bootstrap.sh)")
    disk = image()
    os.makedirs(run_dir(), exist_ok=True)
    base = rpath("base.qcow2")
    if os.path.realpath(base) != os.path.realpath(disk):
        if any(os.path.exists(rpath("guests", "tenants", d)) for d in DOMAINS):
            raise BenchError(f"the tenant image changed while the bench has guests: run '{sys.argv[0]} down' first")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(base)
        os.symlink(disk, base)
    if not os.path.exists(rpath("id_ed25519")):
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuvirt-bench", "-f", rpath("id_ed25519")])
    daemons_up()
    networks_up()
    log(f"up: libvirtd in namespace {NETNS}, image {disk}")
    return 0


# ---------------------------------------------------------------- down

def leftovers() -> bool:
    """Whether libvirt's configuration still holds a bench domain or network (a bench whose
    daemons were stopped from outside: they come back when libvirtd starts, running ones too)."""
    names = [f"/etc/libvirt/qemu/{d}.xml" for d in DOMAINS]
    names += [f"/etc/libvirt/qemu/networks/{n}.xml" for n in list(DATA_NETWORKS) + [MGMT_NETWORK]]
    return any(os.path.exists(name) for name in names)


def cmd_down(_args: argparse.Namespace | None = None) -> int:
    if pid_of("libvirtd") is None and leftovers():
        # undefined through libvirt, never by deleting its files behind its back
        daemons_up()
    if pid_of("libvirtd") is not None:
        have = virsh("list", "--all", "--name", check=False).stdout.split()
        for name in DOMAINS:
            if name in have:
                virsh("destroy", name, check=False)
                virsh("undefine", name, "--nvram", check=False)
        nets = virsh("net-list", "--all", "--name", check=False).stdout.split()
        for name in list(DATA_NETWORKS) + [MGMT_NETWORK]:
            if name in nets:
                virsh("net-destroy", name, check=False)
                virsh("net-undefine", name, check=False)
    for name in ("libvirtd", "virtlogd"):
        pid = pid_of(name)
        if pid is not None and in_netns(pid):
            kill_pid(pid)
    if NETNS in sh(["ip", "netns", "list"], check=False).stdout.split():
        sh(["ip", "netns", "delete", NETNS], check=False)
    shutil.rmtree(rpath("guests"), ignore_errors=True)
    for name in os.listdir(run_dir()) if os.path.isdir(run_dir()) else []:
        if name.startswith(("verify-phase", "probe-")):
            os.unlink(rpath(name))
    log("down: domains, networks, daemons, namespace and guest files removed")
    return 0


def cmd_status(_args: argparse.Namespace) -> int:
    pid = pid_of("libvirtd")
    print(json.dumps({"libvirtd": pid, "in_namespace": bool(pid and in_netns(pid)),
                      "domains": virsh("list", "--all", "--name", check=False).stdout.split() if pid else [],
                      "image": os.path.realpath(rpath("base.qcow2")), "run": run_dir()}, indent=2))
    return 0 if pid else 3


# ---------------------------------------------------------------- playbook runs

def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    venv = os.environ.get("GPUVIRT_VENV") or os.path.join(REPO, ".venv")
    env.update(PATH=os.path.join(venv, "bin") + os.pathsep + env.get("PATH", ""),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build", "collections"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), GPUVIRT_BENCH_RUN=run_dir(),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return env


RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def playbook(label: str, extra: list[str] | None = None, path: str = PLAYBOOK) -> dict:
    """One ansible-playbook run of the bench inside the namespace: its rc, recap and seconds; the
    output goes to the terminal and to run/<label>.log (with each line's time: ANSIBLE_LOG_PATH)."""
    log_path = rpath(f"{label}.log")
    env = ansible_env()
    env["ANSIBLE_LOG_PATH"] = rpath(f"{label}.timed.log")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(env["ANSIBLE_LOG_PATH"])
    argv = ["ip", "netns", "exec", NETNS, "ansible-playbook", "-i", INVENTORY, path] + list(extra or [])
    log(f"{label}: {' '.join(argv[4:])}")
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
            lines.append(line)
        rc = proc.wait()
    recap = {}
    for line in lines:
        match = RECAP_RE.match(line.strip())
        if match:
            recap[match.group(1)] = dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()[1:])))
    seconds = time.monotonic() - start
    log(f"{label}: rc {rc} in {seconds:.0f} s, recap {recap}")
    # what failed, for the check's line (the report and CI's summary show it without the log)
    errors = [line.strip() for line in lines if line.startswith(("[ERROR]:", "fatal:"))][:4]
    return {"rc": rc, "recap": recap, "seconds": round(seconds, 1), "log": log_path, "errors": errors}


def failed_because(run: dict) -> str:
    """A failed playbook's rc, its first errors and its log, for a check's detail."""
    return f"rc {run['rc']}, see {run['log']}" + "".join(f"\n    {line}" for line in run.get("errors", []))


def read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def file_state(top: str) -> dict[str, list[int]]:
    """Every file under ``top``: [size, mtime_ns, inode], to compare before and after a phase."""
    state = {}
    for folder, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            state[os.path.relpath(path, top)] = [info.st_size, info.st_mtime_ns, info.st_ino]
    return state


# ---------------------------------------------------------------- SSH banner probe (timings)

PROBE = r"""
import json, socket, sys, time
targets = json.loads(sys.argv[1]); deadline = time.time() + float(sys.argv[2]); seen = {}
while len(seen) < len(targets) and time.time() < deadline:
    for name, address in targets.items():
        if name in seen:
            continue
        try:
            with socket.create_connection((address, 22), timeout=1) as sock:
                sock.settimeout(2)
                if sock.recv(64).startswith(b"SSH-"):
                    seen[name] = time.time()
        except OSError:
            pass
    time.sleep(0.5)
print(json.dumps(seen))
"""


def start_probe(targets: dict[str, str]) -> subprocess.Popen:
    """A process in the namespace that records when each guest's SSH banner first answers."""
    return subprocess.Popen(["ip", "netns", "exec", NETNS, sys.executable, "-c", PROBE, json.dumps(targets), str(BANNER_TIMEOUT)],
                            stdout=subprocess.PIPE, text=True)


def qemu_started(name: str) -> float | None:
    """When libvirt last started the domain's QEMU: the last 'starting up' line of its log."""
    found = None
    with contextlib.suppress(OSError), open(f"/var/log/libvirt/qemu/{name}.log", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\+0000: starting up", line)
            if match:
                found = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
    return found


def stage_started(timed_log: str) -> float | None:
    """When the tenants stage's first task started, from the playbook's timed log."""
    with contextlib.suppress(OSError), open(timed_log, encoding="utf-8") as handle:
        for line in handle:
            if "TASK [gpuvirt.tenancy.libvirt_host" in line or "TASK [Tenants |" in line:
                stamp = line.split(" p=", 1)[0].strip()
                return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


def provisioning(label: str, run: dict, banners: dict[str, float]) -> dict:
    """The stage's start to each tenant's banner, and each tenant's own QEMU start to its banner."""
    start = stage_started(rpath(f"{label}.timed.log"))
    rows = {}
    for name, seen in sorted(banners.items()):
        qemu = qemu_started(name)
        rows[name] = {"from_stage_s": round(seen - start, 1) if start else None,
                      "boot_to_ssh_s": round(seen - qemu, 1) if qemu else None}
    last = max((r["from_stage_s"] for r in rows.values() if r["from_stage_s"] is not None), default=None)
    return {"tenants": rows, "stage_to_last_ssh_s": last, "playbook_s": run["seconds"]}


# ---------------------------------------------------------------- run

def management_addresses(phase: int) -> dict[str, str]:
    addresses = {"bench-a": "192.168.151.11", "bench-b": "192.168.151.12"}
    if phase == 2:
        addresses = {"bench-c": "192.168.151.13"}
    return addresses


def check(results: list, name: str, ok: bool, detail: str = "") -> bool:
    results.append({"check": name, "ok": bool(ok), "detail": detail})
    log(f"{'PASS' if ok else 'FAIL'}: {name}{': ' + detail if detail and not ok else ''}")
    return bool(ok)


def report_lines(verify1: dict, verify2: dict | None) -> list[str]:
    """One line per tenant, and one per exchange: what the main command's report prints."""
    lines = []
    for verify in filter(None, (verify1, verify2)):
        for name, guest in sorted(verify["guests"].items()):
            mac = verify["macs"].get(name)
            nic = next((n for n in guest["nics"] if n["mac"] == mac), {})
            rdma = next(iter(guest["rdma_links"]), {})
            lines.append(f"{name}: answers over SSH (kernel {guest['kernel']}); cloud-init {guest['cloud_init'].split()[-1]}; "
                         f"data NIC {nic.get('name', 'not found')} {mac} {' '.join(nic.get('ipv4', []))}; "
                         f"RDMA {rdma.get('device', 'none')} seen by verbs: {'yes' if rdma.get('device') in (guest['verbs_devices'] or []) else 'NO'}, "
                         f"GID index {guest['nccl'].get('NCCL_IB_GID_INDEX', 'unknown')}")
            gpu = verify.get("gpu", {}).get(name) or {}
            if gpu.get("mig") is not None:
                lines.append(f"{name}: MIG (nvidia-smi stand-in) GPU instances of profiles {sorted(gpu['mig'])}")
            if gpu.get("mps") is not None:
                lines.append(f"{name}: MPS (control daemon stand-in) gpuvirt-mps@0 {gpu['mps']}")
        for exchange in verify["exchanges"]:
            reached = exchange["ping_rc"] == 0 or exchange["client_rc"] == 0
            if exchange["expect"] == "ok":
                words = "ok" if exchange["ping_rc"] == 0 and exchange["client_rc"] == 0 else "FAILED"
            else:
                words = "NOT BLOCKED" if reached else "blocked"
            lines.append(f"RDMA {exchange['from']} -> {exchange['to']} ({exchange['address']}): {words}")
    return lines


# The GPU stand-ins the bench's guests get (playbooks/lab/bench_gpu_standins.yml), as one tarball: a copy
# of the captures' folder file by file took minutes into guests under TCG.
STANDINS = ("tests/unit/fakes/standins/nvidia-smi", "tests/unit/fakes/standins/nvidia-cuda-mps-control", "tests/fixtures/mig")


def standins_tarball() -> str:
    path = rpath("standins.tar")
    with tarfile.open(path + ".part", "w") as tar:
        for name in STANDINS:
            tar.add(os.path.join(REPO, name), arcname=name)
    os.replace(path + ".part", path)
    return path


def cmd_run(args: argparse.Namespace) -> int:
    results: list = []
    timings: dict = {}
    started = time.monotonic()
    try:
        if not args.keep:
            cmd_down()
        cmd_up()
        standins_tarball()
        probe = start_probe(management_addresses(1))
        first = playbook("phase1")
        banners = json.loads(probe.communicate(timeout=BANNER_TIMEOUT + 30)[0] or "{}")
        timings["phase1"] = provisioning("phase1", first, banners)
        if not check(results, "phase 1: the tenants stage, the guest stages and the checks inside the guests pass", first["rc"] == 0,
                     failed_because(first)):
            return finish(results, timings, started, None, None)
        verify1 = read_json(rpath("verify-phase1.json"))
        again = playbook("phase1-again")
        timings["phase1_again_s"] = again["seconds"]
        changed = dict((h, r["changed"]) for h, r in again["recap"].items() if r["changed"])
        check(results, "a second run of the whole stage changes nothing", again["rc"] == 0 and again["recap"] and not changed,
              f"rc {again['rc']}, changed {changed}")
        guests_before = file_state(rpath("guests"))
        base_before = file_state(os.path.dirname(os.path.realpath(rpath("base.qcow2"))))
        log("restarting bench-a by libvirt (destroy, start)")
        virsh("destroy", "bench-a")
        virsh("start", "bench-a")
        probe = start_probe(dict(management_addresses(2), **{"bench-a": "192.168.151.11"}))
        second = playbook("phase2", ["-e", "@" + PHASE2])
        banners = json.loads(probe.communicate(timeout=BANNER_TIMEOUT + 30)[0] or "{}")
        timings["phase2"] = provisioning("phase2", second, banners)
        check(results, "phase 2: bench-b removed, bench-c started on another data network, the checks inside pass",
              second["rc"] == 0, failed_because(second))
        verify2 = read_json(rpath("verify-phase2.json")) if os.path.exists(rpath("verify-phase2.json")) else None
        if verify2 is not None:
            a1, a2 = verify1["guests"]["bench-a"], verify2["guests"].get("bench-a", {})
            check(results, "bench-a, restarted by libvirt, comes back and answers (a new boot id)",
                  a2.get("boot_id") and a2["boot_id"] != a1["boot_id"], f"boot ids {a1['boot_id']} -> {a2.get('boot_id')}")
            blocked = [e for e in verify2["exchanges"] if e["expect"] == "blocked"]
            check(results, "from bench-c on another data network, ping and RDMA to bench-a fail",
                  blocked and all(e["ping_rc"] != 0 and e["client_rc"] != 0 for e in blocked), json.dumps(blocked))
        domains = virsh("list", "--all", "--name").stdout.split()
        check(results, "removing bench-b undefines its domain and keeps the others", "bench-b" not in domains
              and {"bench-a", "bench-c"} <= set(domains), f"domains {domains}")
        guests_after = file_state(rpath("guests"))
        gone = sorted(p for p in guests_before if p.startswith("tenants/bench-b/"))
        left = [p for p in guests_after if p.startswith("tenants/bench-b/")]
        check(results, "removing bench-b deletes the files the collection made for it",
              gone and not left and not os.path.exists(rpath("guests", "tenants", "bench-b")), f"before {gone}, after {left}")
        kept = dict((p, s) for p, s in guests_before.items() if not p.startswith("tenants/bench-b/"))
        # the same file (its inode); a running guest writes its own disk, every other file is as it was
        changed_files = sorted(p for p, s in kept.items() if guests_after.get(p) is None
                               or (guests_after[p][2] != s[2] if p.endswith("/disk.qcow2") else guests_after[p] != s))
        check(results, "... and nothing else: bench-a's files (its disk the same file, the rest unchanged) and the base image are "
              "as they were",
              not changed_files and file_state(os.path.dirname(os.path.realpath(rpath("base.qcow2")))) == base_before,
              f"changed: {changed_files}")
        return finish(results, timings, started, verify1, verify2)
    finally:
        if args.down_after:
            with contextlib.suppress(BenchError):
                cmd_down()


def finish(results: list, timings: dict, started: float, verify1: dict | None, verify2: dict | None) -> int:
    failed = [r for r in results if not r["ok"]]
    lines = report_lines(verify1, verify2) if verify1 else []
    record = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], check=False).stdout.strip(),
              "checks": results, "timings": timings, "report": lines, "seconds": round(time.monotonic() - started)}
    with open(rpath("result.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
    print("\n==== tenant bench report")
    for line in lines:
        print("  " + line)
    for result in results:
        print(f"  {'PASS' if result['ok'] else 'FAIL'}  {result['check']}")
    print(f"  timings: {json.dumps(timings)}")
    print(f"  {len(results) - len(failed)} passed, {len(failed)} failed ({record['seconds']} s; {rpath('result.json')})")
    return 1 if failed or not results else 0


# ---------------------------------------------------------------- bench (provisioning)

def cmd_bench(args: argparse.Namespace) -> int:
    """For each count: a bench without domains, the tenants stage for the first COUNT tenants of
    the inventory (extra vars: a tenant list of that length), each tenant's SSH banner timed."""
    rows = []
    for count in [int(c) for c in args.counts.split(",")]:
        cmd_down()
        cmd_up()
        import yaml  # pylint: disable=import-outside-toplevel  # the virtualenv's (scripts/env.sh): the inventory's YAML
        with open(os.path.join(REPO, INVENTORY, "group_vars", "gpuvirt_hosts", "tenants.yml"), encoding="utf-8") as handle:
            tenants = yaml.safe_load(handle)["gpuvirt_tenants"][:count]
        names = [t["name"] for t in tenants]
        extra = rpath(f"count{count}.json")
        with open(extra, "w", encoding="utf-8") as handle:
            json.dump({"gpuvirt_tenants": tenants}, handle)
        probe = start_probe(dict((n, a) for n, a in management_addresses(1).items() if n in names))
        # the tenants stage alone, as a user runs it (its guests join and answer on SSH)
        run = playbook(f"count{count}", ["-e", "@" + extra], path="playbooks/tenants.yml")
        banners = json.loads(probe.communicate(timeout=BANNER_TIMEOUT + 30)[0] or "{}")
        if run["rc"] != 0 or len(banners) != count:
            raise BenchError(f"count {count}: rc {run['rc']}, banners {banners}")
        timing = provisioning(f"count{count}", run, banners)
        own = max(t["boot_to_ssh_s"] for t in timing["tenants"].values())
        rows.append({"tenants": count, "stage_to_last_ssh_s": timing["stage_to_last_ssh_s"], "slowest_boot_to_ssh_s": own,
                     "ratio": round(timing["stage_to_last_ssh_s"] / own, 2), "per_tenant": timing["tenants"]})
        log(f"count {count}: {rows[-1]}")
    cmd_down()
    print(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                      "commit": sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], check=False).stdout.strip(),
                      "load": os.getloadavg(), "rows": rows}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up").set_defaults(func=cmd_up)
    p = sub.add_parser("run")
    p.add_argument("--keep", action="store_true", help="start from the bench as it is (default: down first)")
    p.add_argument("--down-after", action="store_true", help="take the bench down at the end (the test command)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("bench")
    p.add_argument("--counts", default="1,2", help="tenant counts to time (default 1,2; this machine holds 2)")
    p.set_defaults(func=cmd_bench)
    sub.add_parser("down").set_defaults(func=cmd_down)
    sub.add_parser("status").set_defaults(func=cmd_status)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        # one bench at a time on a machine: its namespace, daemons and networks are the machine's
        with locked("bench", bench_dir()):
            return args.func(args)
    except BenchError as exc:
        log(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
