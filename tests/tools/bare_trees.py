#!/usr/bin/env python
"""Write the preview's other bare test hosts (tests/unit/test_preview.py), each the DGX
A100-class tree of tests/tools/dgx_tree.py changed as stated, from real kernels' and tools'
outputs in tests/fixtures:

usage: bare_trees.py NAME OUT_DIR      (NAME: ubuntu2204_kernel515, vpi_ib_without_ipoib, vpi_ib_class)

  ubuntu2204_kernel515  Ubuntu 22.04 on its GA kernel 5.15: /proc/sys/kernel/osrelease and
                        /proc/cmdline from the dmesg of tests/fixtures/boot/
                        dmesg-kernel-command-line_ubuntu22.04_5.15.0-107-generic.txt; libvirt
                        and QEMU as Ubuntu 22.04 ships them, as a capture of that host holds
                        them (.capture/libvirtd-version.txt, .capture/qemu-version.txt: the
                        outputs of tests/fixtures/hypervisor). Before 5.16 the kernel reads no
                        per-node hugepages=N:COUNT, so the 1G pages wanted on only some nodes
                        are reserved at boot by the hugepages unit (docs/boot.md).
  vpi_ib_without_ipoib  the compute NICs' VPI ports in InfiniBand mode with IPoIB not loaded:
                        no netdev; each RDMA device's port 1 reads link_layer InfiniBand (the
                        port's mode, as sysfs writes it under infiniband/<dev>/ports/<n>/).
  vpi_ib_class          the compute NICs' VPI ports in InfiniBand mode as the PCI function
                        shows it: class 0x020700 (PCI base class 02 network, sub-class 07
                        InfiniBand controller, the PCI SIG's class code; the tree's 0x020000 is
                        an Ethernet controller's), their IPoIB netdevs ibpN (type 32) kept.
Needs the collection on the Python path (source scripts/env.sh).
"""

from __future__ import annotations

import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import dgx_tree  # noqa: E402  pylint: disable=import-error,wrong-import-position

FIXTURES = os.path.join(HERE, "..", "fixtures")
DMESG_515 = os.path.join(FIXTURES, "boot", "dmesg-kernel-command-line_ubuntu22.04_5.15.0-107-generic.txt")
LIBVIRTD_2204 = os.path.join(FIXTURES, "hypervisor", "libvirtd-version_ubuntu-22.04_libvirt-8.0.0.txt")
QEMU_2204 = os.path.join(FIXTURES, "hypervisor", "qemu-version_ubuntu-22.04_qemu-6.2.0.txt")


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def kernel_from_dmesg(text):
    """(release, command line) of a dmesg's "Linux version" and "Command line:" lines."""
    release = re.search(r"Linux version (\S+)", text).group(1)
    cmdline = re.search(r"\] Command line: (.*)$", text, re.M).group(1).strip()
    return release, cmdline


def ubuntu2204_kernel515(out):
    host, gpus, nics = dgx_tree.write_tree(out)
    release, cmdline = kernel_from_dmesg(read(DMESG_515))
    host.write("/proc/sys/kernel/osrelease", release + "\n")
    host.write("/proc/cmdline", cmdline + "\n")
    host.write("/.capture/libvirtd-version.txt", read(LIBVIRTD_2204))
    host.write("/.capture/qemu-version.txt", read(QEMU_2204))
    return host, gpus, nics


def compute_nics(nics):
    """The compute NICs of the DGX A100-class tree (NIC0-NIC7; NIC8/NIC9 are the storage pair)."""
    return [nics["NIC%d" % index] for index in range(8)]


def vpi_ib_without_ipoib(out):
    host, gpus, nics = dgx_tree.write_tree(out)
    for index, address in enumerate(compute_nics(nics)):
        path = host.pci_paths[address]
        for name in os.listdir(host.p(path + "/net")):
            shutil.rmtree(host.p(path + "/net/" + name))
            os.remove(host.p("/sys/class/net/" + name))
        host.write(path + "/infiniband/mlx5_%d/ports/1/link_layer" % index, "InfiniBand\n")
    return host, gpus, nics


def vpi_ib_class(out):
    host, gpus, nics = dgx_tree.write_tree(out)
    for address in compute_nics(nics):
        host.write(host.pci_paths[address] + "/class", "0x020700")
    return host, gpus, nics


TREES = {"ubuntu2204_kernel515": ubuntu2204_kernel515, "vpi_ib_without_ipoib": vpi_ib_without_ipoib,
         "vpi_ib_class": vpi_ib_class}


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in TREES:
        print(__doc__.split("\n\n", 2)[1].splitlines()[0], file=sys.stderr)
        return 2
    if os.path.exists(args[1]) and os.listdir(args[1]):
        print("bare_trees: %s exists and is not empty: give a new directory" % args[1], file=sys.stderr)
        return 2
    TREES[args[0]](args[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
