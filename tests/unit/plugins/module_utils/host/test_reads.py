# -*- coding: utf-8 -*-
"""host/reads.py: a read-only run's reads of the host recorded with a digest of each answer, and
made again (``read_again``; the program that makes them again on a host is test_read_again.py's). Over real trees in a temporary directory (the lab capture,
the SR-IOV lab tree with its FakeKernel) and libvirt's test driver: the same tree answers with the
same digests, a changed file changes exactly its read's digest, and a run that reads past the
seam, or reads one thing two ways, cannot answer for itself."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import reads
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.host_usage import HostUsage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

from conftest import LIBVIRT_TEST_URI as URI  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import lab_host_with_vfs  # pylint: disable=import-error

PF = "0000:81:00.0"
GPU = "0000:82:00.0"
GATE = {"firmware_tool": "none", "stage_checks": {"sriov_vfio": {"devices": [GPU], "vfs_of": [PF]}}}


@pytest.fixture
def lab(tmp_path):
    return lab_host_with_vfs(tmp_path / "root")


def host_of(lab):
    tree, kernel = lab
    return Host(tree.root, commands=RecordedCommands(programs=["ip"]), kernel=kernel)


def recorded_gate(lab, params=None):
    recorder = reads.Recorder()
    host = reads.record(host_of(lab), recorder)
    with recorder.guard():
        result = info.gate_result(dict(GATE, gpu_ids=[], nic_ids=[], **(params or {})), host, Run(check_mode=True))
    return result, recorder


def test_the_same_tree_answers_the_gates_reads_with_the_same_digests(lab):
    result, recorder = recorded_gate(lab)
    assert result["stage_checks"]["sriov_vfio"]["error"] is None
    outcome = recorder.result()
    assert outcome["answerable"], outcome["reasons"]
    parts = set(part for part, _calls in outcome["records"])
    assert parts == {"fs", "host"} and len(outcome["records"]) > 100
    assert reads.read_again(host_of(lab), outcome["records"]) == outcome["digests"]
    # each read once: the host model's thousands of reads are recorded as the distinct reads they are
    keys = [repr(record) for record in outcome["records"]]
    assert len(keys) == len(set(keys))


def test_a_changed_file_changes_its_reads_digest_and_no_other(lab):
    tree, _kernel = lab
    _result, recorder = recorded_gate(lab)
    outcome = recorder.result()
    tree.write("/sys/bus/pci/devices/%s/sriov_numvfs" % PF, "2")
    again = reads.read_again(host_of(lab), outcome["records"])
    changed = [reads.describe(record) for record, now, then in zip(outcome["records"], again, outcome["digests"]) if now != then]
    assert changed == ["fs.read('/sys/bus/pci/devices/%s/sriov_numvfs')" % PF]


def test_what_changes_by_itself_is_read_as_the_part_that_is_used(tmp_path):
    root = tmp_path / "root"
    os.makedirs(root / "proc")
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: %s\nflags\t\t: fpu vmx hypervisor\n"
    (root / "proc" / "cpuinfo").write_text(cpuinfo % "2100.000")
    recorder = reads.Recorder()
    host = reads.record(Host(str(root), commands=RecordedCommands()), recorder)
    assert host.fs.read_keys("/proc/cpuinfo", ("vendor_id", "flags")) == "vendor_id\t: GenuineIntel\nflags\t\t: fpu vmx hypervisor"
    (root / "proc" / "cpuinfo").write_text(cpuinfo % "3400.123")
    assert reads.read_again(Host(str(root)), recorder.records) == recorder.digests
    (root / "proc" / "cpuinfo").write_text((cpuinfo % "3400.123").replace("GenuineIntel", "AuthenticAMD"))
    assert reads.read_again(Host(str(root)), recorder.records) != recorder.digests


def test_the_vfio_holders_are_one_read_of_the_proc_fd_links(tmp_path):
    root = tmp_path / "root"
    for pid, links in (("300", {"3": "/dev/vfio/12", "4": "/dev/null"}), ("301", {"0": "/dev/pts/0"})):
        os.makedirs(root / "proc" / pid / "fd")
        for fd, target in links.items():
            os.symlink(str(root) + target, str(root / "proc" / pid / "fd" / fd))
    recorder = reads.Recorder()
    host = reads.record(Host(str(root)), recorder)
    assert host.fs.fd_links("/dev/vfio/") == [[300, "/dev/vfio/12"]]
    assert [reads.describe(record) for record in recorder.records] == ["fs.fd_links('/dev/vfio/')"]
    # another process comes and goes (the reader itself): the read answers the same
    os.makedirs(root / "proc" / "302" / "fd")
    os.symlink("/dev/null", str(root / "proc" / "302" / "fd" / "0"))
    assert reads.read_again(Host(str(root)), recorder.records) == recorder.digests


def test_the_ssh_sessions_server_address_is_read_without_its_client_port(tmp_path):
    root = tmp_path / "root"
    os.makedirs(root / "proc" / "300")
    (root / "proc" / "300" / "status").write_text("Name:\tpython3\nPPid:\t1\n")
    (root / "proc" / "300" / "environ").write_text("SSH_CONNECTION=192.0.2.1 51000 192.0.2.2 22\0")
    recorder = reads.Recorder()
    assert reads.record(Host(str(root)), recorder).fs.environ_field("SSH_CONNECTION", 2, 300) == "192.0.2.2"
    (root / "proc" / "300" / "environ").write_text("SSH_CONNECTION=192.0.2.1 51999 192.0.2.2 22\0")
    assert reads.read_again(Host(str(root)), recorder.records) == recorder.digests


def test_ip_addresses_are_read_without_their_lifetimes():
    def reply(lifetime):
        return ('[{"ifindex":2,"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.2.15","prefixlen":24,'
                '"valid_life_time":%d,"preferred_life_time":%d}]}]' % (lifetime, lifetime))
    first = Host("/", commands=RecordedCommands(replies=[(["ip", "-j", "addr", "show"], 0, reply(86391), "")]))
    second = Host("/", commands=RecordedCommands(replies=[(["ip", "-j", "addr", "show"], 0, reply(86302), "")]))
    assert first.ip_addresses_json() == second.ip_addresses_json() == \
        '[{"ifname": "eth0", "addr_info": [{"local": "10.0.2.15"}]}]'


def test_a_read_inside_a_read_is_the_outer_reads_and_an_error_is_an_answer(lab):
    recorder = reads.Recorder()
    host = reads.record(host_of(lab), recorder)
    assert host.fs.read_int("/sys/bus/pci/devices/%s/sriov_totalvfs" % PF) == 4
    with pytest.raises(InputError):
        host.read_text("/../../etc/shadow", "grub_file")
    assert [reads.describe(record) for record in recorder.records] == [
        "fs.read('/sys/bus/pci/devices/%s/sriov_totalvfs')" % PF, "host.read_text('/../../etc/shadow', 'grub_file')"]
    assert reads.read_again(host_of(lab), recorder.records) == recorder.digests


def test_a_read_past_the_seam_or_answered_two_ways_cannot_answer_for_the_run(lab, tmp_path):
    tree, _kernel = lab
    recorder = reads.Recorder()
    host = reads.record(host_of(lab), recorder)
    with recorder.guard():
        host.fs.read("/proc/cmdline")
        with open(os.path.join(tree.root, "proc", "cmdline"), encoding="utf-8") as handle:
            handle.read()
    assert recorder.result()["reasons"] == ["open(%s) past the seam" % os.path.join(tree.root, "proc", "cmdline")]
    assert not recorder.result()["answerable"]
    assert open is __builtins__["open"] if isinstance(__builtins__, dict) else open is __builtins__.open
    twice = reads.Recorder()
    host = reads.record(host_of(lab), twice)
    host.fs.read("/proc/cmdline")
    tree.write("/proc/cmdline", "quiet")
    host.fs.read("/proc/cmdline")
    assert twice.result()["reasons"] == ["fs.read('/proc/cmdline') answered two ways in one run"]
    del tmp_path


def test_libvirt_reads_are_recorded_and_made_again_on_the_test_driver(lab, libvirt_conn):
    recorder = reads.Recorder()
    host = reads.record(host_of(lab), recorder)
    with host.libvirt(URI) as conn:
        names = conn.domain_names()
        assert conn.domain(names[0]).is_active() is True
        assert conn.domain("no-such-tenant") is None
    assert [reads.describe(record) for record in recorder.records] == [
        "libvirt.open(%r)" % URI, "libvirt.open(%r).domain_names()" % URI,
        "libvirt.open(%r).domain(%r)" % (URI, names[0]), "libvirt.open(%r).domain(%r).is_active()" % (URI, names[0]),
        "libvirt.open(%r).domain('no-such-tenant')" % URI]
    assert reads.read_again(host_of(lab), recorder.records) == recorder.digests
    libvirt_conn.lookupByName(names[0]).destroy()
    again = reads.read_again(host_of(lab), recorder.records)
    assert [now == then for now, then in zip(again, recorder.digests)] == [True, True, True, False, True]


def test_a_libvirt_call_that_is_no_read_cannot_answer_for_the_run(lab, libvirt_conn):
    del libvirt_conn
    recorder = reads.Recorder()
    with reads.record(host_of(lab), recorder).libvirt(URI) as conn:
        conn.define  # pylint: disable=pointless-statement
    assert recorder.result()["reasons"] == ["libvirt define is not a read"]


def test_the_routes_are_read_without_their_use_counts(tmp_path):
    root = tmp_path / "root"
    os.makedirs(root / "proc" / "net")
    route = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
             "eth0\t00000000\t0202000A\t0003\t0\t%d\t100\t00000000\t0\t0\t0\n")
    ipv6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000002 " \
           "00000400 00000001 %08x 00000003 eth0\n"
    (root / "proc" / "net" / "route").write_text(route % 0)
    (root / "proc" / "net" / "ipv6_route").write_text(ipv6 % 7)
    recorder = reads.Recorder()
    usage = HostUsage(reads.record(Host(str(root)), recorder).fs, ssh_connection="")
    assert usage.default_route_netdevs() == ["eth0"]
    (root / "proc" / "net" / "route").write_text(route % 12)
    (root / "proc" / "net" / "ipv6_route").write_text(ipv6 % 4242)
    assert reads.read_again(Host(str(root)), recorder.records) == recorder.digests
    (root / "proc" / "net" / "route").write_text((route % 12).replace("eth0", "eth1"))
    assert reads.read_again(Host(str(root)), recorder.records) != recorder.digests


def test_a_read_whose_arguments_are_not_json_cannot_answer_for_the_run():
    commands = RecordedCommands(replies=[(["tool", "--stdin"], 0, "ok", "")])
    recorder = reads.Recorder()
    host = reads.record(Host("/", commands=commands), recorder)
    assert host.commands.run(["tool", "--stdin"], data=b"\x00\x01") == (0, "ok", "")
    assert recorder.result()["reasons"] == ["run takes arguments that are not JSON"] and recorder.records == []
