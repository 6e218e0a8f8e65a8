# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory BARs of PCI devices (sysfs ``resource``) and the 64-bit MMIO window a UEFI
guest needs for the devices it is given.

``/sys/bus/pci/devices/<address>/resource`` has one line per resource, ``start end flags`` as
``0x%016llx`` each (drivers/pci/pci-sysfs.c ``resource_show``): lines 0-5 are the standard
BARs, 6 the expansion ROM, 7-12 the SR-IOV BARs of a PF (what its VFs use, not the PF), and an
unassigned resource reads all zeros. The flags are the kernel's ``IORESOURCE_*`` bits
(include/linux/ioport.h). A 64-bit prefetchable BAR is what OVMF places in its 64-bit PCI
aperture (a 64-bit non-prefetchable BAR is degraded to the 32-bit window by OVMF's PCI bus
driver); an A100's BAR1 (64 or 128 GiB) and BAR3 (32 MiB) are such BARs, its BAR0 (16 MiB)
is a 32-bit one.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

IORESOURCE_IO = 0x00000100
IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
IORESOURCE_MEM_64 = 0x00100000
STANDARD_BARS = 6
MIB = 1 << 20
# OVMF's 64-bit PCI aperture when nothing asks for more (PcdPciMmio64Size, 32 GiB in the
# edk2 releases of Debian 12 and 13); a smaller window is never asked for.
OVMF_DEFAULT_MB = 32 * 1024
# Room next to the devices' BARs: the small 64-bit BARs of emulated devices and what OVMF
# reserves on PCIe root ports for hot-plug.
HEADROOM_MB = 2 * 1024
# The most X-PciMmio64Mb that edk2 accepts (16 TiB).
MAX_WINDOW_MB = 0x1000000
RESOURCE_LINE = re.compile(r"^0x[0-9a-f]{16} 0x[0-9a-f]{16} 0x[0-9a-f]{16}\Z")


def parse_resource(text):
    """``resource`` text -> [{index, start, end, size, flags}] of the assigned or sized
    resources (all-zero lines left out)."""
    bars = []
    for index, line in enumerate((text or "").splitlines()):
        fields = line.split()
        if len(fields) != 3:
            continue
        try:
            start, end, flags = (int(field, 16) for field in fields)
        except ValueError:
            continue
        if not flags and not start and not end:
            continue
        size = end - start + 1 if end >= start and (end or start) else 0
        bars.append({"index": index, "start": start, "end": end, "size": size, "flags": flags})
    return bars


def is_mmio64(resource):
    """A standard BAR that is memory, 64-bit and prefetchable (OVMF's 64-bit aperture)."""
    wanted = IORESOURCE_MEM | IORESOURCE_MEM_64 | IORESOURCE_PREFETCH
    return resource["index"] < STANDARD_BARS and resource["flags"] & wanted == wanted and resource["size"] > 0


def mmio64_sizes(text):
    """The sizes in bytes of a device's 64-bit prefetchable BARs, from its ``resource`` text."""
    return [resource["size"] for resource in parse_resource(text) if is_mmio64(resource)]


def is_resource_file(text):
    """Whether ``text`` is a whole ``resource`` file as the kernel writes it: at least the six
    BARs and the ROM (7 lines; 13 with the SR-IOV BARs, more for a bridge), each line three
    ``0x%016llx`` fields, none ending before it starts. An empty, truncated or garbled copy (a
    capture cut short) is not: it would read as "no 64-bit BARs"."""
    lines = (text or "").strip().split("\n")
    return (len(lines) >= STANDARD_BARS + 1 and all(RESOURCE_LINE.match(line) for line in lines)
            and all(int(line[19:37], 16) >= int(line[:18], 16) for line in lines))


