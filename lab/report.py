#!/usr/bin/env python
"""The main command's short report on the lab after a playbook run: tasks changed (from
the play recap), reboots (boot_id and kernel starts on the serial console), the
topology read on the lab by host_topology_info, the tenants' placement as libvirt
holds it (hostdevs, vCPU pins, memory nodes), and one line per tenant (the collection's
guest_report_lines: its guest, and its VFs as the lab host set them, read back with
``ip link``); then how to reach and stop the lab.

usage: report.py --log PLAYBOOK_LOG --boot-id-before ID --kernel-starts-before N [--stall-resets-before N]
Standard library, and the collection's own line format and ``ip link`` parser (run in the
repository's virtualenv, scripts/env.sh).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402  pylint: disable=wrong-import-position

# the collection as scripts/bootstrap.sh links it (.build/collections/ansible_collections/gpuvirt/tenancy)
sys.path.insert(0, os.path.join(lab.REPO, ".build", "collections"))

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def ssh(command: str) -> str:
    proc = subprocess.run(lab.ssh_argv() + [command], capture_output=True, text=True, check=False, timeout=120)
    return proc.stdout if proc.returncode == 0 else ""


def kernel_starts() -> int:
    """Kernel starts on the serial console that were reboots: the lab's own resets after a
    stall panic (lab.STALL_PANICS) are counted apart, by stall_resets()."""
    boots = lab.console_boots()
    return boots["kernel_starts"] - boots["stall_resets"]


def stall_resets() -> int:
    return lab.console_boots()["stall_resets"]


def recap(log_path: str) -> dict[str, dict[str, int]]:
    hosts: dict[str, dict[str, int]] = {}
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                match = RECAP.match(ANSI.sub("", line).strip())
                if match:
                    hosts[match.group(1)] = {"ok": int(match.group(2)), "changed": int(match.group(3)),
                                             "unreachable": int(match.group(4)), "failed": int(match.group(5))}
    except OSError:
        pass
    return hosts


def topology(repo: str) -> dict | None:
    """host_topology_info run on the lab through the lab inventory (ad hoc, JSON results)."""
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    argv = ["ansible", "gpuvirt_hosts", "-i", os.path.join(repo, "inventories", "lab") + "/",
            "-m", "gpuvirt.tenancy.host_topology_info",
            "-a", '{"gpu_ids": "{{ gpuvirt_gpu_pci_ids }}", "nic_ids": "{{ gpuvirt_nic_pci_ids }}"}']
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=repo, timeout=300)
    _head, sep, body = proc.stdout.partition(" => ")
    if not sep:
        return None
    try:
        return json.JSONDecoder().raw_decode(body.strip())[0].get("topology")
    except (ValueError, AttributeError):
        return None


def largest_bars(addresses: list[str]) -> dict[str, str]:
    """The largest BAR of each device, from sysfs "resource" lines (start end flags)."""
    sizes = {}
    for address in addresses:
        best = 0
        for line in ssh(f"cat /sys/bus/pci/devices/{address}/resource").splitlines()[:6]:
            start, end, _flags = (int(field, 16) for field in line.split())
            if end > start:
                best = max(best, end - start + 1)
        if best:
            sizes[address] = f"{best >> 30} GiB" if best >= 1 << 30 else f"{best >> 20} MiB" if best >= 1 << 20 else f"{best >> 10} KiB"
    return sizes


def summarize_topology(topo: dict) -> list[str]:
    bar_sizes = largest_bars([gpu["address"] for gpu in topo.get("gpus", [])])
    lines = []
    for node in topo.get("numa_nodes", []):
        pages = ", ".join(f"{size}: {hp.get('total')}" for size, hp in sorted(node.get("hugepages", {}).items()))
        lines.append(f"  NUMA node {node['id']}: cpus {node['cpus']}, {node.get('memory_mb')} MB, hugepages {pages}")
    pci = topo.get("pci_devices", {})
    for gpu in topo.get("gpus", []):
        upstream = pci.get(gpu["address"], {}).get("upstream") or []
        lines.append(f"  GPU {gpu['address']} {gpu['vendor_id']}:{gpu['device_id']} node {gpu['numa_node']} "
                     f"driver {gpu['driver']} iommu_group {gpu['iommu_group']}"
                     f"{' largest BAR ' + bar_sizes.get(gpu['address']) if bar_sizes.get(gpu['address']) else ''}"
                     f"; upstream {' < '.join(upstream) or '-'}")
    for nic in topo.get("nics", []):
        kind = "VF" if nic.get("is_vf") else "NIC"
        sriov = f" VFs {nic['sriov_numvfs']}/{nic['sriov_totalvfs']}" if nic.get("sriov_totalvfs") else ""
        lines.append(f"  {kind} {nic['address']} {nic['vendor_id']}:{nic['device_id']} node {nic['numa_node']} "
                     f"driver {nic['driver']} iommu_group {nic['iommu_group']}{sriov}"
                     f"{' netdevs ' + ','.join(nic['netdevs']) if nic.get('netdevs') else ''}"
                     f"{' rdma ' + ','.join(nic['rdma_devices']) if nic.get('rdma_devices') else ''}")
    for gpu, row in sorted(topo.get("gpu_nic_affinity", {}).items()):
        pfs = {nic: level for nic, level in row.items() if not any(n["address"] == nic and n.get("is_vf") for n in topo.get("nics", []))}
        lines.append(f"  affinity GPU {gpu}: " + ", ".join(f"{nic} {level}" for nic, level in sorted(pfs.items())))
    iommu = topo.get("iommu", {})
    lines.append(f"  IOMMU {'on' if iommu.get('enabled') else 'off'}, {len(iommu.get('groups', {}))} groups; "
                 f"kernel args: {' '.join(a for a in topo.get('cmdline', []) if not a.startswith(('BOOT_IMAGE=', 'root=')))}")
    return lines


def domains() -> list[tuple[str, ET.Element | None]]:
    """Each domain on the lab with its XML (None where it does not parse), read once for the report."""
    found = []
    for name in [n for n in ssh("command -v virsh >/dev/null && virsh list --all --name").split() if n]:
        try:
            found.append((name, ET.fromstring(ssh(f"virsh dumpxml {name}"))))
        except ET.ParseError:
            found.append((name, None))
    return found


def pci_addresses(root: ET.Element, path: str) -> list[str]:
    """The PCI addresses of a domain's <address> elements at ``path``."""
    addresses = []
    for addr in root.findall(path):
        try:
            addresses.append("%04x:%02x:%02x.%x" % tuple(int(addr.get(k, "0"), 16) for k in ("domain", "bus", "slot", "function")))
        except ValueError:
            continue
    return addresses


