# -*- coding: utf-8 -*-
"""playbooks/files/capture_host.py: a capture reads like the host it was taken from, holds the files the
collection edits and every path a preview reads (recorded through the host seam), reads nothing
outside the tree and writes nothing outside its output (links that climb out, relative or
absolute), refuses a bad argument in one line with a non-zero exit, and the bare lab capture
(tests/fixtures/lab/bare.tar) holds the lab's topology."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import shutil
import tarfile

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import port_modes
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import TopologyReader, read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import check_stages
from fakes.captured_trees import lab_capture, load_dgx_tree  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.recorded_reads import RecordingSysfs, recording_host  # pylint: disable=import-error

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LAB_BARE = lab_capture("bare")
LAB_IDS = (["1234:11e8"], ["1b36:0010"])


def load_tool():
    spec = importlib.util.spec_from_file_location("capture_host", os.path.join(REPO_ROOT, "playbooks", "files", "capture_host.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


capture_host = load_tool()


def without_root(model):
    return {key: value for key, value in model.items() if key != "root"}


@pytest.fixture(name="host")
def fixture_host(tmp_path):
    """A host tree made by re-capturing the lab fixture, plus things a capture must drop or
    survive: a symlink loop, an unrelated big file, a device's config space."""
    src = tmp_path / "host"
    assert capture_host.main(["--root", LAB_BARE, str(src)]) == 0
    dev = src / "sys" / "devices" / "pci0000:80" / "0000:80:00.0" / "0000:81:00.0"
    (dev / "config").write_bytes(b"\0" * 4096)
    os.symlink("..", dev / "subsystem_loop")
    os.symlink("../../../../devices", src / "sys" / "bus" / "pci" / "loop")
    # the lab VM's hypervisor as DMI names it (the lab capture predates its capture), through the link
    # a kernel makes: /sys/class/dmi/id -> ../../devices/virtual/dmi/id
    (src / "sys" / "devices" / "virtual" / "dmi" / "id").mkdir(parents=True)
    (src / "sys" / "devices" / "virtual" / "dmi" / "id" / "sys_vendor").write_text("QEMU\n")
    (src / "sys" / "class" / "dmi").mkdir(parents=True)
    os.symlink("../../devices/virtual/dmi/id", src / "sys" / "class" / "dmi" / "id")
    return src


def test_lab_fixture_is_the_bare_lab():
    model = read_topology(LAB_BARE, *LAB_IDS)
    assert [node["id"] for node in model["numa_nodes"]] == [0, 1]
    assert [node["cpus"] for node in model["numa_nodes"]] == [[0, 1], [2, 3]]
    pci = model["pci_devices"]
    assert pci["0000:81:00.0"]["vendor_id"] == "0x1b36" and pci["0000:81:00.0"]["device_id"] == "0x0010"
    assert pci["0000:81:00.0"]["numa_node"] == 1
    assert pci["0000:81:00.0"]["sriov_totalvfs"] == 4 and pci["0000:81:00.0"]["sriov_numvfs"] == 0
    assert pci["0000:81:00.0"]["upstream"] == ["0000:80:00.0"]
    assert [gpu["address"] for gpu in model["gpus"]] == ["0000:82:00.0"]
    assert model["gpus"][0]["numa_node"] == 1 and model["gpus"][0]["driver"] is None
    assert "0000:83:00.0" in [nic["address"] for nic in model["nics"]]
    assert "intel_iommu=off" in model["cmdline"]
    assert model["iommu"]["enabled"] is False and model["iommu"]["groups"] == {}
    assert model["cpu_vendor"] == "intel"


