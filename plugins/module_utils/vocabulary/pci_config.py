# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A PCI function's configuration space as sysfs ``config`` gives it (the bytes as the device
holds them, little-endian): the SR-IOV extended capability's First VF Offset and VF Stride, for a
kernel whose sysfs lacks ``sriov_offset``/``sriov_stride``.

Layout (PCI Express Base Specification, extended capabilities; the kernel's names in
include/uapi/linux/pci_regs.h): extended capabilities start at 0x100, each with a 32-bit header
(capability ID in bits 0-15, version in 16-19, the next capability's offset in 20-31, 0 at the
end); the SR-IOV capability (PCI_EXT_CAP_ID_SRIOV, 0x10) holds TotalVFs at +0x0e
(PCI_SRIOV_TOTAL_VF), First VF Offset at +0x14 (PCI_SRIOV_VF_OFFSET) and VF Stride at +0x16
(PCI_SRIOV_VF_STRIDE), 16 bits each. Pure."""

from __future__ import absolute_import, division, print_function

import struct

__metaclass__ = type

EXT_CAP_START = 0x100
EXT_CAP_ID_SRIOV = 0x10
SRIOV_TOTAL_VF = 0x0e
SRIOV_VF_OFFSET = 0x14
SRIOV_VF_STRIDE = 0x16
CONFIG_SIZE = 4096


def _word(data, at):
    return struct.unpack_from("<H", data, at)[0]


def sriov_capability(data):
    """{"total_vfs", "offset", "stride"} of the SR-IOV capability in ``data`` (a function's
    configuration space), or None when it has none or ``data`` stops before it (a reader
    without the rights sysfs wants for the extended space gets only the first 64 bytes)."""
    if not isinstance(data, (bytes, bytearray)) or len(data) < EXT_CAP_START + 4:
        return None
    seen = set()
    at = EXT_CAP_START
    while EXT_CAP_START <= at <= len(data) - 4 and at not in seen:
        seen.add(at)
        header = struct.unpack_from("<I", data, at)[0]
        if header in (0, 0xffffffff):
            return None
        if header & 0xffff == EXT_CAP_ID_SRIOV:
            if at + SRIOV_VF_STRIDE + 2 > len(data):
                return None
            return {"total_vfs": _word(data, at + SRIOV_TOTAL_VF), "offset": _word(data, at + SRIOV_VF_OFFSET),
                    "stride": _word(data, at + SRIOV_VF_STRIDE)}
        at = (header >> 20) & 0xffc
    return None
