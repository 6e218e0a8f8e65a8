"""What a running domain's QEMU realises of its guest NUMA cells, read on the lab host (JSON on
stdout): from QEMU's own command line (libvirt 9 passes -device and -object as JSON), each
memory backend's host nodes and policy, each guest NUMA node's CPUs and memory backend, and for
each vfio-pci device the chain of buses up to the pxb-pcie it sits under and that bus's
numa_node; from the monitor (`info numa`), the guest's NUMA nodes as QEMU runs them; from the
kernel, the host CPUs each vCPU thread (named `CPU N/...`) may run on.
usage: cells_state.py DOMAIN"""

import json
import os
import re
import subprocess
import sys


def args_of(pid):
    with open("/proc/%s/cmdline" % pid, "rb") as handle:
        return [a.decode() for a in handle.read().split(b"\0") if a]


def json_values(args, flag):
    out = []
    for i, arg in enumerate(args[:-1]):
        if arg == flag and args[i + 1].startswith("{"):
            out.append(json.loads(args[i + 1]))
    return out


def main():
    domain = sys.argv[1]
    with open("/run/libvirt/qemu/%s.pid" % domain, encoding="ascii") as handle:
        pid = handle.read().strip()
    args = args_of(pid)
    devices = json_values(args, "-device")
    by_id = dict((d.get("id"), d) for d in devices if d.get("id"))
    backends = dict((o["id"], {"host_nodes": o.get("host-nodes"), "policy": o.get("policy")})
                    for o in json_values(args, "-object") if o.get("qom-type", "").startswith("memory-backend"))
    numa = [json.loads(a) if a.startswith("{") else a for a in
            (args[i + 1] for i, a in enumerate(args[:-1]) if a == "-numa")]
    assigned = []
    for dev in devices:
        if dev.get("driver") != "vfio-pci":
            continue
        chain, bus = [], dev.get("bus")
        while bus in by_id:
            parent = by_id[bus]
            chain.append({"id": bus, "driver": parent.get("driver"), "numa_node": parent.get("numa_node")})
            bus = parent.get("bus")
        assigned.append({"host": dev.get("host"), "buses": chain})
    monitor = subprocess.run(["virsh", "-c", "qemu:///system", "qemu-monitor-command", domain, "--hmp", "info numa"],
                             capture_output=True, text=True, check=True).stdout
    guest = {"nodes": int(re.search(r"(\d+) nodes", monitor).group(1)) if re.search(r"(\d+) nodes", monitor) else None,
             "cpus": dict(re.findall(r"node (\d+) cpus: ?([0-9 ]*)", monitor)),
             "size_mb": dict(re.findall(r"node (\d+) size: (\d+) MB", monitor))}
    vcpu_cpus = {}
    for task in os.listdir("/proc/%s/task" % pid):
        with open("/proc/%s/task/%s/comm" % (pid, task), encoding="utf-8") as handle:
            name = handle.read().strip()
        match = re.match(r"CPU (\d+)/", name)
        if match:
            with open("/proc/%s/task/%s/status" % (pid, task), encoding="utf-8") as handle:
                allowed = re.search(r"^Cpus_allowed_list:\s*(\S+)", handle.read(), re.M).group(1)
            vcpu_cpus[match.group(1)] = allowed
    json.dump({"backends": backends, "numa": numa, "devices": assigned, "guest": guest, "vcpu_host_cpus": vcpu_cpus},
              sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