@pytest.mark.parametrize("out_name", ["capture", "capture.tar", "capture.tar.gz"])
def test_capture_reads_like_the_host(host, tmp_path, out_name):
    out = tmp_path / out_name
    assert capture_host.main(["--root", str(host), "--note", "unit test", str(out)]) == 0
    if out_name.endswith(("tar", "gz")):
        unpacked = tmp_path / "unpacked"
        with tarfile.open(out) as tar:
            tar.extractall(unpacked)  # noqa: S202 - made by this test
        out = unpacked
    assert without_root(read_topology(str(out), *LAB_IDS)) == without_root(read_topology(str(host), *LAB_IDS))
    assert read_topology(str(out), *LAB_IDS)["virtual_machine"] == "QEMU"
    assert "unit test" in (out / ".source.txt").read_text(encoding="utf-8")
    dev = out / "sys" / "devices" / "pci0000:80" / "0000:80:00.0" / "0000:81:00.0"
    assert not (dev / "config").exists()
    assert not os.path.lexists(dev / "subsystem_loop")
    assert not os.path.lexists(out / "sys" / "bus" / "pci" / "loop")
    # Links stay relative, so the capture can move.
    link = out / "sys" / "bus" / "pci" / "devices" / "0000:81:00.0"
    assert not os.path.isabs(os.readlink(link))


