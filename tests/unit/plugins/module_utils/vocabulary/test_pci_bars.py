# -*- coding: utf-8 -*-
"""The 64-bit MMIO window of a UEFI tenant, from the BARs in each device's sysfs ``resource``.

The BAR sizes are the A100's (DESIGN.md, field facts): BAR0 16 MiB (32-bit), BAR1 64 GiB on the
40GB card and 128 GiB on the 80GB card, BAR3 32 MiB (both 64-bit prefetchable); the files are
written in the kernel's format by fakes.host_tree.write_resource."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_bars
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

from fakes.host_tree import (BAR_IO, BAR_MEM32, BAR_MEM64_PREFETCH, BAR_ROM, FakeHost,  # pylint: disable=import-error
                             write_resource)

MIB, GIB = 1 << 20, 1 << 30


def a100(bar1_gib, base):
    """The resources of an A100 (SXM4): BAR0, BAR1, BAR3, an I/O BAR and the ROM."""
    return {0: (0xF0000000 + (base << 24), 16 * MIB, BAR_MEM32), 1: (base << 38, bar1_gib * GIB, BAR_MEM64_PREFETCH),
            3: ((base << 38) + bar1_gib * GIB, 32 * MIB, BAR_MEM64_PREFETCH), 5: (0x4000 + base * 0x80, 0x80, BAR_IO),
            6: (0xF1000000, 512 * 1024, BAR_ROM)}


# a ConnectX-6 Dx VF: one 64-bit prefetchable BAR of 2 MiB
CX6_VF = {0: (0x20000000000, 2 * MIB, BAR_MEM64_PREFETCH)}
# its PF: BAR0 32 MiB, and its VFs' BAR in the SR-IOV resources (line 7): not the PF's own
CX6_PF = {0: (0x21000000000, 32 * MIB, BAR_MEM64_PREFETCH), 7: (0x22000000000, 16 * 2 * MIB, BAR_MEM64_PREFETCH)}


@pytest.fixture
def tree(tmp_path):
    host = FakeHost(tmp_path)
    devices = {"0000:07:00.0": a100(64, 1), "0000:0f:00.0": a100(64, 2), "0000:47:00.0": a100(128, 3),
               "0000:4e:00.0": a100(128, 4), "0000:0c:00.0": CX6_PF, "0000:0c:00.2": CX6_VF}
    for address, bars in devices.items():
        host.add_pci(address, "0x10de", "0x20b0", "0x030200")
        write_resource(host, address, bars)
    return Sysfs(str(tmp_path))


@pytest.mark.parametrize("address, sizes", [
    ("0000:07:00.0", [64 * GIB, 32 * MIB]),           # A100 40GB: BAR1 and BAR3; BAR0 (32-bit), I/O and ROM are not
    ("0000:47:00.0", [128 * GIB, 32 * MIB]),          # A100 80GB
    ("0000:0c:00.2", [2 * MIB]),                       # a ConnectX VF
    ("0000:0c:00.0", [32 * MIB]),                      # its PF: the SR-IOV BAR (its VFs') is not its own
    ("0000:99:00.0", None),                            # no such device: no resource file
])
def test_the_64bit_prefetchable_bars_of_a_device(tree, address, sizes):
    assert pci_bars.read_mmio64_sizes(tree, address) == sizes


@pytest.mark.parametrize("devices, window_mb", [
    (["0000:07:00.0"], 128 * 1024),                                   # 64 GiB + 32 MiB + headroom -> 128 GiB
    (["0000:47:00.0"], 256 * 1024),                                   # 128 GiB + 32 MiB + headroom -> 256 GiB
    (["0000:07:00.0", "0000:0f:00.0"], 256 * 1024),                   # two 40GB cards
    (["0000:47:00.0", "0000:4e:00.0", "0000:0c:00.2"], 512 * 1024),   # two 80GB cards and a VF
    (["0000:0c:00.2"], None),                                         # a VF alone: OVMF's 32 GiB default is enough
    ([], None),
])
def test_the_window_holds_the_devices_bars(tree, devices, window_mb):
    sizes = [size for address in devices for size in pci_bars.read_mmio64_sizes(tree, address)]
    assert pci_bars.window_setting_mb(sizes) == window_mb
    if window_mb:
        # a power of two at least the BARs and the headroom
        assert window_mb & (window_mb - 1) == 0
        assert window_mb * MIB >= sum(sizes) + pci_bars.HEADROOM_MB * MIB


@pytest.mark.parametrize("count, window_mb", [(1, 256 * 1024), (2, 512 * 1024), (4, 1024 * 1024), (8, 2048 * 1024)])
def test_eight_80gb_cards(count, window_mb):
    assert pci_bars.window_setting_mb([128 * GIB, 32 * MIB] * count) == window_mb


@pytest.mark.parametrize("sizes, packed", [
    ([32 * MIB, 64 * GIB], 64 * GIB + 32 * MIB),     # largest first, then each at its own alignment
    ([1 * MIB, 4 * MIB, 2 * MIB], 7 * MIB),
    ([3 * MIB, 4 * MIB], 7 * MIB),                   # a size that is not a power of two is aligned to the next one
])
def test_packing_aligns_each_bar_to_its_size(sizes, packed):
    assert pci_bars.packed_size(sizes) == packed


def test_the_window_never_exceeds_what_ovmf_takes():
    assert pci_bars.window_setting_mb([8 * 1024 * GIB] * 3) == pci_bars.MAX_WINDOW_MB


@pytest.mark.parametrize("text, bars", [
    ("", []),
    ("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", []),
    ("garbage\n0x00000000f6000000 0x00000000f6ffffff 0x0000000000040200\n",
     [{"index": 1, "start": 0xF6000000, "end": 0xF6FFFFFF, "size": 16 * MIB, "flags": BAR_MEM32}]),
])
def test_parse_resource(text, bars):
    assert pci_bars.parse_resource(text) == bars


@pytest.mark.parametrize("damage", [
    lambda text: "",                                           # empty
    lambda text: "\n".join(text.split("\n")[:3]),              # truncated to three lines
    lambda text: text[:len(text) // 2],                        # cut in the middle of a line
    lambda text: "garbage\n" * 13,                             # garbage
    lambda text: text.replace("0x", "0X", 1),                  # not the kernel's format
    lambda text: "0x0000000000000002 0x0000000000000001 0x0000000000040200" + text[text.index("\n"):],  # ends first
])
def test_a_resource_file_that_is_not_whole_reads_as_unknown_not_as_no_bars(tmp_path, damage):
    """None, as for a missing file, so that the tenant's MMIO window warns instead of staying at
    OVMF's default for a GPU whose 64 GiB BAR was not read."""
    host = FakeHost(tmp_path)
    host.add_pci("0000:07:00.0", "0x10de", "0x20b0", "0x030200")
    write_resource(host, "0000:07:00.0", a100(64, 1))
    path = host.p(host.pci_paths["0000:07:00.0"] + "/resource")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(damage(text))
    assert pci_bars.read_mmio64_sizes(Sysfs(str(tmp_path)), "0000:07:00.0") is None


