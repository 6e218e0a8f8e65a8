# -*- coding: utf-8 -*-
"""Hugepages per NUMA node over fake sysfs trees laid out like a real kernel's (FakeHost):
the lab host's two 2 GB nodes (DESIGN.md) and a real 2-socket EPYC host's node sizes
(tests/fixtures/numa, numactl --hardware). Every run injects a Host over the tree, with a
stand-in allocator or recorded commands where a test needs them; nothing is patched."""

from __future__ import annotations

import errno
import os
import re
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages as hugepages_utils
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.modules import hugepages as hugepages_module

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands, Reply  # pylint: disable=import-error
from fakes.host_tree import FakeHost, HugepageAllocator  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.unit_checks import systemd_escape_path, systemd_verify  # pylint: disable=import-error

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
EPYC = os.path.join(FIXTURES, "numa", "numactl-hardware_2x-epyc-9375f_smt-off_2nodes.txt")
NODE2M = "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages"
NODE1G = "/sys/devices/system/node/node%d/hugepages/hugepages-1048576kB/nr_hugepages"
UNIT = "/etc/systemd/system/gpuvirt-hugepages.service"


def lab_host(root, release="6.1.0-28-amd64"):
    """The lab VM: 2 NUMA nodes of 2048 MB (cpus 0-1 and 2-3), no hugepages yet."""
    host = FakeHost(root)
    host.write("/proc/sys/kernel/osrelease", release)
    host.write("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=UUID=x ro quiet")
    host.set_cpuinfo("GenuineIntel")
    host.add_numa_node(0, [0, 1], memory_mb=2048)
    host.add_numa_node(1, [2, 3], memory_mb=2048)
    os.makedirs(host.p(os.path.dirname(UNIT)))  # systemd's unit directory, where persist writes
    return host


def epyc_host(root):
    """Node sizes and cpus as numactl --hardware printed them on a 2x EPYC 9375F host."""
    host = FakeHost(root)
    host.write("/proc/sys/kernel/osrelease", "6.8.12-5-pve")
    with open(EPYC, encoding="utf-8") as handle:
        text = handle.read()
    for node, cpus in re.findall(r"node (\d+) cpus: ([\d ]+)", text):
        size = int(re.search(r"node %s size: (\d+) MB" % node, text).group(1))
        host.add_numa_node(int(node), [int(c) for c in cpus.split()], memory_mb=size)
    return host


def read(host, path):
    with open(host.p(path), encoding="utf-8") as handle:
        return handle.read().strip()


def run(host, check_mode=False, diff=False, kernel=None, commands=None, **args):
    """The module over the tree; ``kernel`` takes the sysfs writes (the tree's files by
    default), ``commands`` answers the programs it runs (none by default)."""
    args.setdefault("boot_config", "none")
    injected = Host(host.root, kernel=kernel, commands=commands if commands is not None else RecordedCommands())
    return run_module(hugepages_module.main, args, check_mode=check_mode, diff=diff, host=injected)


def test_runtime_2m_on_node1(tmp_path):
    host = lab_host(tmp_path)
    result = run(host, pages=[{"size": "2M", "count": 64, "node": 1}], diff=True)
    assert result["changed"] is True and result["reboot_required"] is False
    assert read(host, NODE2M % 1) == "64" and read(host, NODE2M % 0) == "0"
    assert result["pages"] == [{"node": 1, "size": "2M", "requested": 64, "allocated": 64, "free": 0, "at_boot": False}]
    assert result["diff"][0]["after"] == "%s: 64\n" % (NODE2M % 1)
    again = run(host, pages=[{"size": "2M", "count": 64, "node": 1}])
    assert again["changed"] is False


def test_check_mode_writes_nothing(tmp_path):
    host = lab_host(tmp_path)
    result = run(host, pages=[{"size": "2M", "count": 64, "node": "all"}], check_mode=True)
    assert result["changed"] is True
    assert read(host, NODE2M % 0) == "0" and read(host, NODE2M % 1) == "0"
    assert [p["allocated"] for p in result["pages"]] == [0, 0]


