# -*- coding: utf-8 -*-
"""Bad device and tenant inputs (VF MACs and VLANs, sizes, half-done work): each ends
in a clear error naming the input and the fix, with no traceback, and changes nothing in the
world the module ran on (the host tree, the VF settings the ``ip`` stand-in keeps, libvirt's
domains). The list (``BAD_INPUTS``) is the second table of docs/reliability.md: ``python
tests/unit/plugins/modules/test_bad_inputs_devices.py`` writes it, and
``test_the_documented_table_is_this_list`` keeps them equal."""

from __future__ import annotations

import json
import os
import sys

import pytest

if __name__ == "__main__":  # run as a script to write the table
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

from conftest import LIBVIRT_TEST_URI, REPO_ROOT, run_module  # pylint: disable=import-error,wrong-import-position
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error,wrong-import-position
from fakes.doc_table import documented_block, write_block  # pylint: disable=import-error,wrong-import-position
from fakes.interrupt import tree_state  # pylint: disable=import-error,wrong-import-position
from fakes.kernel import cx4lx_no_acs_host, lab_host_with_vfs, v100_pairs_host  # pylint: disable=import-error,wrong-import-position
from fakes.paths import STANDINS  # pylint: disable=import-error,wrong-import-position

DOC = os.path.join(REPO_ROOT, "docs", "reliability.md")
BEGIN = "<!-- bad device and tenant inputs table: generated from tests/unit/plugins/modules/test_bad_inputs_devices.py -->"
END = "<!-- end of the bad device and tenant inputs table -->"
CX4_PF, CX4_PF2, CX4_VF = "0000:01:00.0", "0000:01:00.1", "0000:01:00.2"
LAB_PF, LAB_VF1, LAB_VF2 = "0000:81:00.0", "0000:81:00.1", "0000:81:00.2"
V100_A, V100_B = "0000:27:00.0", "0000:28:00.0"   # one IOMMU group (20)
HELD = "held-by-another"


# ---------------------------------------------------------------------------- worlds
def cx4_world(tmp_path, monkeypatch, conn):
    """The ConnectX-4 Lx tree with its 4 VFs, ``ip`` the stand-in (VF settings in a state file)."""
    del conn
    tree, kernel = cx4lx_no_acs_host(tmp_path / "root")
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", tree.root)
    monkeypatch.setenv("PATH", STANDINS + os.pathsep + os.environ["PATH"])
    # the VFs as the driver made them, written as the stand-in writes its state
    (tmp_path / "ip.json").write_text(json.dumps({"enp1s0f0np0": {"vfs": [dict(FRESH)] * 4}}))
    # the running host's (ip answers there; under a capture VF settings are not read)
    return tree.root, {"kernel": kernel, "live": True}


FRESH = {"mac": "00:00:00:00:00:00", "vlan": 0, "qos": 0, "spoofchk": False, "trust": False, "link_state": "auto"}


def cx4_vf0_mac_world(tmp_path, monkeypatch, conn):
    """The same, VF 0 of the PF already holding 52:54:00:aa:00:01 (an earlier call's)."""
    root, host = cx4_world(tmp_path, monkeypatch, conn)
    vfs = [dict(FRESH, mac="52:54:00:aa:00:01")] + [dict(FRESH)] * 3
    (tmp_path / "ip.json").write_text(json.dumps({"enp1s0f0np0": {"vfs": vfs}}))
    return root, host


def lab_world(tmp_path, monkeypatch, conn):
    """The lab tree with 2 VFs on its NVMe PF (each VF in its own IOMMU group)."""
    del monkeypatch, conn
    tree, kernel = lab_host_with_vfs(tmp_path / "root", num_vfs=2)
    return tree.root, {"kernel": kernel, "commands": RecordedCommands()}


def lab_groupless_world(tmp_path, monkeypatch, conn):
    """The lab tree, plus a GPU on nvidia that has no IOMMU group."""
    root, host = lab_world(tmp_path, monkeypatch, conn)
    tree = host["kernel"].host
    tree.add_pci("0000:84:00.0", "0x10de", "0x2330", "0x030200", parent="0000:80:02.0", numa_node=1, driver="nvidia")
    return root, host