def test_the_kernels_resource_files_are_whole(tree):
    for address in ("0000:07:00.0", "0000:0c:00.2"):
        assert pci_bars.is_resource_file(tree.read("/sys/bus/pci/devices/%s/resource" % address))


# --------------------------------------------------------------------------- AMD: the window above the HyperTransport hole
GIB = 1 << 30
TIB = 1 << 40


def test_ovmf_on_amd_with_40_address_bits_puts_its_window_in_the_hole():
    """QEMU's default 40 address bits count as known on AMD (edk2's PlatformAddressWidthFromCpuid): the
    dynamic window is the top eighth of 1 TiB, 0xe000000000-0xffffffffff, over the HyperTransport hole."""
    base, size = pci_bars.ovmf_window(pci_bars.OVMF_DEFAULT_MB, 4 * GIB + 64 * GIB, 40)
    assert (base, size) == (0xE000000000, 128 * GIB)
    assert pci_bars.overlaps_ht_hole(base, size)


@pytest.mark.parametrize("bits", [41, 42, 43, 44, 46, 48, 52, None])
@pytest.mark.parametrize("ram_top", [4 * GIB + 64 * GIB, 4 * GIB + 900 * GIB, 4 * GIB + 1536 * GIB])
@pytest.mark.parametrize("needed", [None, 131072, 262144, 2 << 20])
def test_the_amd_window_lies_above_the_hole_whichever_way_ovmf_places_it(bits, ram_top, needed):
    """The window asked for on an AMD host (at least 1 TiB) lies wholly above 0xffffffffff for every
    guest address width of 41 bits or more (the dynamic window) and without one (the classic window,
    after RAM, aligned to its size), whatever the guest's RAM."""
    window = pci_bars.window_above_ht_hole_mb(needed)
    assert window >= (needed or 0) and window >= 1 << 20
    base, size = pci_bars.ovmf_window(window, ram_top, bits)
    assert base > pci_bars.HT_HOLE[1] and not pci_bars.overlaps_ht_hole(base, size)
    assert base >= ram_top and size >= (needed or 0) * pci_bars.MIB


def test_a_window_that_ovmf_would_place_below_1tib_is_what_the_rule_replaces():
    """Without the rule, a window smaller than an eighth of a 40-bit space (64 GiB) lands in the hole;
    with it, the window is 1 TiB and OVMF puts it at 1 TiB exactly (classic: aligned to its size)."""
    assert pci_bars.overlaps_ht_hole(*pci_bars.ovmf_window(65536, 68 * GIB, 40))
    assert pci_bars.ovmf_window(pci_bars.window_above_ht_hole_mb(131072), 68 * GIB, 43) == (TIB, TIB)
    assert not pci_bars.overlaps_ht_hole(0xFC00000000, 4 * GIB) and pci_bars.overlaps_ht_hole(0xFC00000000, 4 * GIB + 1)
