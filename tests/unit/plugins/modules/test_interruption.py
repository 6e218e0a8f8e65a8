# -*- coding: utf-8 -*-
"""Every module that changes the host converges when a run is stopped before any one of its
changes and run again (fakes.interrupt): the final state equals an uninterrupted run's, and
the run after that reports changed=false. The worlds are the fake trees, fake kernels and
stand-ins the module tests use (fakes.kernel.FakeKernel for SR-IOV/VFIO, fakes.rdma's
configfs and mlxconfig stand-in, the nvidia-smi stand-in)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import split_cmdline
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub_defaults import GrubDefaults
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host, KernelWriter
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.modules import (
    hugepages, iommu_grub, mig_profile, mlx_rocev2, nccl_env, sriov_vfs, vfio_bind)

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands, Reply  # pylint: disable=import-error
from fakes.host_tree import FakeHost  # pylint: disable=import-error
from fakes.interrupt import InterruptingHost, converges_from_every_interruption, tree_state  # pylint: disable=import-error
from fakes.kernel import lab_host, lab_host_with_vfs  # pylint: disable=import-error
from fakes.mig import STANDIN, gpu, h100_fixture_layout, make_state, read_state  # pylint: disable=import-error
from fakes.rdma import BOOLEAN, FakeConfigfs, add_port, firmware_tool_on_path  # pylint: disable=import-error

PF = "0000:81:00.0"


def test_iommu_grub(tmp_path):
    def build(name):
        tree = FakeHost(tmp_path / name)
        tree.set_cpuinfo("GenuineIntel")
        tree.write("/etc/os-release", "ID=debian\n")
        tree.write("/etc/default/grub", 'GRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX="console=ttyS0 intel_iommu=off"\r\n'
                                        'GRUB_CMDLINE_LINUX+=" quiet"\r\n')
        tree.write("/boot/grub/grub.cfg", "linux /vmlinuz console=ttyS0 intel_iommu=off quiet\n")
        return tree

    def run(tree, countdown):
        def update_grub(_argv):
            # update-grub writes grub.cfg from the defaults file (the cmdline part that matters here)
            value = GrubDefaults(open(tree.p("/etc/default/grub"), encoding="utf-8", newline="").read())
            tree.write("/boot/grub/grub.cfg", "linux /vmlinuz %s\n" % " ".join(
                split_cmdline(value.value("GRUB_CMDLINE_LINUX"))))
        commands = RecordedCommands(replies=[Reply(["update-grub"], effect=update_grub)])
        host = InterruptingHost(tree.root, countdown, changes=lambda argv: True, commands=commands)
        return run_module(iommu_grub.main, {"pre_bind_ids": ["10de:2330"]}, host=host)

    assert converges_from_every_interruption(build, run, lambda tree: tree_state(tree.root)) == 2


def test_hugepages(tmp_path):
    def build(name):
        tree = FakeHost(tmp_path / name)
        tree.write("/proc/sys/kernel/osrelease", "6.1.0-28-amd64")
        tree.set_cpuinfo("GenuineIntel")
        tree.add_numa_node(0, [0, 1], memory_mb=2048)
        tree.add_numa_node(1, [2, 3], memory_mb=2048)
        os.makedirs(tree.p("/etc/systemd/system"))
        tree.write("/proc/mounts", "sysfs /sys sysfs rw 0 0\n")
        tree.write("/proc/meminfo", "Hugepagesize:       2048 kB\n")
        os.makedirs(tree.p("/sys/kernel/mm/hugepages/hugepages-2048kB"))
        return tree

    def run(tree, countdown):
        def mount(argv):
            # what mount leaves behind: the hugetlbfs mount in /proc/mounts
            with open(tree.p("/proc/mounts"), "a", encoding="utf-8") as handle:
                handle.write("hugetlbfs %s hugetlbfs rw,pagesize=2M 0 0\n" % argv[-1][len(tree.root):])
        commands = RecordedCommands(replies=[Reply(["mount", "..."], effect=mount)])
        host = InterruptingHost(tree.root, countdown, changes=lambda argv: True, commands=commands,
                                kernel=KernelWriter(Sysfs(tree.root)))
        args = {"pages": [{"size": "2M", "count": 64, "node": "all"}], "boot_config": "none", "persist": True,
                "mounts": [{"size": "2M", "path": "/dev/hugepages2M"}]}
        return run_module(hugepages.main, args, host=host)

    # two pools, the pool unit, the mount unit, the mount, and each unit's wants link (enable_units)
    assert converges_from_every_interruption(build, run, lambda tree: tree_state(tree.root)) == 7


def test_sriov_vfs(tmp_path):
    def build(name):
        return lab_host(tmp_path / name)

    def run(world, countdown):
        tree, kernel = world
        host = InterruptingHost(tree.root, countdown, commands=RecordedCommands(), kernel=kernel)
        return run_module(sriov_vfs.main, {"pf": PF, "num_vfs": 4, "autoprobe": False}, host=host)

    assert converges_from_every_interruption(build, run, lambda world: tree_state(world[0].root)) >= 5


@pytest.mark.parametrize("driver", ["vfio-pci", "host"])
def test_vfio_bind(tmp_path, driver):
    def build(name):
        tree, kernel = lab_host_with_vfs(tmp_path / name, num_vfs=2, autoprobe=True)
        if driver == "host":
            # bound to vfio-pci by an earlier run; handed back now
            bound = run_module(vfio_bind.main, {"vfs_of": [PF], "devices": ["0000:82:00.0"]},
                               host=Host(tree.root, commands=RecordedCommands(), kernel=kernel))
            assert bound["changed"] and not bound.get("failed"), bound
        return tree, kernel

    def run(world, countdown):
        tree, kernel = world
        host = InterruptingHost(tree.root, countdown, commands=RecordedCommands(), kernel=kernel)
        return run_module(vfio_bind.main, {"vfs_of": [PF], "devices": ["0000:82:00.0"], "driver": driver}, host=host)

    assert converges_from_every_interruption(build, run, lambda world: tree_state(world[0].root)) >= 6


def test_nccl_env(tmp_path):
    rows = [(0, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v1", "ens3np0"),
            (1, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v2", "ens3np0")]

    def build(name):
        root = tmp_path / name
        add_port(root, "mlx5_0", 1, rows)
        os.makedirs(str(root / "etc"))
        (root / "etc" / "nccl.conf").write_bytes(b"# image\r\nNCCL_DEBUG=WARN\r\n")
        return str(root)

    def run(root, countdown):
        host = InterruptingHost(root, countdown, commands=RecordedCommands())
        return run_module(nccl_env.main, {"ib_hca": ["mlx5_0:1"], "net_gdr_level": "PHB"}, host=host)

    assert converges_from_every_interruption(build, run, tree_state) == 1


def test_mlx_rocev2(tmp_path, monkeypatch):
    rows = [(0, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v1", "ens3np0"),
            (1, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v2", "ens3np0")]

    def build(name):
        root = tmp_path / name / "root"
        add_port(root, "mlx5_0", 1, rows, pci=PF)
        fake = FakeConfigfs(root, [("mlx5_0", 1)], mode="IB/RoCE v1")
        state = firmware_tool_on_path(tmp_path / name, monkeypatch, {PF: {"device_type": "ConnectX5", "params": [
            ["SRIOV_EN", {"default": "False(0)", "current": "False(0)", "next": "False(0)", "choices": BOOLEAN}],
            ["NUM_OF_VFS", {"default": "0", "current": "0", "next": "0"}]]}})
        return str(root), fake, state

    def run(world, countdown):
        root, fake, _state = world
        host = InterruptingHost(root, countdown, changes=lambda argv: "set" in argv, kernel=fake)
        return run_module(mlx_rocev2.main, {"device": PF, "firmware": {"SRIOV_EN": True, "NUM_OF_VFS": 4},
                                            "default_roce_mode": "v2"}, host=host)

    def state(world):
        root, fake, tool_state = world
        with open(tool_state, encoding="utf-8") as handle:
            firmware = handle.read()
        return tree_state(root, skip=("sys/kernel/config",)), dict(fake.modes), firmware

    assert converges_from_every_interruption(build, run, state) >= 4


def test_mig_profile(tmp_path, monkeypatch):
    changing = ("-mig", "-dci", "-dgi", "-cgi", "-r")

    def build(name):
        os.makedirs(str(tmp_path / name))
        return make_state(tmp_path / name, monkeypatch, [h100_fixture_layout(), gpu("NVIDIA H100 PCIe", "00000000:02:00.0")])

    def run(path, countdown):
        monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", path)
        host = InterruptingHost(str(tmp_path), countdown, changes=lambda argv: any(f in argv for f in changing))
        layout = [{"devices": "all", "mig_enabled": True, "mig_devices": {"3g.40gb": 1, "2g.20gb": 1}}]
        return run_module(mig_profile.main, {"layout": layout, "nvidia_smi": STANDIN}, host=host)

    def state(path):
        data = read_state(path)
        data.pop("calls", None)
        return data

    assert converges_from_every_interruption(build, run, state) >= 3