def test_shortfall_restores_and_fails(tmp_path):
    host = lab_host(tmp_path)
    host.write(NODE2M % 0, "8")
    kernel = HugepageAllocator(host, {("2M", 1): 300})
    result = run(host, kernel=kernel, pages=[{"size": "2M", "count": 16, "node": 0}, {"size": "2M", "count": 512, "node": 1}])
    assert result["failed"] is True and result["changed"] is False
    assert "node 1: asked 512 x 2M, the kernel gave 300" in result["msg"]
    assert "previous counts written back" in result["msg"]
    assert read(host, NODE2M % 0) == "8" and read(host, NODE2M % 1) == "0"
    assert result["shortfalls"] == [{"node": 1, "size": "2M", "requested": 512, "allocated": 300, "previous": 0,
                                     "restored_to": 0, "error": None}]
    assert (("2M", 0, 8) in kernel.writes) and (("2M", 1, 0) in kernel.writes)


def test_shortfall_kept_with_allow_partial(tmp_path):
    host = lab_host(tmp_path)
    kernel = HugepageAllocator(host, {("2M", 1): 300})
    result = run(host, kernel=kernel, pages=[{"size": "2M", "count": 512, "node": 1}], allow_partial=True)
    assert not result.get("failed") and result["changed"] is True
    assert read(host, NODE2M % 1) == "300"
    assert result["pages"][0]["allocated"] == 300 and result["pages"][0]["requested"] == 512
    assert result["warnings"] == ["hugepages: node 1: asked 512 x 2M, the kernel gave 300"]


def test_shrink_before_grow(tmp_path):
    host = lab_host(tmp_path)
    host.write(NODE2M % 0, "512")
    kernel = HugepageAllocator(host)
    run(host, kernel=kernel, at_boot=[],
        pages=[{"size": "2M", "count": 0, "node": 0}, {"size": "2M", "count": 128, "node": 1}, {"size": "1G", "count": 0}])
    assert kernel.writes == [("2M", 0, 0), ("2M", 1, 128)]


@pytest.mark.parametrize("release, pages, boot_value", [
    ("6.1.0-28-amd64", [{"size": "1G", "count": 1, "node": 1}], "1:1"),
    ("6.1.0-28-amd64", [{"size": "1G", "count": 2, "node": "all"}], "0:2,1:2"),
    ("5.10.0-13-amd64", [{"size": "1G", "count": 1, "node": "all"}], "2"),
    ("5.15.0-43-generic", [{"size": "1G", "count": 1, "node": 0}, {"size": "1G", "count": 1, "node": 1}], "2"),
])
def test_boot_args(tmp_path, release, pages, boot_value):
    host = lab_host(tmp_path, release)
    result = run(host, pages=pages)
    assert result["boot_args"] == [{"name": "hugepagesz", "value": "1G", "state": "present"},
                                   {"name": "hugepages", "value": boot_value, "state": "present"}]
    assert result["reboot_required"] is True and result["changed"] is False
    assert result["args_missing"] == ["hugepagesz=1G", "hugepages=%s" % boot_value]
    host.write("/proc/cmdline", "ro quiet hugepagesz=1G hugepages=%s" % boot_value)
    assert run(host, pages=pages)["reboot_required"] is False


