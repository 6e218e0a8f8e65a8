"""Prints each VF of the PFs named on the command line as the kernel reports it, one line per
fact, for verify's assertions and for the persistence check's before/after comparison:

  pf <pf address> netdev=<name> numvfs=<n>
  pflink <pf address> <netdev> up|down                           (the PF's link, administratively)
  vfset <vf address> <mac> <vlan> spoofchk=on|off trust=on|off   (from `ip -j link show <pf netdev>`)
  vfdrv <vf address> <driver or none>

Run on the lab host (python3, standard library)."""
import json
import os
import subprocess
import sys


def on_off(value):
    return "on" if value else "off" if value is not None else "unknown"


def pf_lines(pf):
    base = "/sys/bus/pci/devices/" + pf
    netdevs = sorted(os.listdir(base + "/net")) if os.path.isdir(base + "/net") else []
    netdev = netdevs[0] if netdevs else None
    with open(base + "/sriov_numvfs", encoding="ascii") as handle:
        lines = ["pf %s netdev=%s numvfs=%d" % (pf, netdev, int(handle.read()))]
    settings = {}
    if netdev:
        link = json.loads(subprocess.run(["ip", "-j", "link", "show", netdev], capture_output=True,
                                         text=True, check=True).stdout)[0]
        settings = {vf["vf"]: vf for vf in link.get("vfinfo_list", [])}
        lines.append("pflink %s %s %s" % (pf, netdev, "up" if "UP" in link.get("flags", []) else "down"))
    for name in sorted(os.listdir(base)):
        if not name.startswith("virtfn"):
            continue
        address = os.path.basename(os.readlink(base + "/" + name))
        driver = base + "/" + name + "/driver"
        lines.append("vfdrv %s %s" % (address, os.path.basename(os.readlink(driver)) if os.path.exists(driver) else "none"))
        vf = settings.get(int(name[len("virtfn"):]))
        if vf is not None:
            lines.append("vfset %s %s %d spoofchk=%s trust=%s" % (
                address, vf.get("address"), (vf.get("vlan_list") or [{}])[0].get("vlan", 0),
                on_off(vf.get("spoofchk")), on_off(vf.get("trust"))))
    return lines


for pf_address in sys.argv[1:]:
    print("\n".join(pf_lines(pf_address)))
