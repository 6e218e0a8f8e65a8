# -*- coding: utf-8 -*-
"""Which packages of a list are not installed, in one dpkg-query for the list (its answer replayed
from the capture tests/fixtures/libvirt_service/debian12_dpkg_query_batch.json, see its .source.txt),
or rpm -q per package."""

from __future__ import annotations

import pytest

from fakes.commands import RecordedCommands, Reply  # pylint: disable=import-error
from fakes.packages import BATCH, DPKG_ARGV  # pylint: disable=import-error

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.packages import missing_packages, not_installed
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

ASKED = BATCH["argv"][3:]


def host_with(tmp_path, *replies, programs=()):
    return Host(str(tmp_path), commands=RecordedCommands(programs=programs, replies=replies))


def test_the_captured_query_names_the_packages_not_installed_in_the_order_asked(tmp_path):
    host = host_with(tmp_path, Reply(BATCH["argv"], BATCH["rc"], BATCH["out"], BATCH["err"]))
    assert ASKED == ["bash", "libvirt-daemon-system", "qemu-system-x86", "python3-libvirt", "libxml2-utils", "libc6", "rdma-core"]
    assert not_installed(host, "Debian", "dpkg-query", ASKED) == ["libvirt-daemon-system", "python3-libvirt", "rdma-core"]
    assert host.commands.calls == [BATCH["argv"]]


@pytest.mark.parametrize("asked, missing", [
    # asked with the architecture: by ${binary:Package} (libc6:amd64, Multi-Arch: same) or name:${Architecture}
    (["libc6:amd64", "libxml2-utils:amd64", "bash"], []),
    (["libc6:i386", "libc6"], ["libc6:i386"]),
])
def test_a_package_asked_with_its_architecture(tmp_path, asked, missing):
    # dpkg-query prints the same lines for a name asked with or without its architecture (the capture's lines)
    host = host_with(tmp_path, Reply(DPKG_ARGV + asked, BATCH["rc"], BATCH["out"], ""))
    assert not_installed(host, "Debian", "dpkg-query", asked) == missing


def test_nothing_asked_runs_nothing(tmp_path):
    host = host_with(tmp_path)
    assert not_installed(host, "Debian", "dpkg-query", []) == [] and host.commands.calls == []


def test_rpm_is_asked_per_package_by_its_exit_status(tmp_path):
    host = host_with(tmp_path, Reply(["rpm", "-q", "rdma-core"], 0, "rdma-core-51.0-1.el9.x86_64\n", ""),
                     Reply(["rpm", "-q", "perftest"], 1, "package perftest is not installed\n", ""), programs=["rpm"])
    assert missing_packages(host, {"RedHat": ["rdma-core", "perftest"]}) == {
        "family": "RedHat", "wanted": ["rdma-core", "perftest"], "missing": ["perftest"]}


@pytest.mark.parametrize("status, installed", [
    ("install ok installed", True),
    # held with apt-mark hold: dpkg-query -f '${Status} ${Version}' -W kubelet printed "hold ok installed 1.12.1-00"
    # (specinfra pull request 672, a report of a real held kubelet; InSpec fixed the same: inspec/inspec pull request 2087)
    ("hold ok installed", True),
    # removed without purge: its configuration files kept (https://github.com/inspec/inspec/issues/1092, PR 1111)
    ("deinstall ok config-files", False),
    # dpkg's other states, as its ${Status} words them (dpkg-query(1): want, error flag, status)
    ("install ok half-installed", False),
    ("install reinstreq half-installed", False),
    ("hold reinstreq installed", False),
    ("purge ok not-installed", False),
])
def test_a_package_is_installed_when_its_status_says_installed_whether_wanted_or_held(tmp_path, status, installed):
    # the captured query's line for bash with its ${Status} replaced
    line = [line for line in BATCH["out"].splitlines() if line.startswith("bash\t")][0].replace("install ok installed", status)
    host = host_with(tmp_path, Reply(DPKG_ARGV + ["bash"], 0, line + "\n", ""))
    assert not_installed(host, "Debian", "dpkg-query", ["bash"]) == ([] if installed else ["bash"])