def snapshot(tree):
    """Every path under ``tree`` with its kind and content or link target."""
    seen = {}
    for folder, dirs, files in os.walk(str(tree)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                seen[path] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                seen[path] = ("dir",)
            else:
                with open(path, "rb") as handle:
                    seen[path] = ("file", handle.read())
    return seen


def make_file(tmp_path):
    (tmp_path / "a-file").write_text("x", encoding="utf-8")


def make_busy_dir(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "something").write_text("x", encoding="utf-8")


def make_dir_named_tar(tmp_path):
    (tmp_path / "cap.tar.gz").mkdir()


def make_empty_root(tmp_path):
    (tmp_path / "empty").mkdir()


# (what is wrong, set-up of tmp_path, argv ({host}, {tmp}: the paths), message excerpt)
BAD_ARGUMENTS = [
    ("output a file", make_file, ["--root", "{host}", "{tmp}/a-file"],
     "{tmp}/a-file exists and is not a directory: give a new directory, or a name ending in .tar or .tar.gz"),
    ("output a directory that is not empty", make_busy_dir, ["--root", "{host}", "{tmp}/busy"],
     "{tmp}/busy exists and is not empty: give a new directory"),
    ("output directory in a missing directory", None, ["--root", "{host}", "{tmp}/missing/capture"],
     "the directory of {tmp}/missing/capture ({tmp}/missing) does not exist or is not a directory: make it first"),
    ("tarball in a missing directory", None, ["--root", "{host}", "{tmp}/missing/cap.tar.gz"],
     "the directory of {tmp}/missing/cap.tar.gz ({tmp}/missing) does not exist"),
    ("tarball under a file", make_file, ["--root", "{host}", "{tmp}/a-file/cap.tar"], "({tmp}/a-file) does not exist or is not a directory"),
    ("tarball a directory", make_dir_named_tar, ["--root", "{host}", "{tmp}/cap.tar.gz"],
     "{tmp}/cap.tar.gz is a directory: give a file name for the tarball"),
    ("root that does not exist", None, ["--root", "{tmp}/nowhere", "{tmp}/capture"],
     "--root {tmp}/nowhere does not exist: give the root of the host's tree"),
    ("root a file", make_file, ["--root", "{tmp}/a-file", "{tmp}/capture"], "--root {tmp}/a-file is not a directory"),
    ("root with no /sys, /proc or /etc", make_empty_root, ["--root", "{tmp}/empty", "{tmp}/capture.tar"],
     "--root {tmp}/empty holds no /sys, /proc or /etc: it is not the root of a host"),
    ("no output", None, ["--root", "{host}"], "the following arguments are required: out (usage: capture_host.py"),
    ("root without its value", None, ["{tmp}/capture", "--root"], "argument --root: expected one argument (usage:"),
    ("an option the tool has not", None, ["--bogus", "{tmp}/capture"], "unrecognized arguments: --bogus (usage:"),
]


@pytest.mark.parametrize("make, argv, words", [case[1:] for case in BAD_ARGUMENTS], ids=[case[0] for case in BAD_ARGUMENTS])
def test_a_bad_argument_is_one_line_a_non_zero_exit_and_nothing_written(host, tmp_path, capsys, make, argv, words):
    if make:
        make(tmp_path)
    capsys.readouterr()
    before = snapshot(tmp_path)
    fill = {"host": str(host), "tmp": str(tmp_path)}
    assert capture_host.main([arg.format(**fill) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capture_host: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert words.format(**fill) in err, err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("out_name, make", [("capture", None), ("empty", make_empty_root), ("capture.tar.gz", None)])
def test_a_write_that_fails_half_way_is_one_line_and_leaves_nothing(host, tmp_path, capsys, monkeypatch, out_name, make):
    """A full disk half way (a stand-in: the /proc step raises ENOSPC after the /sys steps wrote
    their files): one line, exit 2, and the output as it was (a new one removed, an empty one
    emptied)."""
    if make:
        make(tmp_path)

    def disk_full(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.dest("/proc/cmdline"))

    monkeypatch.setattr(capture_host.Capture, "proc", disk_full)
    capsys.readouterr()
    before = snapshot(tmp_path)
    assert capture_host.main(["--root", str(host), str(tmp_path / out_name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("capture_host: cannot write the capture %s: No space left on device (" % (tmp_path / out_name))
    assert err.endswith("; what it had written is removed\n"), err
    assert snapshot(tmp_path) == before


def test_a_capture_never_writes_through_a_link_that_leads_out_of_it(host, tmp_path):
    """The capture's own directories are the tool's; one that is a link out (made by someone else
    meanwhile) is refused before anything is written through it."""
    outside = outside_tree(tmp_path)
    out = tmp_path / "capture"
    out.mkdir()
    os.symlink(str(outside), str(out / "proc"))
    before = snapshot(outside)
    cap = capture_host.Capture(str(host), str(out))
    with pytest.raises(capture_host.CaptureError, match="proc/sys/kernel/osrelease leads out of the capture .* nothing more was written"):
        cap.copy_file("/proc/sys/kernel/osrelease")
    assert snapshot(outside) == before


OUTSIDE_MARK = b"OUTSIDE THE TREE"


def outside_tree(tmp_path):
    """What the capturing machine has beside the tree: a PCI device, a netdev, IOMMU groups and
    /etc files, each file marked OUTSIDE_MARK."""
    outside = tmp_path / "outside"
    dev = outside / "sys" / "devices" / "pci0000:99" / "0000:99:00.0"
    net = outside / "sys" / "devices" / "virtual" / "net" / "evil0"
    for folder in (dev, net, outside / "sys" / "kernel" / "iommu_groups" / "7" / "devices", outside / "etc" / "default",
                   outside / "etc" / "modprobe.d"):
        folder.mkdir(parents=True, exist_ok=True)
    for path in (dev / "vendor", dev / "device", dev / "class", net / "address", outside / "etc" / "default" / "grub",
                 outside / "etc" / "modprobe.d" / "secret.conf", outside / "sys" / "kernel" / "iommu_groups" / "7" / "type"):
        path.write_bytes(OUTSIDE_MARK + b"\n")
    os.symlink(str(dev), str(outside / "sys" / "kernel" / "iommu_groups" / "7" / "devices" / "0000:99:00.0"))
    return outside


def relink(path, target):
    """``path`` (a file, a directory or a link of the tree) replaced by a symlink to ``target``."""
    if os.path.islink(str(path)) or os.path.isfile(str(path)):
        os.unlink(str(path))
    elif os.path.isdir(str(path)):
        shutil.rmtree(str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, str(path))


# (what the tree has, how it is made: (host, outside) -> None)
LINKS_OUT = [
    ("a PCI device link climbing out (relative)", lambda host, outside: relink(
        host / "sys/bus/pci/devices/0000:99:00.0", "../../../../../outside/sys/devices/pci0000:99/0000:99:00.0")),
    ("a PCI device link climbing out (absolute)", lambda host, outside: relink(
        host / "sys/bus/pci/devices/0000:99:00.0", str(outside / "sys/devices/pci0000:99/0000:99:00.0"))),
    ("a netdev link climbing out (absolute)", lambda host, outside: relink(
        host / "sys/class/net/evil0", str(outside / "sys/devices/virtual/net/evil0"))),
    ("a netdev link climbing out (relative)", lambda host, outside: relink(
        host / "sys/class/net/evil0", "../../../../outside/sys/devices/virtual/net/evil0")),
    ("the IOMMU groups a link out", lambda host, outside: relink(host / "sys/kernel/iommu_groups", str(outside / "sys/kernel/iommu_groups"))),
    ("an edited directory a link out (absolute)", lambda host, outside: relink(host / "etc/modprobe.d", str(outside / "etc/modprobe.d"))),
    ("the directory of an edited file a link out (relative)", lambda host, outside: relink(host / "etc/default", "../../outside/etc/default")),
    ("an edited file's link out", lambda host, outside: relink(host / "etc/modprobe.d/x.conf", str(outside / "etc/modprobe.d/secret.conf"))),
    ("a link to itself", lambda host, outside: relink(host / "sys/bus/pci/devices/0000:97:00.0", "0000:97:00.0")),
    ("/sys a link to the machine's own /sys", lambda host, outside: relink(host / "sys", "/sys")),
    ("/proc a link to the machine's own /proc", lambda host, outside: relink(host / "proc", "/proc")),
]


@pytest.mark.parametrize("make", [case[1] for case in LINKS_OUT], ids=[case[0] for case in LINKS_OUT])
@pytest.mark.parametrize("out_name", ["capture", "capture.tar"])
def test_links_out_of_the_tree_read_and_write_nothing_outside_it(host, tmp_path, make, out_name):
    outside = outside_tree(tmp_path)
    (host / "etc" / "default").mkdir(parents=True, exist_ok=True)
    (host / "etc" / "default" / "grub").write_text('GRUB_CMDLINE_LINUX=""\n', encoding="utf-8")
    (host / "etc" / "modprobe.d").mkdir(parents=True, exist_ok=True)
    make(host, outside)
    out = tmp_path / out_name
    before = snapshot(tmp_path)
    assert capture_host.main(["--root", str(host), str(out)]) == 0
    after = snapshot(tmp_path)
    changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    assert changed and all(path == str(out) or path.startswith(str(out) + os.sep) for path in changed), changed
    if out_name.endswith(".tar"):
        unpacked = tmp_path / "unpacked"
        with tarfile.open(out) as tar:
            tar.extractall(unpacked)  # noqa: S202 - made by this test
        out = unpacked
    captured = snapshot(out)
    assert not [path for path, kind in captured.items() if kind[0] == "file" and OUTSIDE_MARK in kind[1]]
    real_out = os.path.realpath(str(out))
    for path, kind in captured.items():
        if kind[0] == "link":
            assert os.path.realpath(path).startswith(real_out + os.sep), (path, kind)
    # a link kept in the capture leads where it led in the tree: to nothing there
    model = read_topology(str(out), *LAB_IDS)
    assert "0000:99:00.0" not in model["pci_devices"] and model["netdevs"].get("evil0", {}).get("mac") is None


def test_absolute_links_of_a_mounted_image_lead_inside_it(host, tmp_path):
    """An absolute link of the tree (a mounted image of a host) is the host's own path: read and
    captured inside the tree, as the host resolves it, never as this machine's."""
    dev = "sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0"
    relink(host / "sys/bus/pci/devices/0000:81:00.0", "/" + dev)
    relink(host / "sys/class/net/ens3", "/sys/devices/pci0000:80/0000:80:02.0/0000:83:00.0/net/ens3")
    out = tmp_path / "capture"
    assert capture_host.main(["--root", str(host), str(out)]) == 0
    assert os.path.realpath(str(out / "sys/bus/pci/devices/0000:81:00.0")) == str(out / dev)
    model = read_topology(str(out), *LAB_IDS)
    assert model["pci_devices"]["0000:81:00.0"]["sriov_totalvfs"] == 4
    assert model["netdevs"]["ens3"]["pci_address"] == "0000:83:00.0"


def test_unreadable_files_are_skipped(host, tmp_path):
    if os.geteuid() == 0:
        unreadable = host / "proc" / "meminfo"
        os.unlink(unreadable)
        os.mkfifo(unreadable)  # not a regular file: skipped, never blocks
    else:
        unreadable = host / "proc" / "meminfo"
        unreadable.chmod(0)
    out = tmp_path / "out"
    assert capture_host.main(["--root", str(host), str(out)]) == 0
    assert not (out / "proc" / "meminfo").exists()
    assert (out / "proc" / "cmdline").exists()


def test_lab_fixture_after_the_boot_stage():
    """tests/fixtures/lab/iommu-on.tar: the lab after the boot stage's reboot (see its .source.txt)."""
    model = read_topology(lab_capture("iommu-on"), *LAB_IDS)
    assert "intel_iommu=on" in model["cmdline"] and "intel_iommu=off" not in model["cmdline"]
    assert model["iommu"]["enabled"] is True
    grouped = sorted(addr for members in model["iommu"]["groups"].values() for addr in members)
    assert grouped == sorted(model["pci_devices"])
    assert model["gpus"][0]["driver"] == "vfio-pci"
    assert model["gpus"][0]["iommu_group"] is not None
    assert model["numa_nodes"][1]["hugepages"]["2048kB"]["total"] == 64


def test_capture_of_the_dgx_tree_holds_the_edited_files(tmp_path):
    """The DGX A100-class tree (tests/tools/dgx_tree.py), with a defined domain and a
    modprobe.d file added, captured: the same host model, the GRUB defaults, the domain file,
    the GPUs' BARs and the VF layout come along."""
    spec = importlib.util.spec_from_file_location("dgx_tree", os.path.join(REPO_ROOT, "tests", "tools", "dgx_tree.py"))
    dgx_tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dgx_tree)
    src = tmp_path / "dgx"
    host, gpus, nics = dgx_tree.write_tree(str(src))
    host.write("/etc/libvirt/qemu/other.xml", "<domain type='kvm'><name>other</name></domain>")
    host.write("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau")
    out = tmp_path / "capture"
    assert capture_host.main(["--root", str(src), str(out)]) == 0
    assert without_root(read_topology(str(out))) == without_root(read_topology(str(src)))
    for path in ("etc/default/grub", "etc/os-release", "etc/libvirt/qemu/other.xml", "etc/modprobe.d/blacklist-nouveau.conf"):
        assert (out / path).read_text(encoding="utf-8") == (src / path).read_text(encoding="utf-8"), path
    gpu = out / "sys" / "bus" / "pci" / "devices" / gpus["GPU0"]
    bars = [line.split() for line in (gpu / "resource").read_text(encoding="utf-8").splitlines()]
    assert len(bars) == 13 and int(bars[1][1], 16) - int(bars[1][0], 16) + 1 == 64 << 30
    nic = out / "sys" / "bus" / "pci" / "devices" / nics["NIC0"]
    assert (nic / "sriov_offset").read_text(encoding="utf-8").strip() == "1"


def test_capture_takes_grub_dropins_the_collections_units_and_their_links(host, tmp_path):
    """What the boot stage reads beyond the files it edits: the GRUB drop-ins (a drop-in that sets
    the edited variable is refused), /etc/systemd/system itself (the hugepages unit is written
    there), the collection's units (by name, or by their header: the hugetlbfs .mount units) and
    their wants links; other units stay behind."""
    unit_dir = host / "etc" / "systemd" / "system"
    wants = unit_dir / "multi-user.target.wants"
    os.makedirs(str(wants))
    (host / "etc" / "default" / "grub.d").mkdir(parents=True)
    (host / "etc" / "default" / "grub.d" / "50-cloudimg-settings.cfg").write_text('GRUB_CMDLINE_LINUX_DEFAULT="console=tty1"\n')
    (unit_dir / "gpuvirt-hugepages.service").write_text("[Unit]\n")
    (unit_dir / "dev-hugepages1G.mount").write_text("# Written by gpuvirt.tenancy (hugepages module): hugetlbfs\n[Mount]\n")
    (unit_dir / "other.service").write_text("[Unit]\n")
    for name in ("gpuvirt-hugepages.service", "dev-hugepages1G.mount", "other.service"):
        os.symlink("/etc/systemd/system/" + name, str(wants / name))
    out = tmp_path / "capture"
    assert capture_host.main(["--root", str(host), str(out)]) == 0
    assert (out / "etc/default/grub.d/50-cloudimg-settings.cfg").read_text() == 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1"\n'
    kept = ["dev-hugepages1G.mount", "gpuvirt-hugepages.service", "multi-user.target.wants"]
    assert sorted(os.listdir(str(out / "etc/systemd/system"))) == kept
    links = out / "etc/systemd/system/multi-user.target.wants"
    assert sorted(os.listdir(str(links))) == ["dev-hugepages1G.mount", "gpuvirt-hugepages.service"]
    assert os.path.realpath(str(links / "gpuvirt-hugepages.service")) == str(out / "etc/systemd/system/gpuvirt-hugepages.service")
    # another root's programs are not run: no answers captured
    assert not (out / ".capture").exists()


def test_capture_runs_the_programs_the_preview_reads_from_root_slash_only(tmp_path, monkeypatch):
    """The programs and file names agree with what captured_programs reads, and a capture of /
    writes each found program's stdout (a stand-in on PATH here) and skips a missing one."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import captured_programs
    assert dict((name, candidates[0]) for name, candidates in capture_host.PROGRAMS) == captured_programs.PROGRAMS
    assert capture_host.OUTPUT_DIR == captured_programs.CAPTURE_DIR.lstrip("/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fixture = os.path.join(REPO_ROOT, "tests", "fixtures", "hypervisor", "libvirtd-version_ubuntu-22.04_libvirt-8.0.0.txt")
    (bin_dir / "libvirtd").write_text("#!/bin/sh\nexec /bin/cat %s\n" % fixture)
    os.chmod(str(bin_dir / "libvirtd"), 0o755)
    monkeypatch.setattr(capture_host, "SEARCH_PATH", str(bin_dir))
    monkeypatch.setenv("PATH", str(bin_dir))
    cap = capture_host.Capture("/", str(tmp_path / "out"))
    cap.programs()
    assert (tmp_path / "out" / ".capture" / "libvirtd-version.txt").read_text() == open(fixture, encoding="utf-8").read()
    assert not (tmp_path / "out" / ".capture" / "qemu-version.txt").exists()


# --------------------------------------------------------------------------- what the code reads
IB_PF, IB_RDMA = "0000:19:00.0", "mlx5_0"
# The reading process's own /proc/PID (host_usage looks for the controller's SSH connection in its
# ancestors' environment): no host state a capture could hold. .capture/: the programs' answers,
# written only when capturing / (test_capture_runs_the_programs_the_preview_reads_from_root_slash_only).
NOT_HOST_STATE = re.compile(r"^(/proc/[0-9]+(/|$)|/\.capture/)")


def dgx_with_an_ib_port_without_netdev(root):
    """The DGX A100-class tree (tests/tools/dgx_tree.py) with IB_PF's IPoIB netdev gone (IPoIB not
    loaded): its port's mode is only in infiniband/<dev>/ports/1/link_layer, as the RDMA core
    writes it. -> (GPU addresses, the ConnectX PFs that have SR-IOV)."""
    host, gpus, nics = load_dgx_tree().write_tree(root)
    pf_dir = host.p(host.pci_paths[IB_PF])
    for name in os.listdir(os.path.join(pf_dir, "net")):
        os.unlink(host.p("/sys/class/net/" + name))
    shutil.rmtree(os.path.join(pf_dir, "net"))
    host.write(host.pci_paths[IB_PF] + "/infiniband/%s/ports/1/link_layer" % IB_RDMA, "InfiniBand")
    pfs = sorted(a for a in nics.values() if os.path.exists(host.p(host.pci_paths[a] + "/sriov_totalvfs")))
    return sorted(gpus.values()), pfs


def stage_requests(gpus, pfs):
    """The boot and SR-IOV/VFIO stages' calls as the gate checks them in a preview: every part of
    each (kernel args, hugepages, the GPU host stack with its early driver and initramfs, the
    ConnectX firmware with the ports' link type; the VFs and the bindings)."""
    return {"boot": {"pre_bind_ids": ["10de:20b0"], "bootloader_update": "none",
                     "hugepages": {"pages": [{"size": "1G", "count": 4, "node": 1}]},
                     "gpu_stack": {"tenant_gpus": gpus, "early_driver": True, "initramfs": True},
                     "firmware": {"sriov_pfs": [{"pf": pf, "num_vfs": 4, "link_type": "eth"} for pf in pfs]}},
            "sriov_vfio": {"sriov_pfs": [{"pf": pf, "num_vfs": 4} for pf in pfs], "gpus": gpus}}


def read_as_the_preview(root, gpus, pfs):
    """What a preview reads under ``root``: the host model (topology.py, the captured programs),
    the port modes of the PFs (port_modes.py, from the model) and the gate's checks of the boot and
    SR-IOV/VFIO stages (every reader behind the host seam: kernel args, bootloader, early driver,
    hugepages, the host stack, firmware, VFs, bindings, devices in use). -> (the reads, what each
    part decided)."""
    fs = RecordingSysfs(root)
    model = TopologyReader(root, fs=fs).read()
    ports = port_modes.plan(model, [{"pf": pf, "num_vfs": 4, "link_type": "eth"} for pf in pfs], None)
    host = recording_host(root, commands=RecordedCommands())
    checks = check_stages(host, stage_requests(gpus, pfs), Run(check_mode=True, diff=True))
    decided = {"model": dict((k, v) for k, v in model.items() if k != "root"), "ports": ports,
               "checks": dict((stage, (check["error"], check["changed"], check["result"])) for stage, check in checks.items())}
    return set(fs.reads) | set(host.fs.reads), decided


FILE_READS = ("read", "read_bytes", "read_int", "read_error", "exists", "inside")
DIR_READS = ("listdir", "isdir")


def fill_in(root, reads):
    """Make each path a reader asked for that the tree lacks, as a host that has it would: a file
    ("0") for a file read or a file a module edits, a directory for a listing, and for a link a
    module makes itself (``inside`` without follow) a link to the file of its name one directory
    up (a systemd wants link to its unit). The tree's own links are not made up. -> the paths
    made."""
    real_root = os.path.realpath(root)
    made = []
    for method, path, follow in sorted(reads):
        if method not in FILE_READS + DIR_READS or NOT_HOST_STATE.match(path):
            continue
        real = os.path.realpath(os.path.join(root, path.lstrip("/")))
        if os.path.lexists(os.path.join(root, path.lstrip("/"))) or os.path.lexists(real):
            continue
        assert real.startswith(real_root + os.sep), (path, real)
        if os.path.isfile(os.path.dirname(real)):
            continue
        os.makedirs(os.path.dirname(real), exist_ok=True)
        if method in DIR_READS:
            os.makedirs(real)
        elif method == "inside" and not follow:
            os.symlink("../" + os.path.basename(real), real)
        else:
            with open(real, "w", encoding="utf-8") as handle:
                handle.write("0\n")
        made.append(path)
    return made


def answer(root, method, path, follow):
    """What ``method`` of the seam's reader answers for ``path`` under ``root``; for ``inside`` (a
    file a module reads to edit, or a link it makes), the file's bytes, the link's destination or
    that it is a directory."""
    fs = Sysfs(root)
    if method != "inside":
        return getattr(fs, method)(path)
    real = fs.inside(path, follow=follow)
    if not follow and os.path.islink(real):
        return ("link", fs.realpath(path))
    if os.path.isfile(real):
        with open(real, "rb") as handle:
            return ("file", handle.read())
    return ("dir",) if os.path.isdir(real) else None


def test_the_capture_holds_every_path_a_preview_reads(tmp_path):
    """Every path the preview's readers read (recorded through the host seam, not listed by hand),
    made where the tree lacks it, is one the capture copies: each read answers on the capture as
    on the tree."""
    root = str(tmp_path / "dgx")
    gpus, pfs = dgx_with_an_ib_port_without_netdev(root)
    reads, _decided = read_as_the_preview(root, gpus, pfs)
    assert ("read", "/sys/bus/pci/devices/%s/infiniband/%s/ports/1/link_layer" % (IB_PF, IB_RDMA), True) in reads
    assert fill_in(root, reads)
    out = str(tmp_path / "capture")
    assert capture_host.main(["--root", root, out]) == 0
    missed = sorted("%s %s: %r on the tree, %r on the capture" % (method, path, answer(root, method, path, follow), answer(out, method, path, follow))
                    for method, path, follow in reads
                    if not NOT_HOST_STATE.match(path) and answer(root, method, path, follow) != answer(out, method, path, follow))
    assert missed == []


def test_a_preview_of_the_capture_decides_as_one_of_the_tree(tmp_path):
    """The host model, the port modes (an IB port without netdev among them) and the gate's checks of
    the boot and SR-IOV/VFIO stages are the same on the capture as on the tree it was taken from."""
    root = str(tmp_path / "dgx")
    gpus, pfs = dgx_with_an_ib_port_without_netdev(root)
    out = str(tmp_path / "capture")
    assert capture_host.main(["--root", root, out]) == 0
    _reads, on_tree = read_as_the_preview(root, gpus, pfs)
    _reads, on_capture = read_as_the_preview(out, gpus, pfs)
    assert [(p["pf"], p["source"], p["changes"]) for p in on_capture["ports"] if p["pf"] == IB_PF] == [
        (IB_PF, "sysfs", [{"pf": IB_PF, "port": "port 1 (%s)" % IB_RDMA, "from": "IB", "to": "ETH"}])]
    assert on_capture["model"] == on_tree["model"]
    assert on_capture["ports"] == on_tree["ports"]
    assert json.loads(json.dumps(on_capture["checks"]).replace(out, "ROOT")) == json.loads(json.dumps(on_tree["checks"]).replace(root, "ROOT"))


def test_a_pf_without_sriov_offset_has_its_config_space_captured_and_read(host, tmp_path):
    """A kernel without sriov_offset/sriov_stride: the host model reads the VF offset and stride from
    the SR-IOV capability in the PF's config space, which the capture then copies (and only then),
    so the capture places the VFs as the host does. The space is laid out as the PCI Express
    specification places it (extended capabilities from 0x100, SR-IOV's First VF Offset at +0x14, VF
    Stride at +0x16), holding the lab PF's own TotalVFs (4), offset and stride as its capture reads them."""
    dev = host / "sys" / "devices" / "pci0000:80" / "0000:80:00.0" / "0000:81:00.0"
    layout = (read_topology(str(host), *LAB_IDS)["pci_devices"]["0000:81:00.0"]["sriov_offset"],
              read_topology(str(host), *LAB_IDS)["pci_devices"]["0000:81:00.0"]["sriov_stride"])
    for name in ("sriov_offset", "sriov_stride"):
        os.remove(dev / name)
    space = bytearray(4096)
    space[0x100:0x104] = (0x10 | 1 << 16).to_bytes(4, "little")  # SR-IOV, version 1, the last capability
    space[0x10e:0x110] = (4).to_bytes(2, "little")
    space[0x114:0x116] = layout[0].to_bytes(2, "little")
    space[0x116:0x118] = layout[1].to_bytes(2, "little")
    (dev / "config").write_bytes(bytes(space))
    model = read_topology(str(host), *LAB_IDS)["pci_devices"]["0000:81:00.0"]
    assert (model["sriov_offset"], model["sriov_stride"]) == layout
    out = tmp_path / "capture"
    assert capture_host.main(["--root", str(host), str(out)]) == 0
    assert (out / "sys" / "devices" / "pci0000:80" / "0000:80:00.0" / "0000:81:00.0" / "config").read_bytes() == bytes(space)
    captured = read_topology(str(out), *LAB_IDS)["pci_devices"]["0000:81:00.0"]
    assert (captured["sriov_offset"], captured["sriov_stride"]) == layout
