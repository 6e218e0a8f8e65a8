#!/usr/bin/env python
"""Write the unit tests' DGX A100-class host (tests/unit/fakes/servers.py) to a directory, as
a capture of a bare host reads: the preview's test host (docs/preview.md).

usage: dgx_tree.py OUT_DIR

On top of the unit tests' tree (sysfs/procfs: 8 NUMA nodes, 8 A100 SXM4 40GB, 10 mlx5
functions under their PCIe switches, IOMMU groups, GPUs on nvidia) it writes what a capture by
playbooks/files/capture_host.py also holds, each part filled in as stated:
  /etc/default/grub   Ubuntu 22.04's default (DGX OS 6 is Ubuntu 22.04): the packaging template
                      of tests/fixtures/boot with the two substitutions its .source.txt quotes
  /etc/os-release     ID=ubuntu, VERSION_ID=22.04
  sriov_offset/stride 1 and 1 on the compute NICs (single-function PFs: VFs at PF+1, PF+2, ...,
                      as the ConnectX lspci capture after sriov_numvfs shows)
  resource (GPUs)     the A100 40GB's BARs (DESIGN.md field facts): 16 MiB BAR0, 64 GiB BAR1
                      (64-bit prefetchable), 32 MiB BAR3, in sysfs's 13-line form
  net/<dev>/type      the netdevs' ARPHRD type: 32 (InfiniBand) on the compute NICs' IPoIB netdevs
                      ibpN (VPI ports in IB mode, as a DGX A100 ships them), 1 on the storage pair
  /etc/modprobe.d, /etc/libvirt/qemu, /etc/default/grub.d, /etc/systemd/system
                      present and empty (a bare host: none of the collection's files yet)
Needs the collection on the Python path (source scripts/env.sh).
"""

from __future__ import annotations

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "unit"))

from fakes.servers import build_dgx_a100_class  # noqa: E402  pylint: disable=import-error,wrong-import-position

GRUB_TEMPLATE = os.path.join(HERE, "..", "fixtures", "boot", "etc-default-grub_TEMPLATE_ubuntu-22.04-jammy_grub2-2.06-2ubuntu7.2.txt")
OS_RELEASE = 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\nID=ubuntu\nID_LIKE=debian\n'
# /sys/class/net/<dev>/type (ARPHRD_*, include/uapi/linux/if_arp.h): the compute NICs' IPoIB
# netdevs (ibpN: VPI ports in InfiniBand mode, as a DGX A100 ships them) 32, the storage pair's
# Ethernet netdevs 1.
NETDEV_TYPES = {"ibp": 32, "ens": 1}
# start end flags per resource line; flags: 0x40200 memory, 0x14220c memory 64-bit prefetchable.
A100_40GB_BARS = ((16 << 20, 0x40200), (64 << 30, 0x14220c), (0, 0), (32 << 20, 0x14220c))


def rendered_grub():
    """The template as Ubuntu's debian/rules renders it on amd64 (quoted in its .source.txt)."""
    with open(GRUB_TEMPLATE, encoding="utf-8") as handle:
        text = handle.read()
    text = text.replace("@DEFAULT_CMDLINE@", "quiet splash").replace("@DEFAULT_TIMEOUT@", "0")
    return re.sub(r"^GRUB_TIMEOUT=.*$", lambda m: "GRUB_TIMEOUT_STYLE=hidden\n" + m.group(0), text, flags=re.M)


def resource_lines(index):
    """13 lines (6 BARs, the ROM, 6 bridge windows) for GPU ``index``, BARs laid out from a
    per-GPU base so that no two devices overlap."""
    base = (0x20000000000 + index * (128 << 30))
    lines = []
    for size, flags in A100_40GB_BARS + ((0, 0),) * 2:
        if size:
            lines.append("0x%016x 0x%016x 0x%016x" % (base, base + size - 1, flags))
            base += size
        else:
            lines.append("0x%016x 0x%016x 0x%016x" % (0, 0, 0))
    lines += ["0x%016x 0x%016x 0x%016x" % (0, 0, 0)] * (13 - len(lines))
    return "\n".join(lines) + "\n"


def write_tree(out):
    host, gpus, nics = build_dgx_a100_class(out)
    host.write("/etc/default/grub", rendered_grub())
    host.write("/etc/os-release", OS_RELEASE)
    for path in ("/etc/modprobe.d", "/etc/libvirt/qemu", "/etc/default/grub.d", "/etc/systemd/system"):
        os.makedirs(host.p(path), exist_ok=True)
    for address in nics.values():
        if os.path.exists(host.p(host.pci_paths[address] + "/sriov_totalvfs")):
            host.write(host.pci_paths[address] + "/sriov_offset", "1")
            host.write(host.pci_paths[address] + "/sriov_stride", "1")
    for index, address in enumerate(sorted(gpus.values())):
        host.write(host.pci_paths[address] + "/resource", resource_lines(index))
    for address in nics.values():
        for name in os.listdir(host.p(host.pci_paths[address] + "/net")):
            host.write(host.pci_paths[address] + "/net/%s/type" % name, "%d\n" % NETDEV_TYPES[name[:3]])
    return host, gpus, nics


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n", 1)[1].splitlines()[0], file=sys.stderr)
        return 2
    if os.path.exists(args[0]) and os.listdir(args[0]):
        print("dgx_tree: %s exists and is not empty: give a new directory" % args[0], file=sys.stderr)
        return 2
    write_tree(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