def test_per_node_boot_pages_before_5_16_are_reserved_by_the_boot_unit_and_no_more(tmp_path):
    """Ubuntu 22.04's 5.15 reads no hugepages=N:COUNT: 1G pages wanted on node 1 only are not spread
    over every node by hugepages=N (pages nobody asked for); the boot-time unit reserves them on
    node 1 at the next boot, and the pool's shortfall says a reboot is due."""
    host = lab_host(tmp_path, "5.15.0-43-generic")
    pages = [{"size": "1G", "count": 1, "node": 1}]
    result = run(host, pages=pages, persist=True)
    assert not result.get("failed"), result.get("msg")
    assert result["boot_args"] == [] and result["boot_unit_sizes"] == ["1G"]
    assert result["reboot_required"] is True
    unit = open(host.p("/etc/systemd/system/gpuvirt-hugepages.service"), encoding="utf-8").read()
    assert "echo 1 > /sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages" in unit
    assert "node0/hugepages/hugepages-1048576kB" not in unit
    # nothing allocated now: the pool is the unit's at the next boot
    assert open(host.p("/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages")).read().strip() == "0"
    host.write("/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages", "1")
    assert run(host, pages=pages, persist=True)["reboot_required"] is False


def test_per_node_boot_pages_before_5_16_need_the_boot_unit(tmp_path):
    host = lab_host(tmp_path, "5.10.0-13-amd64")
    result = run(host, pages=[{"size": "1G", "count": 1, "node": 1}], persist=False)
    assert result["failed"] and "reads no per-node hugepages=N:COUNT" in result["msg"] and "persist: true" in result["msg"]


def test_boot_zero_removes_reservation(tmp_path):
    host = lab_host(tmp_path)
    host.write("/proc/cmdline", "ro hugepagesz=1G hugepages=0:1,1:1")
    result = run(host, pages=[{"size": "1G", "count": 0}])
    assert result["boot_args"] == [{"name": "hugepagesz", "value": "1G", "state": "absent"}]
    assert result["args_unwanted"] == ["hugepagesz=1G", "hugepages=0:1,1:1"]


