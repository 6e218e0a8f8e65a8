# -*- coding: utf-8 -*-
"""ACS per path (plugins/module_utils/boot/acs.py) on the DGX A100-class host of fakes.servers (its
PCIe tree as the real machine's sysfs has it: GPUs and ConnectX PFs under two levels of PCIe
switches per root complex), and its kernel argument (kernel_args.ConfigAcs), against the kernel's
documented ``pci=config_acs=`` (Documentation/admin-guide/kernel-parameters.txt: bit 6 first,
0/1/x) and the IOMMU groups' rule (drivers/iommu/iommu.c REQ_ACS_FLAGS)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import acs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args as ka
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from fakes.servers import build_dgx_a100_class  # pylint: disable=import-error


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("dgx"))
    host, gpus, nics = build_dgx_a100_class(root)
    model = Host(root).topology((), ())
    pfs = sorted(a for a in nics.values() if os.path.exists(host.p(host.pci_paths[a] + "/sriov_totalvfs")))
    return {"model": model, "gpus": sorted(gpus.values()), "pfs": pfs}


def test_the_flags_read_as_the_kernel_reads_them():
    # kernel-parameters.txt: "pci=config_acs=10x would ... enable P2P Request Redirect, disable
    # Translation Blocking, and leave Source Validation unchanged"
    assert acs.bit_values("10x") == {0: "x", 1: "0", 2: "1", 3: "x", 4: "x", 5: "x", 6: "x"}
    default = acs.bit_values(acs.DEFAULT_FLAGS)
    assert default[6] == "1" and default[1] == "0"  # Direct Translated P2P on, Translation Blocking off
    assert [bit for bit in range(7) if default[bit] != "x"] == [1, 6]
    for bad in ("", "2", "11111111", "1x1 0", None, "on"):
        with pytest.raises(InputError, match="acs.flags: .* is not a config_acs flag string"):
            acs.check_flags(bad)


def test_each_gpu_gets_the_bridges_of_its_path_to_its_nearest_pf_and_no_other(dgx):
    model, pci = dgx["model"], dgx["model"]["pci_devices"]
    plan = acs.acs_plan(model, dgx["gpus"], dgx["pfs"], release="6.12.0-55-generic")
    assert plan["paths"] and {p["gpu"] for p in plan["paths"]} == set(dgx["gpus"])
    for path in plan["paths"]:
        gpu, pf = pci[path["gpu"]], pci[path["pf"]]
        common = next(b for b in gpu["upstream"] if b in pf["upstream"])
        # below the bridge the two share, every bridge of both chains, nothing above it
        assert sorted(path["bridges"]) == sorted(gpu["upstream"][:gpu["upstream"].index(common)]
                                                 + pf["upstream"][:pf["upstream"].index(common)])
        assert gpu["root_bus"] == pf["root_bus"]
        # the planner's pair: no PF of the host is nearer to this GPU
        lengths = [len(acs.path_bridges(pci, path["gpu"], other)) for other in dgx["pfs"]
                   if acs.path_bridges(pci, path["gpu"], other) is not None]
        assert len(acs.path_bridges(pci, path["gpu"], path["pf"])) == min(lengths)
    on_paths = set(b for p in plan["paths"] for b in p["bridges"])
    assert set(plan["bridges"]) == on_paths
    # never the root ports or the bridges above the shared switch, never a bridge of no path
    assert all(pci[b]["is_bridge"] for b in on_paths)
    above = set(b for p in plan["paths"] for b in pci[p["gpu"]]["upstream"][-2:])
    assert not on_paths & above
    assert set(a for a, dev in pci.items() if dev.get("is_bridge")) - on_paths


def test_only_the_tenants_devices_count(dgx):
    pci = dgx["model"]["pci_devices"]
    one = acs.acs_plan(dgx["model"], dgx["gpus"][:1], dgx["pfs"], release="6.12.0")
    every = acs.acs_plan(dgx["model"], dgx["gpus"], dgx["pfs"], release="6.12.0")
    assert set(one["bridges"]) < set(every["bridges"])
    assert set(one["bridges"]) <= set(pci[dgx["gpus"][0]]["upstream"]) | set(
        b for p in one["paths"] for b in pci[p["pf"]]["upstream"])
    # a GPU and a PF under different host bridges have no peer path (the traffic crosses the CPU)
    far = [pf for pf in dgx["pfs"] if pci[pf]["root_bus"] != pci[dgx["gpus"][0]]["root_bus"]][0]
    assert acs.path_bridges(pci, dgx["gpus"][0], far) is None
    nothing = acs.acs_plan(dgx["model"], dgx["gpus"][:1], [far], release="6.12.0")
    assert nothing["bridges"] == [] and nothing["arg"] is None and "no bridge to set" in nothing["notes"][0]


@pytest.mark.parametrize("release, words", [
    ("5.15.0-91-generic", ["has no pci=config_acs=", "Linux 6.11", "setpci"]),
    (None, ["(unknown)", "Linux 6.11"]),
    # a list needs 6.15 (or a stable kernel with the fix, which the version does not tell)
    ("6.12.0-55-generic", ["Linux 6.15", "running kernel is 6.12.0-55-generic", "in single quotes", "setpci"]),
    ("6.14.11", ["Linux 6.15", "PCI/ACS: Fix pci=config_acs= parameter"]),
])
def test_what_is_not_written_is_said_with_what_to_do(dgx, release, words):
    # on a host whose boot menu may get the list (list_refused None): only the kernel keeps it back
    plan = acs.acs_plan(dgx["model"], dgx["gpus"][:1], dgx["pfs"], release=release)
    assert plan["written"] is False and len(plan["bridges"]) > 1
    assert plan["arg"] == "pci=config_acs=" + ";".join("1xxxx0x@%s" % b for b in plan["bridges"])
    assert len(plan["notes"]) == 1 and all(w in plan["notes"][0] for w in words), plan["notes"]


def test_flags_that_would_merge_iommu_groups_across_tenants_are_refused(dgx):
    for bit in acs.ISOLATION_BITS:
        flags = "".join("0" if 6 - i == bit else "x" for i in range(7))
        with pytest.raises(InputError, match="acs.flags: .* turns off %s on .* one IOMMU group" % acs.BITS[bit]):
            acs.acs_plan(dgx["model"], dgx["gpus"], dgx["pfs"], flags=flags, release="6.15.0")
    # bits the groups do not depend on (Egress Control, Translation Blocking, Direct Translated P2P) pass
    assert acs.acs_plan(dgx["model"], dgx["gpus"], dgx["pfs"], flags="10xxx0x", release="6.15.0")["bridges"]


def test_unknown_devices_are_named(dgx):
    with pytest.raises(InputError, match="acs.gpus: 0000:ff:00.0 not in the host model"):
        acs.acs_plan(dgx["model"], ["0000:ff:00.0"], dgx["pfs"])


def test_the_kernel_argument_is_one_config_acs_and_leaves_other_pci_args():
    op = ka.ConfigAcs("1xxxx0x@0000:12:00.0")
    assert op.apply(["quiet"]) == ["quiet", "pci=config_acs=1xxxx0x@0000:12:00.0"]
    assert op.apply(["pci=realloc", "pci=config_acs=0@0000:01:00.0", "ro", "pci=config_acs=1@0000:02:00.0"]) == [
        "pci=realloc", "pci=config_acs=1xxxx0x@0000:12:00.0", "ro"]
    assert op.apply(["pci=config_acs=1xxxx0x@0000:12:00.0"]) == ["pci=config_acs=1xxxx0x@0000:12:00.0"]
    missing, unwanted = ka.pending_changes([op], ["pci=realloc"])
    assert missing == ["pci=config_acs=1xxxx0x@0000:12:00.0"] and unwanted == []
    assert ka.SAFE_ARG_RE.match("config_acs=1xxxx0x@0000:12:00.0")


def test_a_list_is_written_from_linux_6_15_where_the_boot_menu_takes_it_and_said_where_not(dgx):
    plan = acs.acs_plan(dgx["model"], dgx["gpus"][:1], dgx["pfs"], release="6.15.0-1-amd64")
    assert len(plan["bridges"]) > 1 and plan["written"] is True and plan["notes"] == []
    assert plan["arg"] == "pci=config_acs=" + ";".join("1xxxx0x@%s" % b for b in plan["bridges"])
    refused = acs.acs_plan(dgx["model"], dgx["gpus"][:1], dgx["pfs"], release="6.15.0", list_refused="this is a RHEL-family host")
    assert refused["written"] is False and refused["arg"] == plan["arg"]
    assert len(refused["notes"]) == 1 and all(w in refused["notes"][0] for w in (
        plan["arg"], "end of a command", "this is a RHEL-family host", "by hand", "/proc/cmdline", "setpci")), refused["notes"]


def test_one_bridge_needs_linux_6_11_only_and_no_quoting():
    # a GPU and a PF on the two functions' ports of one root complex: one bridge, the root port above the GPU
    pci = {"0000:00:01.0": {"is_bridge": True, "upstream": [], "root_bus": "0000:00"},
           "0000:01:00.0": {"upstream": ["0000:00:01.0"], "root_bus": "0000:00"},
           "0000:00:02.0": {"upstream": [], "root_bus": "0000:00"}}
    plan = acs.acs_plan({"pci_devices": pci}, ["0000:01:00.0"], ["0000:00:02.0"], release="6.11.0",
                        list_refused="this is a RHEL-family host")
    assert plan["bridges"] == ["0000:00:01.0"] and plan["written"] is True
    assert plan["arg"] == "pci=config_acs=1xxxx0x@0000:00:01.0"