def lab_dangling_group_world(tmp_path, monkeypatch, conn):
    """The lab tree, plus a GPU on nvidia whose iommu_group link names group 31, which the tree's
    /sys/kernel/iommu_groups lacks (a capture taken without that group)."""
    import shutil  # pylint: disable=import-outside-toplevel
    root, host = lab_groupless_world(tmp_path, monkeypatch, conn)
    tree = host["kernel"].host
    tree.set_iommu_group("0000:84:00.0", 31)
    shutil.rmtree(tree.p("/sys/kernel/iommu_groups/31"))
    return root, host


def v100_world(tmp_path, monkeypatch, conn):
    """The 6x V100 tree: GPUs in IOMMU groups of two."""
    del monkeypatch, conn
    tree, kernel = v100_pairs_host(tmp_path / "root")
    return tree.root, {"kernel": kernel, "commands": RecordedCommands()}


def v100_held_world(tmp_path, monkeypatch, conn):
    """The same, with a domain defined apart holding the first GPU of group 20."""
    root, host = v100_world(tmp_path, monkeypatch, conn)
    conn.defineXML("<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='i686'>hvm"
                   "</type></os><devices><hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x27' "
                   "slot='0x00' function='0x0'/></source></hostdev></devices></domain>" % HELD)
    return root, host


WORLDS = {"cx4": cx4_world, "cx4 (VF 0 has a MAC)": cx4_vf0_mac_world, "lab": lab_world, "lab (GPU with no group)": lab_groupless_world,
          "lab (GPU whose group link dangles)": lab_dangling_group_world,
          "v100": v100_world, "v100 (GPU held apart)": v100_held_world}


def tenant(name, **options):
    return dict({"name": name, "domain_type": "test", "arch": "i686", "firmware": "bios", "vcpus": 1, "memory_mb": 64}, **options)


def one(**options):
    return dict(tenant("bad-tenant", **options), uri=LIBVIRT_TEST_URI)


def vf_settings(*vfs, **pf):
    return {"pf": pf.get("pf", CX4_PF), "persist": False, "vfs": list(vfs)}


