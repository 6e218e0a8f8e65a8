"""Prints what must survive a reboot of the lab host besides the VFs (files/vf_settings.py),
one line per fact, so that the persistence check compares the lines before and after:

  driver <address> <driver or none> vfio=chardev|missing   each device named by --devices
  hugepages node<N> <size> <count>                          every node and page size
  domain <name> state=<state> autostart=<enable|disable>    every libvirt domain
  unit <name> <ActiveState> <Result>                        each unit named by --units

Run on the lab host (python3, standard library)."""
import argparse
import glob
import os
import subprocess


def read(path):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def link_name(path):
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else "none"


def run(*argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", nargs="*", default=[])
    parser.add_argument("--units", nargs="*", default=[])
    args = parser.parse_args()
    lines = []
    for address in args.devices:
        base = "/sys/bus/pci/devices/" + address
        group = link_name(base + "/iommu_group")
        lines.append("driver %s %s vfio=%s" % (address, link_name(base + "/driver"),
                                               "chardev" if os.path.exists("/dev/vfio/" + group) else "missing"))
    for pool in sorted(glob.glob("/sys/devices/system/node/node*/hugepages/hugepages-*")):
        parts = pool.split("/")
        lines.append("hugepages %s %s %s" % (parts[5], parts[7].replace("hugepages-", ""), read(pool + "/nr_hugepages")))
    autostart = set(run("virsh", "-c", "qemu:///system", "list", "--all", "--name", "--autostart").split())
    for name in sorted(run("virsh", "-c", "qemu:///system", "list", "--all", "--name").split()):
        state = run("virsh", "-c", "qemu:///system", "domstate", name).strip().replace(" ", "_")
        lines.append("domain %s state=%s autostart=%s" % (name, state, "enable" if name in autostart else "disable"))
    for unit in args.units:
        show = dict(line.split("=", 1) for line in run("systemctl", "show", "-p", "ActiveState,Result", unit).splitlines() if "=" in line)
        lines.append("unit %s %s %s" % (unit, show.get("ActiveState"), show.get("Result")))
    print("\n".join(lines))


main()
