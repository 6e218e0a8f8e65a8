# -*- coding: utf-8 -*-
"""Kernel command-line edit operations, over real command lines from tests/fixtures/boot."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args as ka
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import join_cmdline, split_cmdline
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids

BOOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "boot")


def real_cmdline(name):
    """The kernel command line of a fixture (a /proc/cmdline or a dmesg 'Command line:' line)."""
    with open(os.path.join(BOOT, name), encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"(?:Kernel )?[Cc]ommand line: (.*)", text)
    return split_cmdline(match.group(1) if match else text)


FEDORA = "proc-cmdline_fedora37_intel_iommu-on_iommu-pt_blacklist-nouveau.txt"
DEBIAN11 = "dmesg-kernel-command-line_debian11_intel_iommu-on.txt"
UBUNTU18 = "dmesg-kernel-command-line_ubuntu18.04_default_no-iommu.txt"


def test_real_cmdlines_split():
    assert real_cmdline(FEDORA)[-4:] == ["intel_iommu=on", "iommu=pt", "rd.driver.blacklist=nouveau",
                                         "modprobe.blacklist=nouveau"]
    assert "quite" in real_cmdline(FEDORA)  # the real typo survives: args are never "corrected"
    assert real_cmdline(UBUNTU18)[-3:] == ["quiet", "splash", "vt.handoff=7"]


@pytest.mark.parametrize("fixture, reboot", [
    (FEDORA, False),     # already intel_iommu=on iommu=pt
    (DEBIAN11, True),    # intel_iommu=on but no iommu=pt
    (UBUNTU18, True),    # stock: nothing
])
def test_iommu_pending_on_real_cmdlines(fixture, reboot):
    args = real_cmdline(fixture)
    missing, unwanted = ka.pending_changes(ka.iommu_ops("intel"), args)
    assert bool(missing or unwanted) is reboot
    after = ka.apply_ops(ka.iommu_ops("intel"), args)
    assert "intel_iommu=on" in after and "iommu=pt" in after
    # Everything else stays where it was, in order.
    assert [a for a in after if a not in ("intel_iommu=on", "iommu=pt")] == \
        [a for a in args if a not in ("intel_iommu=on", "iommu=pt")]


@pytest.mark.parametrize("before, vendor, iommu, passthrough, after", [
    ("ro intel_iommu=off quiet", "intel", True, None, "ro intel_iommu=on quiet iommu=pt"),
    ("ro intel_iommu=on,sm_on", "intel", True, True, "ro intel_iommu=on,sm_on iommu=pt"),
    ("ro intel_iommu=sm_on", "intel", True, False, "ro intel_iommu=on,sm_on"),
    ("ro intel_iommu=on iommu=pt", "intel", False, False, "ro intel_iommu=off"),
    ("ro amd_iommu=off iommu=nopt", "amd", True, None, "ro iommu=pt"),
    ("ro amd_iommu=off,fullflush", "amd", True, None, "ro amd_iommu=fullflush iommu=pt"),
    ("ro", "amd", True, True, "ro iommu=pt"),
    ("ro iommu=off", "intel", True, True, "ro iommu=pt intel_iommu=on"),  # replaced in place
    ("ro iommu=pt,soft", "intel", True, False, "ro iommu=soft intel_iommu=on"),
])
def test_iommu_ops(before, vendor, iommu, passthrough, after):
    ops = ka.iommu_ops(vendor, iommu, passthrough)
    assert join_cmdline(ka.apply_ops(ops, before.split())) == after
    assert ka.apply_ops(ops, after.split()) == after.split()


def test_iommu_ops_refuse():
    with pytest.raises(InputError, match="vendor"):
        ka.iommu_ops("arm")
    with pytest.raises(InputError, match="passthrough: true needs iommu: true"):
        ka.iommu_ops("intel", iommu=False, passthrough=True)


@pytest.mark.parametrize("before, ids, driver, after", [
    ("ro", ["1234:11e8"], "pci-stub", "ro pci-stub.ids=1234:11e8"),
    ("ro pci-stub.ids=10de:20b5", ["1234:11E8", "10de:20b5"], "pci-stub", "ro pci-stub.ids=10de:20b5,1234:11e8"),
    # the underscore spelling is the same parameter to the kernel; its spelling is kept
    ("ro pci_stub.ids=10DE:20B5", ["10de:20b5"], "pci-stub", "ro pci_stub.ids=10DE:20B5"),
    # two args of it: the kernel keeps the last one only; merged into one
    ("pci-stub.ids=aaaa:0001 x pci-stub.ids=bbbb:0002", ["cccc:0003"], "pci-stub", "pci-stub.ids=aaaa:0001,bbbb:0002,cccc:0003 x"),
    # ids move from the other driver, which keeps its other ids
    ("vfio-pci.ids=10de:20b5,15b3:101e", ["10de:20b5"], "pci-stub", "vfio-pci.ids=15b3:101e pci-stub.ids=10de:20b5"),
    ("pci-stub.ids=10de:20b5", ["10de:20b5"], "vfio-pci", "vfio-pci.ids=10de:20b5"),
    # gpuvirt_gpu_pci_ids as the host model reads it (vocabulary/pci_ids.py): 0x-prefixed ids too
    ("ro", ["0x10DE:0x20b5", "10de:20b5"], "vfio-pci", "ro vfio-pci.ids=10de:20b5"),
])
def test_pre_bind_ids(before, ids, driver, after):
    ops = ka.pre_bind_ops(ids, driver)
    assert join_cmdline(ka.apply_ops(ops, before.split())) == after
    assert ka.apply_ops(ops, after.split()) == after.split()


@pytest.mark.parametrize("bad", ["10de-20b5", "zzzz:1", "10de:20b", "10de:20b5:1", "", "0x10de", "0x0x10de:20b5", None])
def test_pre_bind_ids_malformed(bad):
    with pytest.raises(InputError, match=r"pre_bind_ids: .* is not a vendor:device pair"):
        ka.pre_bind_ops([bad], "pci-stub")


@pytest.mark.parametrize("value", ["10de:20b5", "10DE:20B5", "0x10de:0x20b5", "0X10DE:20b5", " 10de:20b5 ", "10de:20b",
                                   "10de-20b5", "0x10de", "10de:20b5:1", "", "x10de:20b5"])
def test_pre_bind_ids_read_as_the_host_model_reads_gpu_ids(value):
    # one reader of a vendor:device input: what the host model takes from gpuvirt_gpu_pci_ids, the boot stage takes
    try:
        vendor, device = pci_ids.parse_vendor_device(value.strip())
    except ValueError:
        with pytest.raises(InputError):
            ka.validate_pci_ids([value])
    else:
        assert ka.validate_pci_ids([value]) == ["%s:%s" % (vendor[2:], device[2:])]


@pytest.mark.parametrize("before, items, after", [
    ("ro quiet splash", [{"name": "quiet", "state": "absent"}], "ro splash"),
    ("ro console=tty0 console=ttyS0", [{"name": "console", "value": "ttyS0,115200"}], "ro console=ttyS0,115200"),
    ("ro console=tty0 console=ttyS0", [{"name": "console", "value": "tty0", "state": "absent"}], "ro console=ttyS0"),
    ("ro", [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "4"}], "ro hugepagesz=1G hugepages=4"),
    # the count that follows hugepagesz=1G is that size's, whatever order the sizes come in
    ("hugepagesz=2M hugepages=512 hugepagesz=1G hugepages=2 ro",
     [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "0:4,1:4"}],
     "hugepagesz=2M hugepages=512 hugepagesz=1G hugepages=0:4,1:4 ro"),
    ("hugepagesz=1024M ro", [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "2"}],
     "hugepagesz=1024M hugepages=2 ro"),
    ("hugepages=64 hugepagesz=1G hugepages=2", [{"name": "hugepages", "value": "128"}],
     "hugepages=128 hugepagesz=1G hugepages=2"),
    ("hugepagesz=2M hugepages=512 hugepagesz=1G hugepages=2 ro",
     [{"name": "hugepagesz", "value": "1G", "state": "absent"}], "hugepagesz=2M hugepages=512 ro"),
    ("hugepagesz=1G hugepages=2 ro",
     [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "state": "absent"}], "hugepagesz=1G ro"),
    ("default_hugepagesz=2M ro", [{"name": "default_hugepagesz", "value": "1G"}], "default_hugepagesz=1G ro"),
])
def test_args_ops(before, items, after):
    ops = ka.args_ops(items)
    assert join_cmdline(ka.apply_ops(ops, before.split())) == after
    assert ka.apply_ops(ops, after.split()) == after.split()


@pytest.mark.parametrize("items, message", [
    ([{"name": "quiet"}, {"name": "quiet", "state": "absent"}], "quiet is asked both present and absent"),
    ([{"name": "console", "value": "tty0"}, {"name": "console", "state": "absent"}], "asked both present and absent"),
    ([{"name": "mitigations", "value": "off"}, {"name": "mitigations", "value": "auto"}], "given twice"),
    ([{"name": "intel_iommu", "value": "on"}], "set by the iommu and vendor option"),
    ([{"name": "pci_stub.ids", "value": "10de:20b5"}], "pre_bind_ids"),
    ([{"name": "foo", "value": "a b"}], "holds characters"),
    ([{"name": "foo", "value": "$(reboot)"}], "holds characters"),
    ([{"name": "foo bar"}], "is not a kernel argument name"),
    ([{"name": "hugepagesz", "value": "huge"}], "not a size"),
    ([{"name": "hugepagesz", "value": "1G"}, {"name": "hugepagesz", "value": "1024M"}], "given twice"),
    ([{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "2"},
      {"name": "hugepagesz", "value": "1G", "state": "absent"}], "both present and absent"),
    ([{"name": "x", "state": "maybe"}], "is not present or absent"),
])
def test_args_ops_refuse(items, message):
    with pytest.raises(InputError, match=message):
        ka.args_ops(items)


def test_different_sizes_are_different_args():
    ops = ka.args_ops([{"name": "hugepagesz", "value": "2M", "state": "absent"},
                       {"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "2"}])
    assert ka.apply_ops(ops, "hugepagesz=2M hugepages=8 ro".split()) == ["ro", "hugepagesz=1G", "hugepages=2"]


@pytest.mark.parametrize("text, kb", [("2M", 2048), ("1G", 1048576), ("1024m", 1048576), ("2048K", 2048), ("x", None)])
def test_parse_size(text, kb):
    assert ka.parse_size_kb(text) == kb


ARG = st.one_of(
    st.sampled_from(["ro", "quiet", "splash", "intel_iommu=off", "intel_iommu=on", "intel_iommu=on,sm_on",
                     "iommu=pt", "iommu=nopt", "pci-stub.ids=10de:20b5", "vfio-pci.ids=1234:11e8,10de:20b5",
                     "hugepagesz=1G", "hugepagesz=2M", "hugepages=4", "hugepages=0:1,1:2", "amd_iommu=off"]),
    st.from_regex(r"\A[a-z][a-z0-9_.]{0,8}(=[a-z0-9:,/]{1,8})?\Z"),
)


@settings(max_examples=300, deadline=None)
@given(args=st.lists(ARG, max_size=12), vendor=st.sampled_from(["intel", "amd"]),
       ids=st.lists(st.sampled_from(["10de:20b5", "1234:11e8", "15b3:101e"]), max_size=3),
       driver=st.sampled_from(["pci-stub", "vfio-pci"]), extra=st.lists(st.sampled_from([
           [{"name": "quiet", "state": "absent"}],
           [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "0:2,1:2"}],
           [{"name": "hugepagesz", "value": "2M", "state": "absent"}],
           [{"name": "mitigations", "value": "auto"}]]), max_size=3, unique_by=lambda x: x[0]["name"] + str(x[0].get("value"))))
def test_ops_idempotent_and_complete(args, vendor, ids, driver, extra):
    items = [item for group in extra for item in group]
    try:
        ops = ka.iommu_ops(vendor) + ka.pre_bind_ops(ids, driver) + ka.args_ops(items)
    except InputError:
        return  # e.g. hugepagesz=2M absent and 1G present together is fine; conflicting input is not
    once = ka.apply_ops(ops, args)
    assert ka.apply_ops(ops, once) == once
    assert ka.pending_changes(ops, once) == ([], [])
    assert "iommu=pt" in once
    if vendor == "intel":
        assert "intel_iommu=off" not in once and any(a.startswith("intel_iommu=on") for a in once)
    else:
        assert "amd_iommu=off" not in once
    stub = [a for a in once if ka.arg_key(a) == ka.norm_name(ka.ID_PARAMS[driver])]
    if ids:
        assert len(stub) == 1 and set(ids) <= set(ka.arg_value(stub[0]).split(","))
    # Args no operation is about keep their relative order.
    touched = {"intel_iommu", "amd_iommu", "iommu", "pci_stub.ids", "vfio_pci.ids", "hugepagesz", "hugepages",
               "quiet", "mitigations"}
    assert [a for a in once if ka.arg_key(a) not in touched] == [a for a in args if ka.arg_key(a) not in touched]