# (module, what is wrong, world, args, the message says)
BAD_INPUTS = [
    # 29.5: VF MACs and VLANs
    ("sriov_vfs", "all-zero MAC", "cx4", vf_settings({"index": 0, "mac": "00:00:00:00:00:00"}),
     "vfs[0].mac: 00:00:00:00:00:00 is the all-zero address"),
    ("sriov_vfs", "broadcast MAC", "cx4", vf_settings({"index": 0, "mac": "ff:ff:ff:ff:ff:ff"}), "is the broadcast address"),
    ("sriov_vfs", "multicast MAC", "cx4", vf_settings({"index": 0, "mac": "01:00:5e:00:00:01"}), "is a multicast address"),
    ("sriov_vfs", "MAC with a trailing newline", "cx4", vf_settings({"index": 0, "mac": "52:54:00:aa:00:01\n"}),
     "is not a MAC address"),
    ("sriov_vfs", "one MAC on two VFs of a PF", "cx4",
     vf_settings({"index": 0, "mac": "52:54:00:aa:00:01"}, {"index": 1, "mac": "52:54:00:AA:00:01"}),
     "MAC 52:54:00:aa:00:01 is given to vfs index 0 and vfs index 1"),
    ("sriov_vfs", "one MAC on VFs of two PFs of one call", "cx4",
     {"pfs": [vf_settings({"index": 0, "mac": "52:54:00:aa:00:01"}), vf_settings({"index": 0, "mac": "52:54:00:aa:00:01"}, pf=CX4_PF2)]},
     "pfs: MAC 52:54:00:aa:00:01 is given to pfs[0]"),
    ("sriov_vfs", "a MAC another VF of the PF keeps (a later call)", "cx4 (VF 0 has a MAC)",
     vf_settings({"index": 1, "mac": "52:54:00:aa:00:01"}), "already the MAC of VF 0 of PF 0000:01:00.0"),
    ("sriov_vfs", "VLAN 4095", "cx4", vf_settings({"index": 0, "vlan": 4095}), "vfs[0].vlan: 4095 is not a VLAN id"),
    ("sriov_vfs", "clear with a MAC", "cx4", vf_settings({"index": 0, "clear": True, "mac": "52:54:00:aa:00:01"}),
     "vfs[0].clear: clears the VF's MAC and VLAN"),
    ("tenant_domain", "all-zero MAC", "lab", one(vfs=[LAB_VF1], network_vfs=[LAB_VF1], mac="00:00:00:00:00:00"),
     "mac: 00:00:00:00:00:00 is the all-zero address"),
    ("tenant_domain", "VLAN 4095", "lab", one(vfs=[LAB_VF1], network_vfs=[LAB_VF1], vlan=4095), "vlan: 4095 is not a VLAN id"),
    ("tenant_domain", "one MAC on two tenants' VFs", "lab",
     {"uri": LIBVIRT_TEST_URI, "domains": [tenant("bad-a", vfs=[LAB_VF1], network_vfs=[LAB_VF1], mac="52:54:00:aa:00:02"),
                                           tenant("bad-b", vfs=[LAB_VF2], network_vfs=[LAB_VF2], mac="52:54:00:aa:00:02")]},
     "domains[1] (bad-b): MAC 52:54:00:aa:00:02 of VF 0000:81:00.2 is also the MAC of VF 0000:81:00.1 (bad-a)"),
    ("tenant_domain", "spoof check off without the tenant's opt-in", "cx4",
     {"uri": LIBVIRT_TEST_URI, "sriov_vfs": {"pfs": [vf_settings({"address": CX4_VF, "spoofchk": False})]},
      "domains": [tenant("bad-tenant", vfs=[CX4_VF])]},
     "spoof checking off for VF 0000:01:00.2 of tenant bad-tenant"),
    ("tenant_domain", "trust on without the tenant's opt-in", "cx4",
     {"uri": LIBVIRT_TEST_URI, "sriov_vfs": {"pfs": [vf_settings({"address": CX4_VF, "trust": True})]},
      "domains": [tenant("bad-tenant", vfs=[CX4_VF])]},
     "set relax_vf_isolation: true on that tenant"),
    # isolation where devices are assigned
    ("tenant_domain", "two GPUs of one IOMMU group to two tenants", "v100",
     {"uri": LIBVIRT_TEST_URI, "domains": [tenant("bad-a", gpus=[V100_A]), tenant("bad-b", gpus=[V100_B])]},
     "share IOMMU group 20: a group goes whole to one tenant or to none"),
    ("tenant_domain", "a GPU whose group mate another domain holds", "v100 (GPU held apart)", one(gpus=[V100_B]),
     "0000:28:00.0 (bad-tenant) and 0000:27:00.0 (domain held-by-another) share IOMMU group 20"),
    ("tenant_domain", "a PF to one tenant, its VF to another", "lab",
     {"uri": LIBVIRT_TEST_URI, "domains": [tenant("bad-a", vfs=[LAB_VF1]), tenant("bad-b", gpus=[LAB_PF])]},
     "domains[1] (bad-b): PF 0000:81:00.0 (bad-b) has VFs 0000:81:00.1, 0000:81:00.2 that stay with bad-a, the host"),
    ("tenant_domain", "a PF to a tenant, its VFs left to the host", "lab", one(gpus=[LAB_PF]),
     "that stay with the host: a PF and its VFs are never split"),
    # 29.6: sizes bound by the host (the lab tree: 4 CPUs, 2 x 64 GiB; the v100 tree has no NUMA nodes: libvirt's
    # capabilities answer, the test driver's 16 CPUs and 6 GiB)
    ("tenant_domain", "vcpus 100000", "lab", one(vcpus=100000), "vcpus: 100000 is more than the 4 CPUs of this host"),
    ("tenant_domain", "max_vcpus beyond the host", "lab", one(max_vcpus=64), "max_vcpus: 64 is more than the 4 CPUs"),
    ("tenant_domain", "1 PB of memory", "lab", one(memory_mb=1024 ** 3),
     "memory_mb: 1073741824 MiB is more than the 131072 MiB of memory this host has"),
    ("tenant_domain", "1 PB of memory (libvirt's host)", "v100", one(memory_mb=1024 ** 3),
     "memory_mb: 1073741824 MiB is more than the 6144 MiB of memory this host has"),
    # 29.7: half-done work
    ("vfio_bind", "GPU with no IOMMU group", "lab (GPU with no group)", {"devices": ["0000:84:00.0"]},
     "0000:84:00.0: no IOMMU group"),
    # 47.11: a captured GPU whose iommu_group link names a group the capture lacks, refused in check mode too
    ("vfio_bind", "GPU whose iommu_group link dangles", "lab (GPU whose group link dangles)", {"devices": ["0000:84:00.0"]},
     "0000:84:00.0: the iommu_group link names group 31, which /sys/kernel/iommu_groups does not hold"),
    ("tenant_domain", "a GPU whose iommu_group link dangles", "lab (GPU whose group link dangles)", one(gpus=["0000:84:00.0"]),
     "0000:84:00.0 (bad-tenant): the iommu_group link names group 31, which /sys/kernel/iommu_groups does not hold"),
    ("vfio_bind", "vendor:device id of three hex digits", "lab", {"ids": ["10d:2330"]}, "ids: '10d:2330' is not a vendor:device id"),
    ("tenant_domain", "two entries naming the same GPU", "v100",
     {"uri": LIBVIRT_TEST_URI, "domains": [tenant("bad-a", gpus=[V100_A]), tenant("bad-b", gpus=[V100_A])]},
     "domains[1] (bad-b): 0000:27:00.0 is also given to bad-a"),
    ("tenant_domain", "machine with a control character", "lab", one(machine="pc-q35\x01"), "machine: 'pc-q35\\x01' is not a name"),
    ("tenant_domain", "arch with a newline", "lab", one(arch="x86_64\n"), "arch: "),
    # 29.1: under a root, guest files go where guest_dir says, or nowhere
    ("tenant_domain", "guest_dir with '..'", "lab", one(image={"base": "/srv/base.qcow2"}, guest_dir="/var/lib/../.."),
     "guest_dir: /var/lib/../.. is not a normalised path (no '.', '..', '//' or trailing '/'); give /"),
    ("tenant_domain", "guest_dir with '..' (removal)", "lab", one(state="absent", guest_dir="/var/.."),
     "guest_dir: /var/.. is not a normalised path"),
]
# A conflict with a domain defined apart is a warning in check mode (a removal earlier in the run may free it).
RUN_ONLY = [("tenant_domain", "a GPU whose group mate another domain holds")]
CASES = [case + (check,) for case in BAD_INPUTS for check in (False, True) if not (check and case[:2] in RUN_ONLY)]


