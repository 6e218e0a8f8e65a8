# -*- coding: utf-8 -*-
"""tools/capture_host.py: a capture reads like the host it was taken from, holds the files the
collection edits, and the
bare lab capture (tests/fixtures/lab/bare) holds the lab's topology."""

from __future__ import annotations

import importlib.util
import os
import tarfile

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LAB_BARE = os.path.join(REPO_ROOT, "tests", "fixtures", "lab", "bare")
LAB_IDS = (["1234:11e8"], ["1b36:0010"])


def load_tool():
    spec = importlib.util.spec_from_file_location("capture_host", os.path.join(REPO_ROOT, "tools", "capture_host.py"))
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
    assert "unit test" in (out / ".source.txt").read_text(encoding="utf-8")
    dev = out / "sys" / "devices" / "pci0000:80" / "0000:80:00.0" / "0000:81:00.0"
    assert not (dev / "config").exists()
    assert not os.path.lexists(dev / "subsystem_loop")
    assert not os.path.lexists(out / "sys" / "bus" / "pci" / "loop")
    # Links stay relative, so the capture can move.
    link = out / "sys" / "bus" / "pci" / "devices" / "0000:81:00.0"
    assert not os.path.isabs(os.readlink(link))


def test_capture_refuses_a_non_empty_directory(host, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "something").write_text("x", encoding="utf-8")
    assert capture_host.main(["--root", str(host), str(out)]) == 2
    assert sorted(os.listdir(out)) == ["something"]


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
    """tests/fixtures/lab/iommu-on: the lab after the boot stage's reboot (see its .source.txt)."""
    model = read_topology(os.path.join(REPO_ROOT, "tests", "fixtures", "lab", "iommu-on"), *LAB_IDS)
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