def placement(found: list[tuple[str, ET.Element | None]]) -> list[str]:
    lines = []
    for name, root in found:
        state = ssh(f"virsh domstate {name}").strip()
        if root is None:
            lines.append(f"  {name}: {state} (no XML)")
            continue
        hostdevs = pci_addresses(root, "./devices/hostdev/source/address")
        pins = sorted({pin.get("cpuset") for pin in root.findall("./cputune/vcpupin")})
        memory = root.find("./numatune/memory")
        lines.append(f"  {name}: {state}; vcpus {root.findtext('vcpu')} pinned to {','.join(pins) or '-'}; "
                     f"memory nodes {memory.get('nodeset') if memory is not None else '-'}; hostdevs {', '.join(hostdevs) or '-'}")
    return lines or ["  (no tenant domains defined on the lab yet)"]


# For each VF address given: its PF, the PF's netdev, the VF's index, then what `ip link show dev`
# prints for the PF (the VF lines carry the MAC, VLAN, spoof checking and trust the host set).
VF_SETTINGS_SH = r"""
for vf in "$@"; do
  dev=/sys/bus/pci/devices/$vf
  [ -e "$dev/physfn" ] || { echo "### $vf - - -"; continue; }
  pf=$(basename "$(readlink "$dev/physfn")")
  netdev=$(ls "/sys/bus/pci/devices/$pf/net" 2>/dev/null | head -n 1)
  index=-
  for link in /sys/bus/pci/devices/$pf/virtfn*; do
    [ "$(basename "$(readlink "$link")")" = "$vf" ] && index=${link##*virtfn}
  done
  echo "### $vf $pf ${netdev:--} $index"
  [ -n "$netdev" ] && ip link show dev "$netdev"
done
"""