def module_of(name):
    return __import__("ansible_collections.gpuvirt.tenancy.plugins.modules." + name, fromlist=["main"])


def libvirt_state(conn):
    import libvirt  # pylint: disable=import-outside-toplevel
    return sorted((d.name(), d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), d.isActive()) for d in conn.listAllDomains(0))


def world_state(tmp_path, conn):
    return tree_state(str(tmp_path)), libvirt_state(conn)


@pytest.mark.parametrize("name, what, world, args, message, check_mode", CASES,
                         ids=["%s: %s%s" % (c[0], c[1], " (check mode)" if c[5] else "") for c in CASES])
def test_bad_input_is_a_clear_error_and_changes_nothing(tmp_path, monkeypatch, libvirt_conn, name, what, world, args, message,
                                                        check_mode):
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
    root, host_args = WORLDS[world](tmp_path, monkeypatch, libvirt_conn)
    host_class = LiveHost if host_args.pop("live", False) else Host
    try:
        before = world_state(tmp_path, libvirt_conn)
        result = run_module(module_of(name).main, dict(args), host=host_class(root, **host_args), check_mode=check_mode)
        assert result.get("failed") is True, (what, result)
        assert message in result["msg"], (what, result["msg"])
        assert "exception" not in result and "Traceback" not in result["msg"], result
        assert result["changed"] is False, result
        assert world_state(tmp_path, libvirt_conn) == before, what
    finally:
        if HELD in [d.name() for d in libvirt_conn.listAllDomains(0)]:
            libvirt_conn.lookupByName(HELD).undefine()


def render_table():
    lines = ["| module | bad input | outcome (message excerpt) |", "| --- | --- | --- |"]
    for name, what, _world, _args, message in BAD_INPUTS:
        lines.append("| %s | %s | error, nothing changed: `%s` |" % (name, what, message.replace("|", "\\|")))
    return "\n".join([BEGIN] + lines + [END])


def test_the_documented_table_is_this_list():
    assert documented_block(DOC, BEGIN, END) == render_table()


if __name__ == "__main__":
    write_block(DOC, BEGIN, END, render_table())
