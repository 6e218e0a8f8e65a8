#!/usr/bin/env python
"""VF passthrough seen from inside: the nested stage (scripts/test.sh nested; docs/lab.md).

The lab host (lab/lab.py) is converged by the collection as the Molecule scenario does it (the boot
stage with its reboot, then playbooks/site.yml) with the tenants of lab/nested-tenants.yml: three
tenants, each given one igb VF of the lab's PF by the collection (MAC, VLAN, spoof check set on the
PF; the VF bound to vfio-pci; an <interface type='hostdev'> in the domain), and each with an image
(the collection's overlay and NoCloud seed, and the serial console's log). The collection defines
the domains; this script then adds a direct kernel boot to each (<kernel>, <initrd>, <cmdline> in
<os>: the guest lab/nested-guest.sh builds, the lab kernel with an initramfs of busybox, igbvf,
rdma_rxe and verbs; a boot method the collection does not offer) and starts them with virsh. Each
guest says on its serial console what it sees; this script reads the consoles (the domains'
console logs in the lab) and the PF's VF settings, and checks:

  vf_mac        each tenant's VF carries the MAC the host set (guest and PF read-back agree with the inventory)
  rdma_a_b      nest-a and nest-b (VLAN 101) ping and exchange RDMA (ibv_rc_pingpong) over their VFs with
                one GID index, the one the collection's code (guest/nccl_conf.discover_index) chooses from
                the GID tables the guests printed
  isolated_c    nest-c (VLAN 102), started after that exchange while nest-a serves, reaches nest-a
                neither by ping nor by RDMA
  spoof_check   the PF reads back "spoof checking on" for every tenant's VF, and a MAC change from inside
                a guest is refused (frame-level enforcement by QEMU's igb: docs/lab.md)
  vf_numa       each guest reads its VF on its one guest NUMA cell: numa_node 0, below the root bus of the
                pcie-expander-bus the collection gives a one-node tenant with devices
  gpu_switch    nest-a, given also GPU 0 (the edu stand-in under the host switch with the PF), reads its GPU
                and its VF below one switch upstream port, each on a downstream port of its own, both with
                numa_node 0, by the same bridge chain as its running domain's XML (lab/nested_pci.py)

Commands: run [--keep] [--converged] [--timeout S], guest (build the guest only), report (the last run's).
Needs root (the lab, loop devices for the guest disk) and the virtualenv of scripts/env.sh.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# The lab's GPU stand-in BAR (ivshmem, 2 GiB by default) makes its firmware move every 64-bit
# prefetchable window above 4 GiB, the igb VFs' BARs with them; QEMU 10.0.2 decodes those VF BARs
# as 32-bit, so a VF above 4 GiB is not mapped and igbvf never reaches its PF (docs/lab.md, "VF
# passthrough seen from inside"). A 256 MiB stand-in keeps them below 4 GiB, where the VFs work.
os.environ.setdefault("GPUVIRT_LAB_BAR_SIZE", "256M")
import lab  # noqa: E402  (lab/lab.py: the lab host's life cycle)
import nested_pci  # noqa: E402  (lab/nested_pci.py: the guest's PCI tree against the domain's)

RECIPE = ("nested-guest.sh", "nested-init.sh", "nested-tenants.yml", "image-lib.sh")  # and nested.py's table
TENANTS_FILE = os.path.join(HERE, "nested-tenants.yml")
GUEST_DIR = "/var/lib/gpuvirt-nested"
GUEST_FILES = ("guest.raw", "vmlinux", "initrd.cpio")
PF = "0000:84:00.0"
ROLES = {"nest-a": ("server", None), "nest-b": ("client", "nest-a"), "nest-c": ("probe", "nest-a")}
# GPU 0 of the lab, QEMU's edu device (lab/lab.py; docs/lab.md "What the lab is"), as the guest reads its ids
GPU_ID = "0x1234:0x11e8"
VF_ID = "0x8086:0x10ca"
CONVERGE = os.path.join(REPO, "molecule", "default", "converge.yml")
DEFAULT_TIMEOUT = 2400


def log(msg: str) -> None:
    print(f"nested: {msg}", file=sys.stderr, flush=True)


def state_dir() -> str:
    return os.path.join(lab.lab_dir(), "nested")


def tenants() -> list[dict]:
    with open(TENANTS_FILE, encoding="utf-8") as handle:
        return yaml.safe_load(handle)["gpuvirt_tenants"]


def tenant_table() -> str:
    """Lines "mac name address role peer" for the guests' /etc/nested/tenants."""
    by_name = {t["name"]: t for t in tenants()}
    lines = []
    for name, (role, peer) in ROLES.items():
        tenant = by_name[name]
        peer_address = by_name[peer]["guest"]["rdma_address"] if peer else "-"
        lines.append(f"{tenant['mac'].lower()} {name} {tenant['guest']['rdma_address']} {role} {peer_address}")
    return "\n".join(lines) + "\n"