def test_boot_config_grub_edits_the_file(tmp_path):
    host = lab_host(tmp_path)
    host.write("/srv/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="quiet"\n')
    args = dict(pages=[{"size": "1G", "count": 1, "node": 1}, {"size": "2M", "count": 32, "node": 1}],
                boot_config="grub", grub_file="/srv/grub", bootloader_update="none")
    result = run(host, diff=True, **args)
    assert result["changed"] is True and result["reboot_required"] is True
    assert result["diff"][-1]["before_header"] == "/srv/grub"
    assert read(host, "/srv/grub") + "\n" == 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="quiet hugepagesz=1G hugepages=1:1"\n'
    assert read(host, NODE2M % 1) == "32" and read(host, NODE1G % 1) == "0"
    assert run(host, **args)["changed"] is False


def test_persist_unit(tmp_path):
    host = lab_host(tmp_path)
    args = dict(pages=[{"size": "2M", "count": 64, "node": 1}, {"size": "1G", "count": 1, "node": 1}],
                persist=True, persist_unit=UNIT)
    result = run(host, **args)
    assert result["persist_unit"] == UNIT and result["persist_unit_changed"] is True
    text = read(host, UNIT) + "\n"
    assert "Before=libvirtd.service virtqemud.service\n" in text
    execs = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    # Only the runtime size; 1G is reserved at boot.
    assert execs == ["ExecStart=/bin/sh -c 'echo 64 > %s'" % (NODE2M % 1)]
    assert "WantedBy=multi-user.target" in text
    again = run(host, **args)
    assert again["changed"] is False and again["persist_unit_changed"] is False


def test_persist_unit_check_mode(tmp_path):
    host = lab_host(tmp_path)
    result = run(host, pages=[{"size": "2M", "count": 4, "node": 0}], persist=True, persist_unit=UNIT, check_mode=True)
    assert result["persist_unit_changed"] is True and not os.path.exists(host.p(UNIT))


@pytest.mark.parametrize("pages, message", [
    ([{"size": "2M", "count": 4, "node": 3}], "pages[0]: NUMA node 3 does not exist on this host (nodes: 0, 1)"),
    ([{"size": "2M", "count": 4, "node": "one"}], "node 'one' is not a NUMA node number or all"),
    ([{"size": "2M", "count": 1025, "node": 1}], "node 1 has 2048 MB of memory; 1025 x 2M (2050 MB) does not fit"),
    ([{"size": "1G", "count": 2, "node": 0}, {"size": "2M", "count": 1, "node": 0}], "node 0 has 2048 MB of memory"),
    ([{"size": "2M", "count": 4, "node": 1}, {"size": "2M", "count": 8, "node": "all"}], "asked twice (4 and 8)"),
])
def test_bad_input_changes_nothing(tmp_path, pages, message):
    host = lab_host(tmp_path)
    result = run(host, pages=pages, at_boot=[])
    assert result["failed"] and message in result["msg"], result["msg"]
    assert read(host, NODE2M % 0) == "0" and read(host, NODE2M % 1) == "0"


def test_size_without_kernel_support(tmp_path):
    host = lab_host(tmp_path)
    for node in (0, 1):
        shutil.rmtree(host.p("/sys/devices/system/node/node%d/hugepages/hugepages-1048576kB" % node))
    result = run(host, pages=[{"size": "1G", "count": 1, "node": 0}])
    assert result["failed"] and "1G pages are not supported on node 0" in result["msg"]


def test_real_epyc_node_sizes(tmp_path):
    host = epyc_host(tmp_path)
    fits = run(host, pages=[{"size": "1G", "count": 700, "node": "all"}])
    assert fits["boot_args"][1] == {"name": "hugepages", "value": "0:700,1:700", "state": "present"}
    too_many = run(host, pages=[{"size": "1G", "count": 756, "node": 0}])
    # node 0: 773271 MB; 756 x 1024 MB = 774144 MB
    assert too_many["failed"] and "node 0 has 773271 MB of memory; 756 x 1G (774144 MB) does not fit" in too_many["msg"]


def test_write_error_is_a_shortfall(tmp_path):
    host = lab_host(tmp_path)
    result = run(host, kernel=HugepageAllocator(host, refuse=errno.ENOMEM), pages=[{"size": "2M", "count": 8, "node": 0}])
    assert result["failed"] and "(%s)" % "[Errno 12] Cannot allocate memory" in result["msg"]


def test_no_grub_needed_without_boot_sizes(tmp_path):
    host = lab_host(tmp_path)
    result = run(host, pages=[{"size": "2M", "count": 2, "node": 0}], boot_config="grub", grub_file="/nonexistent")
    assert not result.get("failed") and result["boot_args"] == []


# ---------------------------------------------------------------------------- hugetlbfs mounts
# /proc/mounts lines as the kernel prints them: hugetlbfs_show_options (fs/hugetlbfs/inode.c)
# writes pagesize= in K or M, so 2M pages show pagesize=2M and 1G pages pagesize=1024M.
PROC_MOUNTS = ("sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
               "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
               "tmpfs /run tmpfs rw,nosuid,nodev,size=400000k,mode=755 0 0\n")


@pytest.fixture
def mount_host(tmp_path):
    host = lab_host(tmp_path)
    host.write("/proc/mounts", PROC_MOUNTS)
    host.write("/proc/meminfo", "MemTotal:        4013404 kB\nHugepagesize:       2048 kB\n")
    for size in ("2048kB", "1048576kB"):
        os.makedirs(host.p("/sys/kernel/mm/hugepages/hugepages-%s" % size), exist_ok=True)
    host.commands = RecordedCommands(replies=[(["mount", "-t", "hugetlbfs", "..."],)])
    return host


def test_mount_1g_with_unit(mount_host):
    args = dict(pages=[{"size": "1G", "count": 1, "node": 1}], persist=True, persist_unit=UNIT,
                mounts=[{"size": "1G", "path": "/dev/hugepages1G"}, {"size": "2M", "path": "/dev/hugepages"}])
    result = run(mount_host, commands=mount_host.commands, **args)
    target = mount_host.p("/dev/hugepages1G")
    assert mount_host.commands.calls == [["mount", "-t", "hugetlbfs", "-o", "pagesize=1G", "hugetlbfs", target]]
    assert os.path.isdir(target)
    assert result["mounts"] == [{"size": "1G", "path": "/dev/hugepages1G", "mounted": False},
                                {"size": "2M", "path": "/dev/hugepages", "mounted": True}]
    unit = "/etc/systemd/system/dev-hugepages1G.mount"
    assert unit in result["mount_units"]
    text = read(mount_host, unit)
    assert "Where=/dev/hugepages1G\nType=hugetlbfs\nOptions=pagesize=1G\n" in text
    assert "Before=libvirtd.service" in text
    # Once the kernel lists it, nothing to do.
    mount_host.write("/proc/mounts", PROC_MOUNTS + "hugetlbfs /dev/hugepages1G hugetlbfs rw,relatime,pagesize=1024M 0 0\n")
    again = run(mount_host, commands=mount_host.commands, **args)
    assert again["changed"] is False and len(mount_host.commands.calls) == 1


@pytest.mark.parametrize("mounts, message", [
    ([{"size": "1G", "path": "/run"}], "/run is already a tmpfs mount"),
    ([{"size": "1G", "path": "/dev/hugepages"}], "/dev/hugepages is a hugetlbfs mount of 2048 kB pages, not 1G"),
    ([{"size": "1G", "path": "/x"}, {"size": "2M", "path": "/x/"}], "a path is given twice"),
])
def test_mount_refusals(mount_host, mounts, message):
    result = run(mount_host, commands=mount_host.commands, pages=[{"size": "2M", "count": 2, "node": 0}], mounts=mounts)
    assert result["failed"] and message in result["msg"]
    assert mount_host.commands.calls == [] and read(mount_host, NODE2M % 0) == "0"


# ---------------------------------------------------------------------------- enabling the units
WANTS = "/etc/systemd/system/multi-user.target.wants/"


def link_on_enable(host):
    """What ``systemctl enable UNIT`` leaves for a unit with WantedBy=multi-user.target."""
    def effect(argv):
        os.makedirs(host.p(WANTS), exist_ok=True)
        os.symlink("/etc/systemd/system/" + argv[2], host.p(WANTS + argv[2]))
    return effect


@pytest.mark.parametrize("live", [False, True], ids=["captured-tree", "running-host"])
def test_persist_unit_enabled_once(tmp_path, live):
    """Under another root the wants link is written (and shown in the diff); on the running
    host systemd makes it (daemon-reload, then enable). The re-run is one read, no change."""
    host = lab_host(tmp_path)
    commands = RecordedCommands(replies=[(["systemctl", "daemon-reload"],),
                                         Reply(["systemctl", "enable", "gpuvirt-hugepages.service"],
                                               effect=link_on_enable(host))])
    injected = (LiveHost if live else Host)(host.root, commands=commands)
    args = dict(pages=[{"size": "2M", "count": 8, "node": 0}], persist=True, persist_unit=UNIT, boot_config="none")
    result = run_module(hugepages_module.main, args, diff=True, host=injected)
    assert result["changed"] is True and result["units_enabled"] == ["gpuvirt-hugepages.service"]
    assert os.readlink(host.p(WANTS + "gpuvirt-hugepages.service")) == UNIT
    assert commands.calls == ([["systemctl", "daemon-reload"], ["systemctl", "enable", "gpuvirt-hugepages.service"]]
                              if live else [])
    link_diff = [d for d in result["diff"] if d["after_header"] == WANTS + "gpuvirt-hugepages.service"]
    assert link_diff == [{"before_header": WANTS + "gpuvirt-hugepages.service", "before": "",
                          "after_header": WANTS + "gpuvirt-hugepages.service", "after": "symbolic link to %s\n" % UNIT}]
    again = run_module(hugepages_module.main, args, host=(LiveHost if live else Host)(host.root, commands=commands))
    assert again["changed"] is False and again["units_enabled"] == [] and len(commands.calls) == (2 if live else 0)


@pytest.mark.parametrize("enable_units, check_mode, linked", [
    (True, True, False),     # check mode: planned, not made
    (False, False, False),   # left to the caller
])
def test_persist_unit_not_enabled(tmp_path, enable_units, check_mode, linked):
    host = lab_host(tmp_path)
    commands = RecordedCommands()
    result = run_module(hugepages_module.main, dict(pages=[{"size": "2M", "count": 8, "node": 0}], persist=True,
                                                    persist_unit=UNIT, boot_config="none", enable_units=enable_units),
                        check_mode=check_mode, host=LiveHost(host.root, commands=commands))
    assert result["changed"] is True and commands.calls == []
    assert result["units_enabled"] == (["gpuvirt-hugepages.service"] if enable_units else [])
    assert os.path.lexists(host.p(WANTS + "gpuvirt-hugepages.service")) is linked


def test_enabled_unit_that_changed_is_reloaded_not_enabled_again(tmp_path):
    host = lab_host(tmp_path)
    os.makedirs(host.p(WANTS))
    os.symlink(UNIT, host.p(WANTS + "gpuvirt-hugepages.service"))
    host.write(UNIT, "[Service]\nExecStart=/bin/true\n")
    commands = RecordedCommands(replies=[(["systemctl", "daemon-reload"],)])
    result = run_module(hugepages_module.main, dict(pages=[{"size": "2M", "count": 8, "node": 0}], persist=True,
                                                    persist_unit=UNIT, boot_config="none"),
                        host=LiveHost(host.root, commands=commands))
    assert result["persist_unit_changed"] is True and result["units_enabled"] == []
    assert commands.calls == [["systemctl", "daemon-reload"]]


def test_mount_unit_enabled_with_the_pool_unit(mount_host):
    result = run(mount_host, commands=mount_host.commands, pages=[{"size": "2M", "count": 2, "node": 0}], persist=True,
                 persist_unit=UNIT, mounts=[{"size": "1G", "path": "/dev/hugepages1G"}])
    assert result["units_enabled"] == ["gpuvirt-hugepages.service", "dev-hugepages1G.mount"]
    assert os.readlink(mount_host.p(WANTS + "dev-hugepages1G.mount")) == "/etc/systemd/system/dev-hugepages1G.mount"


# ---------------------------------------------------------------------------- units systemd loads
@pytest.mark.parametrize("path", ["/dev/hugepages1G", "/dev/hp%n", "/dev/huge-pages", "/mnt/.hp/x.y", "/dev/hp\u00e9",
                                  "/dev/a\\b"])
def test_written_units_pass_systemd_analyze_verify(mount_host, path):
    """The persist unit and the mount unit, as systemd itself reads them: a '%' is not expanded
    as a specifier, and Where= matches the unit's name (systemd-escape --path)."""
    result = run(mount_host, commands=mount_host.commands, pages=[{"size": "2M", "count": 2, "node": 0}], persist=True,
                 persist_unit=UNIT, enable_units=False, mounts=[{"size": "1G", "path": path}])
    assert not result.get("failed"), result
    mount_unit = "/etc/systemd/system/%s.mount" % systemd_escape_path(path)
    assert result["mount_units"] == [mount_unit]
    rc, output = systemd_verify([mount_host.p(UNIT), mount_host.p(mount_unit)])
    assert rc == 0 and "Where=" not in output, output
    assert "Where=%s\n" % path.replace("%", "%%") in read_text(mount_host.p(mount_unit))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(st.characters(min_codepoint=33, max_codepoint=0x2ff, blacklist_characters="/"), min_size=1,
                        max_size=8).filter(lambda name: name not in (".", "..")), min_size=1, max_size=3))
def test_mount_unit_names_are_systemd_escape_path(parts):
    path = "/" + "/".join(parts)
    assert hugepages_utils.systemd_escape_path(path) == systemd_escape_path(path)


def read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()