def host_vf_settings(addresses: list[str]) -> dict[str, dict]:
    """Each VF's settings as the lab host's kernel holds them (``ip link`` of its PF), by VF address."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.vf_lines import parse_ip_link_vfs  # pylint: disable=import-outside-toplevel
    if not addresses:
        return {}
    out = ssh("sh -c %s sh %s" % (shlex.quote(VF_SETTINGS_SH), " ".join(shlex.quote(a) for a in addresses)))
    settings = {}
    for section in out.split("### ")[1:]:
        head, _nl, text = section.partition("\n")
        vf, _pf, _netdev, index = (head.split() + ["-"] * 4)[:4]
        found = parse_ip_link_vfs(text).get(int(index)) if index.isdigit() else None
        settings[vf] = dict(found or {}, address=vf)
    return settings


def tenant_lines(found: list[tuple[str, ET.Element | None]]) -> list[str]:
    """One line per domain on the lab: its guest (none for a domain without a disk: the lab's
    tenants are diskless, docs/lab.md), and its VFs (hostdev interfaces) as the host set them."""
    from ansible_collections.gpuvirt.tenancy.plugins.filter.guest_report_lines import guest_report_lines  # pylint: disable=import-outside-toplevel
    rows, vfs_of = [], {}
    for name, root in found:
        if root is None:
            continue
        vfs_of[name] = pci_addresses(root, "./devices/interface[@type='hostdev']/source/address")
        row = {"name": name}
        if not [d for d in root.findall("./devices/disk") if d.get("device") == "disk"]:
            row["guest"] = False
        rows.append(row)
    settings = host_vf_settings(sorted({vf for vfs in vfs_of.values() for vf in vfs}))
    for row in rows:
        # a guest's own parts (SSH, RDMA, exchanges) come from the play that reached it, not from here
        row["host_vfs"] = [settings.get(vf, {"address": vf}) for vf in vfs_of[row["name"]]]
    return ["  " + line for line in guest_report_lines(rows)] or ["  (no tenant domains defined on the lab yet)"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--boot-id-before", default="")
    parser.add_argument("--kernel-starts-before", type=int, default=0)
    parser.add_argument("--stall-resets-before", type=int, default=0)
    parser.add_argument("--kernel-starts", action="store_true",
                        help="print the console's kernel start count (stall resets left out) and exit")
    parser.add_argument("--stall-resets", action="store_true", help="print the console's stall reset count and exit")
    args = parser.parse_args()
    if args.kernel_starts or args.stall_resets:
        print(kernel_starts() if args.kernel_starts else stall_resets())
        return 0
    repo = lab.REPO
    print("\n==== lab report " + "=" * 56)
    hosts = recap(args.log)
    if hosts:
        total = sum(h["changed"] for h in hosts.values())
        per_host = ", ".join(f"{name} {h['changed']}" for name, h in sorted(hosts.items()))
        failed = [name for name, h in hosts.items() if h["failed"] or h["unreachable"]]
        print(f"tasks changed: {total} ({per_host}){'; FAILED on ' + ', '.join(failed) if failed else ''}")
    else:
        print("tasks changed: unknown (no play recap in the log)")
    boot_id = ssh("cat /proc/sys/kernel/random/boot_id").strip()
    starts = kernel_starts() - args.kernel_starts_before
    print(f"reboots: {starts} kernel start(s) during the run (serial console); boot_id "
          f"{'changed' if boot_id and boot_id != args.boot_id_before else 'unchanged'} ({args.boot_id_before or '?'} -> {boot_id or '?'})")
    resets = stall_resets() - args.stall_resets_before
    if resets:
        print(f"lab resets:   {resets} boot(s) stalled under emulation and the lab kernel reset itself "
              "(a stall or hung-task panic, docs/lab.md); not counted as reboots above")
    topo = topology(repo)
    print("topology (host_topology_info on the lab):")
    print("\n".join(summarize_topology(topo)) if topo else "  (host_topology_info did not answer)")
    found = domains()
    print("tenant placement (libvirt on the lab):")
    print("\n".join(placement(found)))
    print("tenants (guest, and VFs as the lab host set them):")
    print("\n".join(tenant_lines(found)))
    print(f"lab QEMU:     {lab.read_text(lab.rpath('qemu.version')) or 'unknown'}")
    print(f"playbook log: {args.log}")
    print("ssh in:       scripts/lab.sh ssh     (or: ssh -F " + lab.rpath("ssh_config") + " gpuvirt-lab)")
    print("stop the lab: scripts/lab.sh stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