def guest_hash() -> str:
    digest = hashlib.sha256(lab.recipe_hash().encode())
    for name in RECIPE:
        with open(os.path.join(HERE, name), "rb") as handle:
            digest.update(name.encode() + b"\0" + handle.read())
    busybox = shutil.which("busybox")
    if busybox:
        with open(busybox, "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()[:16]


def build_guest() -> str:
    """The guest (its kernel, initramfs, command line and image base), built once per recipe (the lab
    image's and this stage's files); -> its directory."""
    lab.cmd_build(argparse.Namespace(force=False))
    out = os.path.join(state_dir(), guest_hash())
    if all(os.path.exists(os.path.join(out, name)) for name in GUEST_FILES + ("cmdline",)):
        log(f"guest up to date: {out}")
        return out
    os.makedirs(out, exist_ok=True)
    table = os.path.join(out, "tenants")
    lab.write_text(table, tenant_table())
    started = time.monotonic()
    proc = subprocess.run(["bash", os.path.join(HERE, "nested-guest.sh"), out,
                           os.path.join(lab.image_dir(), "disk.qcow2"), table], check=False)
    if proc.returncode != 0 or not all(os.path.exists(os.path.join(out, name)) for name in GUEST_FILES):
        raise lab.LabError(f"the guest build failed (exit {proc.returncode}); log: {os.path.join(out, 'build.log')}")
    log(f"guest built in {time.monotonic() - started:.0f} s: {out}")
    for name in os.listdir(state_dir()):
        old = os.path.join(state_dir(), name)
        if old != out and os.path.isdir(old) and re.fullmatch(r"[0-9a-f]{16}", name):
            shutil.rmtree(old, ignore_errors=True)
    return out


def ssh(command: str, timeout: int = 120, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run(lab.ssh_argv(timeout=15) + [command], stdin=stdin if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, text=stdin is None, check=False, timeout=timeout)


def boot(name: str, cmdline: str) -> None:
    """Add the direct kernel boot to the domain the collection defined, and start it."""
    proc = ssh(f"virsh -c qemu:///system dumpxml --inactive {name}")
    if proc.returncode != 0:
        raise lab.LabError(f"virsh dumpxml {name}: {proc.stderr.strip()}")
    ET.register_namespace("qemu", "http://libvirt.org/schemas/domain/qemu/1.0")
    root = ET.fromstring(proc.stdout)
    os_el = root.find("os")
    for tag in ("kernel", "initrd", "cmdline"):
        for old in os_el.findall(tag):
            os_el.remove(old)
    # after <type> (and a firmware's <loader>/<nvram>), as libvirt orders them
    at = max(i for i, child in enumerate(os_el) if child.tag in ("type", "firmware", "loader", "nvram")) + 1
    for offset, (tag, text) in enumerate((("kernel", f"{GUEST_DIR}/vmlinux"), ("initrd", f"{GUEST_DIR}/initrd.cpio"),
                                          ("cmdline", f"{cmdline} nested.name={name}"))):
        element = ET.Element(tag)
        element.text = text
        os_el.insert(at + offset, element)
    xml = ET.tostring(root, encoding="unicode")
    command = (f"cat >/tmp/{name}.xml && virsh -c qemu:///system define /tmp/{name}.xml"
               f" && virsh -c qemu:///system start {name}")
    proc = subprocess.run(lab.ssh_argv(timeout=15) + [command],
                          input=xml, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode != 0:
        raise lab.LabError(f"define and start {name} with the direct kernel boot: {proc.stderr.strip()}")
    log(f"{name}: started (direct kernel boot)")


def console(name: str) -> str:
    proc = ssh(f"cat /var/log/libvirt/qemu/{name}-console.log 2>/dev/null")
    return (proc.stdout or "").replace("\r", "")


def facts(text: str) -> list[tuple[str, dict, str]]:
    """The guest's "NESTED <what> k=v ..." lines -> [(what, {k: v}, whole line)]."""
    found = []
    for line in text.splitlines():
        match = re.search(r"NESTED (\S+)(.*)", line)
        if not match:
            continue
        words = dict(re.findall(r"(\S+?)=(\S*)", match.group(2)))
        found.append((match.group(1), words, match.group(0)))
    return found


def first(items, what):
    return next((words for kind, words, _line in items if kind == what), None)


def wait_for(names_and_marks: dict[str, str], timeout: float, what: str) -> dict[str, str]:
    """Poll the consoles until each named guest printed its mark ("NESTED <mark>"), a guest ended, or time ran out."""
    deadline = time.monotonic() + timeout
    texts: dict[str, str] = {}
    while True:
        texts = {name: console(name) for name in names_and_marks}
        ended = [n for n, t in texts.items() if "NESTED end" in t]
        if ended:
            raise lab.LabError(f"{what}: guest {', '.join(ended)} stopped early:\n"
                               + "\n".join(line for n in ended for line in texts[n].splitlines() if "NESTED" in line))
        if all(f"NESTED {mark}" in texts[name] for name, mark in names_and_marks.items()):
            return texts
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {n}\n" + "\n".join(t.splitlines()[-15:]) for n, t in texts.items())
            raise lab.LabError(f"{what}: not within {timeout:.0f} s; console tails:\n{tails}")
        time.sleep(15)


def chosen_index(items) -> int | None:
    """The GID index the collection's code chooses from a guest's printed GID table
    (guest/rdma.RdmaReader over the table written as sysfs files, guest/nccl_conf.discover_index)."""
    collections = os.environ.get("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO, ".build", "collections"))
    for path in reversed(collections.split(os.pathsep)):
        if path and path not in sys.path:
            sys.path.insert(0, path)
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_conf import discover_index
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.rdma import RdmaReader

    with tempfile.TemporaryDirectory() as root:
        port = os.path.join(root, "sys/class/infiniband/rxe0/ports/1")
        for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
            os.makedirs(os.path.join(port, sub))
        link_layer = next((line.split()[-1] for kind, _w, line in items if kind == "link-layer"), "Ethernet")
        lab.write_text(os.path.join(port, "link_layer"), link_layer.replace("_", " ") + "\n")
        for kind, words, _line in items:
            if kind != "gid":
                continue
            index = words["index"]
            lab.write_text(os.path.join(port, "gids", index), words["gid"] + "\n")
            lab.write_text(os.path.join(port, "gid_attrs/types", index), words["type"].replace("_", " ") + "\n")
            lab.write_text(os.path.join(port, "gid_attrs/ndevs", index), words.get("ndev", "") + "\n")
        rows = RdmaReader(root).gid_table("rxe0", 1)
        return discover_index({("rxe0", 1): rows})


def pf_vfs() -> dict[int, dict]:
    """The PF's VF settings as the lab's kernel reads them back (ip -d link show of the PF's netdev)."""
    proc = ssh(f"ip -d link show dev $(ls /sys/bus/pci/devices/{PF}/net | head -n 1)")
    vfs = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"\s*vf (\d+)\s+(.*)", line)
        if match:
            text = match.group(2)
            mac = re.search(r"link/ether (\S+)", text)
            vlan = re.search(r"vlan (\d+)", text)
            spoof = re.search(r"spoof checking (\w+)", text)
            vfs[int(match.group(1))] = {"mac": mac.group(1) if mac else None, "vlan": int(vlan.group(1)) if vlan else None,
                                        "spoof": spoof.group(1) if spoof else None, "line": text.strip()}
    return vfs


def check(results: list, name: str, ok: bool, detail: str) -> None:
    results.append({"check": name, "passed": bool(ok), "detail": detail})
    log(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


def domain_xml(name: str) -> str:
    """A running domain's XML as libvirt has it (its controllers' addresses filled in)."""
    proc = ssh(f"virsh -c qemu:///system dumpxml {name}")
    return proc.stdout if proc.returncode == 0 else ""


def vf_addresses(xmls: dict[str, str]) -> dict[str, str]:
    """Each nested tenant's VF on the lab host, as its domain holds it: the host address of its one
    <interface type='hostdev'> (the VF the tenants stage's plan gave it); none where the XML has none."""
    found = {}
    for name, xml in xmls.items():
        try:
            nets = [address for address, element in nested_pci.host_devices(xml).items() if element.tag == "interface"]
        except ET.ParseError:
            nets = []
        if nets:
            found[name] = nets[0]
    return found


def gpu_switch(items, xml: str, gpu_address: str, vf_address: str) -> tuple[bool, str]:
    """Whether the guest reads its GPU and its VF below one switch upstream port, each on a
    downstream port of its own, with numa_node 0, by the chain the domain's XML gives each."""
    devices = [w for kind, w, _line in items if kind == "pcidev"]
    ids = {w.get("pci"): w.get("id") for w in devices}
    gpus = [w for w in devices if w.get("id") == GPU_ID]
    vf = next((w for w in devices if w.get("pci") == (first(items, "vf") or {}).get("pci")), None)
    if len(gpus) != 1 or vf is None:
        return False, f"the guest lists {len(gpus)} GPU stand-in(s) ({GPU_ID}) and {'its' if vf else 'no'} VF"
    gpu = gpus[0]
    problems = []
    try:
        domain = {"GPU": nested_pci.xml_chain(xml, gpu_address), "VF": nested_pci.xml_chain(xml, vf_address)}
        guest = {"GPU": nested_pci.guest_chain(gpu["path"], ids), "VF": nested_pci.guest_chain(vf["path"], ids)}
    except (ValueError, KeyError, SyntaxError) as err:  # ET.ParseError is a SyntaxError
        return False, f"chains not read: {err}"
    for what, device_id in (("GPU", GPU_ID), ("VF", VF_ID)):
        problems += [f"{what}: {p}" for p in nested_pci.chain_problems(domain[what], guest[what], device_id)]
        if domain[what][0]["model"] != nested_pci.EXPANDER or domain[what][0]["node"] != 0:
            problems.append(f"{what}: the domain's root is no pcie-expander-bus of guest node 0")
    problems += nested_pci.shared_switch(domain["GPU"], domain["VF"], guest["GPU"], guest["VF"])
    problems += [f"{what} numa_node {w.get('numa')}" for what, w in (("GPU", gpu), ("VF", vf)) if w.get("numa") != "0"]
    detail = (f"guest GPU {gpu['pci']} ({gpu['id']}, numa_node {gpu.get('numa')}) at {gpu['path']}; VF {vf['pci']} "
              f"({vf['id']}, numa_node {vf.get('numa')}) at {vf['path']}; guest chains: "
              f"{nested_pci.chain_text(guest['GPU'])} | {nested_pci.chain_text(guest['VF'])}; domain: "
              f"{nested_pci.chain_text(domain['GPU'])} | {nested_pci.chain_text(domain['VF'])}")
    return not problems, detail + ("; " + "; ".join(problems) if problems else "")


def verify(texts: dict[str, str], vfs: dict[int, dict], xmls: dict[str, str] | None = None) -> list[dict]:
    results: list[dict] = []
    wanted = {t["name"]: t for t in tenants()}
    items = {name: facts(text) for name, text in texts.items()}
    vf_number = {"nest-a": 0, "nest-b": 1, "nest-c": 2}

    # (a) the VF carries the MAC the host set
    for name, tenant in wanted.items():
        seen = first(items[name], "vf") or {}
        host = vfs.get(vf_number[name], {})
        ok = (seen.get("mac", "").lower() == tenant["mac"].lower() == (host.get("mac") or "").lower()
              and seen.get("id") == "0x8086:0x10ca" and host.get("vlan") == tenant["vlan"])
        check(results, f"vf_mac {name}", ok, f"guest sees {seen.get('mac')} on {seen.get('pci')} ({seen.get('id')}); "
              f"PF vf {vf_number[name]}: {host.get('mac')} vlan {host.get('vlan')}; inventory {tenant['mac']} vlan {tenant['vlan']}")

    # (a2) the VF sits on the tenant's one guest NUMA cell: below a PCI expander's root bus (not the
    # main one, pci0000:00) whose node the guest reads as 0
    for name in wanted:
        seen = first(items[name], "vf") or {}
        path = seen.get("path", "")
        ok = seen.get("numa") == "0" and path.startswith("pci0000:") and not path.startswith("pci0000:00/")
        check(results, f"vf_numa {name}", ok, f"guest numa_node {seen.get('numa')} of its VF at {path or 'not seen'}")

    # (a3) a tenant with a GPU: its GPU and its VF below one emulated switch, as the domain says
    addresses = vf_addresses(xmls or {})
    for name, tenant in wanted.items():
        for gpu_address in tenant.get("gpus", [])[:1]:
            if name not in addresses:
                check(results, f"gpu_switch {name}", False, "its domain's XML holds no <interface type='hostdev'> (its VF)")
                continue
            ok, detail = gpu_switch(items[name], (xmls or {}).get(name, ""), gpu_address, addresses[name])
            check(results, f"gpu_switch {name}", ok, detail)

    # (b) A and B exchange RDMA with the GID index the collection's code chooses
    used = {name: _index_of(items[name]) for name in ("nest-a", "nest-b")}
    chosen = {}
    for name in ("nest-a", "nest-b"):
        try:
            chosen[name] = chosen_index(items[name])
        except Exception as err:  # the collection's refusal is the check's detail
            chosen[name] = f"refused: {err}"
    ping_b = first(items["nest-b"], "ping") or {}
    rdma_b = first(items["nest-b"], "rdma") or {}
    served = [w for kind, w, _l in items["nest-a"] if kind == "served" and w.get("rc") == "0"]
    ok = (ping_b.get("rc") == "0" and rdma_b.get("rc") == "0" and served
          and used["nest-a"] == used["nest-b"] == chosen["nest-a"] == chosen["nest-b"])
    check(results, "rdma_a_b", ok, f"nest-b ping rc {ping_b.get('rc')}, ibv_rc_pingpong rc {rdma_b.get('rc')}; "
          f"nest-a served {len(served)} exchange(s); GID index used {used['nest-a']}/{used['nest-b']}, "
          f"chosen by the collection's code {chosen['nest-a']}/{chosen['nest-b']}")

    # (c) C (another VLAN) reaches A neither by ping nor by RDMA, while A serves
    ping_c = first(items["nest-c"], "ping") or {}
    rdma_c = first(items["nest-c"], "rdma") or {}
    serving = any(kind == "serving" for kind, _w, _l in items["nest-a"])
    served_after = [w for kind, w, _l in items["nest-a"] if kind == "served"]
    ok = (ping_c.get("rc") not in (None, "0") and rdma_c.get("rc") not in (None, "0") and serving
          and len(served_after) == len(served))
    check(results, "isolated_c", ok, f"nest-c ping rc {ping_c.get('rc')}, ibv_rc_pingpong rc {rdma_c.get('rc')}; "
          f"nest-a serving: {serving}, exchanges served {len(served_after)} (all of them nest-b's: {len(served_after) == len(served)})")

    # (d) spoof check: set on the PF for every tenant's VF; a MAC change from inside refused
    for name in wanted:
        host = vfs.get(vf_number[name], {})
        change = next((line for kind, _w, line in items[name] if kind == "mac-change"), "")
        ok = host.get("spoof") == "on" and "mac-change refused" in change
        check(results, f"spoof_check {name}", ok, f"PF vf {vf_number[name]}: spoof checking {host.get('spoof')}; guest: {change}")
    return results


def _index_of(items) -> int:
    for kind, _words, line in items:
        if kind == "gid-index":
            return int(line.split()[-1])
    return -1


def cmd_guest(_args) -> int:
    build_guest()
    return 0


def cmd_run(args) -> int:
    started = time.monotonic()
    timings: dict[str, float] = {}

    def mark(step: str, since: float) -> float:
        timings[step] = round(time.monotonic() - since, 1)
        log(f"{step}: {timings[step]} s")
        return time.monotonic()

    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    results: list[dict] = []
    error = None
    step = time.monotonic()
    try:
        guest = build_guest()
        step = mark("guest_build", step)
        if not args.converged:
            lab.cmd_stop(args)
            lab.cmd_up(argparse.Namespace(accel=os.environ.get("GPUVIRT_LAB_ACCEL", "auto"), tcg_threads="single",
                                          keep_disk=False, timeout=900))
            step = mark("lab_up", step)
        for name in GUEST_FILES:
            with open(os.path.join(guest, name), "rb") as handle:
                target = f"{GUEST_DIR}/{name}"
                proc = ssh(f"mkdir -p {GUEST_DIR} && cat >{target}.part && mv {target}.part {target}", timeout=600, stdin=handle)
            if proc.returncode != 0:
                raise lab.LabError(f"copying {name} into the lab failed: {proc.stderr!r}")
        step = mark("guest_copy", step)
        if not args.converged:
            converge(args.timeout - (time.monotonic() - started))
            step = mark("converge", step)

        def left() -> float:
            return max(60, args.timeout - (time.monotonic() - started))
        cmdline = lab.read_text(os.path.join(guest, "cmdline")).strip()
        for name in ("nest-a", "nest-b"):
            ssh(f"virsh -c qemu:///system destroy {name}; : >/var/log/libvirt/qemu/{name}-console.log")
            boot(name, cmdline)
        wait_for({"nest-a": "serving", "nest-b": "done"}, left(), "nest-a serving and nest-b's exchange")
        step = mark("a_b_exchange", step)
        ssh("virsh -c qemu:///system destroy nest-c; : >/var/log/libvirt/qemu/nest-c-console.log")
        boot("nest-c", cmdline)
        texts = wait_for({"nest-a": "serving", "nest-b": "done", "nest-c": "done"}, left(), "nest-c's probes")
        step = mark("c_probes", step)
        xmls = {name: domain_xml(name) for name in texts}
        results = verify(texts, pf_vfs(), xmls)
        for name, xml in xmls.items():
            lab.write_text(lab.rpath(f"nested-{name}-domain.xml"), xml)
        for name, text in texts.items():
            lab.write_text(lab.rpath(f"nested-{name}-console.log"), text)
    except (lab.LabError, subprocess.TimeoutExpired) as err:
        error = str(err)
        log(f"error: {error}")
    finally:
        timings["total"] = round(time.monotonic() - started, 1)
        report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
                  "checks": results, "error": error, "timings_s": timings,
                  "passed": sum(r["passed"] for r in results), "failed": sum(not r["passed"] for r in results)}
        os.makedirs(state_dir(), exist_ok=True)
        lab.write_text(os.path.join(state_dir(), "last-run.json"), json.dumps(report, indent=1) + "\n")
        if not args.keep:
            lab.cmd_stop(args)
    print_report(report)
    return 0 if not error and results and report["failed"] == 0 else 1


def converge(seconds: float) -> None:
    """The lab's converge (molecule/default/converge.yml: the boot stage, then site.yml) with the nested tenants."""
    log_file = lab.rpath("nested-converge.log")
    log(f"ansible-playbook {os.path.relpath(CONVERGE, REPO)} -e @lab/nested-tenants.yml (log: {log_file})")
    with open(log_file, "w", encoding="utf-8") as out:
        proc = subprocess.run(["ansible-playbook", "-i", os.path.join(REPO, "inventories", "lab"), CONVERGE,
                               "-e", "@" + TENANTS_FILE], cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False,
                              timeout=max(60, seconds))
    if proc.returncode != 0:
        tail = "\n".join(lab.read_text(log_file).splitlines()[-30:])
        raise lab.LabError(f"the converge failed (exit {proc.returncode}); log {log_file}:\n{tail}")


def print_report(report: dict) -> None:
    print(f"nested run {report['date']} on {report['commit']}: {report['passed']} passed, {report['failed']} failed"
          + (f", error: {report['error'].splitlines()[0]}" if report.get("error") else ""))
    for result in report["checks"]:
        print(f"  {'ok    ' if result['passed'] else 'FAILED'} {result['check']}: {result['detail']}")
    print("  timings (s): " + ", ".join(f"{k} {v}" for k, v in report["timings_s"].items()))


def cmd_report(_args) -> int:
    text = lab.read_text(os.path.join(state_dir(), "last-run.json"))
    if not text:
        log("no run on record")
        return 3
    print_report(json.loads(text))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lab/nested.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="boot the lab, converge it with the nested tenants, check from inside, stop")
    p.add_argument("--keep", action="store_true", help="leave the lab running at the end")
    p.add_argument("--converged", action="store_true",
                   help="use the running lab as an earlier run left it (--keep): no fresh lab, no converge; the guests only")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds for the whole run (default 2400)")
    p.set_defaults(func=cmd_run)
    sub.add_parser("guest", help="build the guest disk (cached by recipe)").set_defaults(func=cmd_guest)
    sub.add_parser("report", help="print the last run's report").set_defaults(func=cmd_report)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except lab.LabError as err:
        log(f"error: {err}")
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        lab.cmd_stop(args)
        return 130


if __name__ == "__main__":
    sys.exit(main())
