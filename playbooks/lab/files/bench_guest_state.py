"""LAB ONLY (the tenant bench): what one tenant guest is, read inside it, as one JSON object for
the bench's checks (playbooks/lab/tenant_bench_verify.yml): cloud-init's status, the user and its
keys, the host name, the kernel and boot id, each NIC with its MAC and IPv4 addresses, the RDMA
devices the kernel holds (rdma link) and those the verbs library sees (ibv_devices), rxe0's GID
table from sysfs, the NCCL file's settings and the hosts file. Reads only; standard library."""
import json
import os
import pwd
import subprocess
import sys


def run(argv):
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600, check=False)
        return done.returncode, done.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


user = sys.argv[1]
# waits for cloud-init's last stage: "status: done" (or error) once it has finished
_rc, status = run(["cloud-init", "status", "--wait"])
_rc, links = run(["ip", "-j", "addr", "show"])
nics = []
for link in json.loads(links or "[]"):
    if link.get("link_type") != "ether":
        continue
    nics.append({"name": link["ifname"], "mac": link.get("address", "").lower(), "state": link.get("operstate"),
                 "ipv4": ["%s/%s" % (a["local"], a["prefixlen"]) for a in link.get("addr_info", []) if a.get("family") == "inet"]})
_rc, rdma = run(["rdma", "-j", "link", "show"])
verbs_rc, verbs = run(["ibv_devices"])
nccl = {}
for line in (read("/etc/nccl.conf") or "").splitlines():
    if "=" in line and not line.lstrip().startswith("#"):
        key, value = line.split("=", 1)
        nccl[key.strip()] = value.strip()
# the GID table of rxe0's port 1, read from sysfs (unused slots answer EINVAL): index -> [gid, type, netdev]
gids = {}
port = "/sys/class/infiniband/rxe0/ports/1"
for name in sorted(os.listdir(port + "/gids")) if os.path.isdir(port + "/gids") else []:
    kind = read("%s/gid_attrs/types/%s" % (port, name))
    if kind is not None:
        gids[name] = [(read("%s/gids/%s" % (port, name)) or "").strip(), kind.strip(),
                      (read("%s/gid_attrs/ndevs/%s" % (port, name)) or "").strip()]
home = pwd.getpwnam(user).pw_dir if user else None
print(json.dumps({
    "cloud_init": status.strip(),
    "user": user,
    "user_exists": home is not None,
    "authorized_keys": [k for k in (read(os.path.join(home, ".ssh/authorized_keys")) or "").splitlines() if k.strip()] if home else [],
    "hostname": (read("/etc/hostname") or "").strip(),
    "kernel": os.uname().release,
    "boot_id": (read("/proc/sys/kernel/random/boot_id") or "").strip(),
    "nics": nics,
    "rdma_links": [{"device": link.get("ifname"), "netdev": link.get("netdev"), "state": link.get("state")} for link in json.loads(rdma or "[]")],
    "verbs_devices": [line.split()[0] for line in verbs.splitlines()[2:] if line.split()] if verbs_rc == 0 else None,
    "nccl": nccl,
    "gids": gids,
    "hosts": read("/etc/hosts") or "",
}))
