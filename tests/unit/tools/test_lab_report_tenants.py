# -*- coding: utf-8 -*-
"""lab/report.py's tenant lines: each domain's VFs as the lab host's kernel holds them (``ip link``
of the PF, read with the collection's parser) and, for a domain without a disk, no claim about a
guest. The ``ip link`` texts are real captures, each with its .source.txt: a ConnectX-4 PF with 8 VFs
left as made (tests/fixtures/rdma/), and the lab's igb PF with the VFs of tenant-a and tenant-b as the
SR-IOV/VFIO stage set them (tests/fixtures/lab/); the domain XML is the shape tenant_domain writes (a
hostdev interface with the VF's MAC and VLAN, managed='no')."""

from __future__ import annotations

import os

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
IP_LINK = os.path.join(REPO_ROOT, "tests", "fixtures", "rdma", "ip-link-show_pf-with-8-vfs_connectx4.txt")
LAB_IP_LINK = os.path.join(REPO_ROOT, "tests", "fixtures", "lab", "ip-link-show_igb-pf-with-tenant-vfs.txt")

DOMAIN = """<domain type='kvm'><name>%s</name><devices>%s
  <interface type='hostdev' managed='no'><mac address='52:54:00:6b:0a:01'/>
    <source><address type='pci' domain='0x0000' bus='0x%02x' slot='0x10' function='0x%x'/></source>
    <vlan><tag id='101'/></vlan></interface>
</devices></domain>"""
DISK = "<disk type='file' device='disk'><source file='/var/lib/libvirt/images/tenant-b.qcow2'/><target dev='vda'/></disk>"


def fake_ssh(ip_link_text, pf="0000:01:00.0 enp1s0np0", vfs=("0000:01:10.2", "0000:01:10.3"), indexes=(2, 3)):
    calls = []

    def ssh(command):
        calls.append(command)
        if "virsh list" in command:
            return "tenant-a\ntenant-b\n"
        if command.startswith("virsh dumpxml tenant-a"):
            return DOMAIN % ("tenant-a", "", int(vfs[0].split(":")[1], 16), int(vfs[0].split(".")[1]))
        if command.startswith("virsh dumpxml tenant-b"):
            return DOMAIN % ("tenant-b", DISK, int(vfs[1].split(":")[1], 16), int(vfs[1].split(".")[1]))
        if command.startswith("sh -c"):
            # what VF_SETTINGS_SH prints for each VF: its address, its PF and the PF's netdev, its index, then ip link
            return "".join("### %s %s %d\n%s" % (vf, pf, index, ip_link_text) for vf, index in zip(vfs, indexes))
        raise AssertionError("unexpected command %s" % command)
    return ssh, calls


def test_tenant_lines_give_the_hosts_vf_settings_and_no_guest_claim_for_a_diskless_domain(report, monkeypatch):
    with open(IP_LINK, encoding="utf-8") as handle:
        ssh, calls = fake_ssh(handle.read())
    monkeypatch.setattr(report, "ssh", ssh)
    assert report.tenant_lines(report.domains()) == [
        "  tenant-a: no guest OS (a domain without an image): SSH, kernel, RDMA device, GID index and exchanges not checked; "
        "host sets VF 0000:01:10.2 MAC 00:00:00:00:00:00 VLAN none spoof check OFF trust off",
        "  tenant-b: guest not checked over SSH; host sets VF 0000:01:10.3 MAC 00:00:00:00:00:00 VLAN none spoof check OFF trust off",
    ]
    # one read of the host for every VF, the VFs named as arguments
    script = [c for c in calls if c.startswith("sh -c")]
    assert len(script) == 1 and script[0].endswith(" sh 0000:01:10.2 0000:01:10.3")


def test_a_vf_whose_pf_the_host_does_not_show_reads_unknown(report, monkeypatch):
    ssh, _calls = fake_ssh("")
    monkeypatch.setattr(report, "ssh", ssh)
    lines = report.tenant_lines(report.domains())
    assert lines[0].endswith("host sets VF 0000:01:10.2 MAC unset VLAN none spoof check unknown trust unknown")


def test_tenant_lines_on_the_lab_read_back_each_tenants_mac_and_vlan(report, monkeypatch):
    with open(LAB_IP_LINK, encoding="utf-8") as handle:
        ssh, _calls = fake_ssh(handle.read(), pf="0000:84:00.0 ens12", vfs=("0000:84:10.0", "0000:84:10.2"), indexes=(0, 1))
    monkeypatch.setattr(report, "ssh", ssh)
    lines = report.tenant_lines(report.domains())
    assert lines[0].endswith("host sets VF 0000:84:10.0 MAC 52:54:00:a0:00:01 VLAN 101 spoof check on trust off")
    assert lines[1].endswith("host sets VF 0000:84:10.2 MAC 52:54:00:b0:00:01 VLAN 102 spoof check on trust off")