def read_mmio64_sizes(fs, address):
    """The 64-bit prefetchable BAR sizes of the device at ``address`` (through the Sysfs reader
    ``fs``), or None when it has no ``resource`` file or one that is not whole (empty,
    truncated, garbage: :func:`is_resource_file`), so that the caller warns either way."""
    text = fs.read("/sys/bus/pci/devices/%s/resource" % address)
    return mmio64_sizes(text) if is_resource_file(text) else None


def _power_of_two_at_least(value):
    power = 1
    while power < value:
        power <<= 1
    return power


def packed_size(sizes):
    """Bytes the BARs take in one window, each BAR aligned to its own (power-of-two) size,
    largest first: their sum when every size is a power of two."""
    end = 0
    for size in sorted(sizes, reverse=True):
        align = _power_of_two_at_least(size)
        end = -(-end // align) * align + size
    return end


def window_mb(sizes, headroom_mb=HEADROOM_MB):
    """The 64-bit MMIO window in MiB for BARs of ``sizes`` (bytes): a power of two at least
    their packed size plus ``headroom_mb``."""
    needed = -(-packed_size(sizes) // MIB) + headroom_mb
    return _power_of_two_at_least(needed)


def window_setting_mb(sizes, headroom_mb=HEADROOM_MB):
    """The window to ask OVMF for (X-PciMmio64Mb), or None when its default is large enough."""
    if not sizes:
        return None
    wanted = window_mb(sizes, headroom_mb)
    return min(wanted, MAX_WINDOW_MB) if wanted > OVMF_DEFAULT_MB else None


# AMD hosts: the HyperTransport hole, the range below 1 TiB that AMD CPUs reserve, where a guest's
# 64-bit BARs do not take peer-to-peer DMA (cloud-hypervisor#8896); a window on an AMD host must
# lie wholly above it.
HT_HOLE = (0xFD00000000, 0xFFFFFFFFFF)
# The smallest window OVMF places at 1 TiB or above whichever way it places it (ovmf_window): its
# base is aligned to the window's size, and with guest address bits of 41 or more its dynamic
# window starts at 7/8 of a space of at least 2 TiB.
ABOVE_HT_HOLE_MB = 1 << 20
GIB = 1 << 30


def _align(value, alignment):
    return -(-value // alignment) * alignment


def _power_of_two_at_most(value):
    power = 1
    while power * 2 <= value:
        power *= 2
    return power


def ovmf_window(window_mb, first_non_address, phys_bits):
    """-> (base, size) in bytes of the 64-bit aperture OVMF makes, as edk2's
    OvmfPkg/Library/PlatformInitLib/MemDetect.c does: the classic window
    (PlatformGetFirstNonAddress: base the end of RAM, ``first_non_address``, aligned to 1 GiB and
    then to the size rounded down to a power of two, the size ``window_mb`` aligned to 1 GiB),
    unless the guest's address width is known (``phys_bits``, None when OVMF does not take it:
    PlatformAddressWidthFromCpuid, limited to 46) and the window asked for is smaller than an
    eighth of that space: then the dynamic window, that eighth at its top
    (PlatformDynamicMmioWindow)."""
    size = _align(window_mb * MIB, GIB)
    base = _align(_align(first_non_address, GIB), _power_of_two_at_most(size))
    if phys_bits is not None:
        bits = min(phys_bits, 46)
        space, mmio = 1 << bits, 1 << (bits - 3)
        if size < mmio and base + mmio < space:
            return space - mmio, mmio
    return base, size


def overlaps_ht_hole(base, size):
    """Whether [base, base + size) meets the HyperTransport hole."""
    return base <= HT_HOLE[1] and base + size > HT_HOLE[0]


def window_above_ht_hole_mb(window_mb):
    """The window to ask OVMF for on an AMD host: ``window_mb`` (None: OVMF's default) raised to
    :data:`ABOVE_HT_HOLE_MB`, so that OVMF puts it above the HyperTransport hole."""
    return max(window_mb or OVMF_DEFAULT_MB, ABOVE_HT_HOLE_MB)
