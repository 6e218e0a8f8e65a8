# -*- coding: utf-8 -*-
"""module_utils/vocabulary/pci_config.py: the SR-IOV capability read from a function's config space.

The spaces are laid out as the PCI Express specification places the extended capabilities, at the
offsets and with the values a real dual-port ConnectX-4 Lx shows (lspci -vvv in "mlx5_core failed to
load with 5.1.0-rc7-next-20190430+", linux-rdma, 2019-04-30): Advanced Error Reporting at [100],
ARI at [150], SR-IOV at [180] with "Total VFs: 8" and "VF offset: 9, stride: 1" (function 1),
Access Control Services at [230]."""

from __future__ import annotations

import struct

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_config import sriov_capability


def ext_header(cap_id, version, next_at):
    return struct.pack("<I", cap_id | version << 16 | next_at << 20)


def config_space(chain, sriov=None, size=4096):
    """``chain``: [(offset, capability id)] in list order; ``sriov``: (total, offset, stride) of the SR-IOV one."""
    data = bytearray(4096)
    for index, (at, cap_id) in enumerate(chain):
        following = chain[index + 1][0] if index + 1 < len(chain) else 0
        data[at:at + 4] = ext_header(cap_id, 1, following)
        if cap_id == 0x10 and sriov:
            total, offset, stride = sriov
            struct.pack_into("<HHHHHH", data, at + 0x0c, total, total, 0, 0, offset, stride)
    return bytes(data[:size])


CX4LX_PF1 = [(0x100, 0x0001), (0x150, 0x000e), (0x180, 0x0010), (0x230, 0x000d)]


def test_the_sriov_capability_is_found_along_the_chain():
    assert sriov_capability(config_space(CX4LX_PF1, (8, 9, 1))) == {"total_vfs": 8, "offset": 9, "stride": 1}


@pytest.mark.parametrize("data", [
    config_space([(0x100, 0x0001), (0x150, 0x000e), (0x230, 0x000d)]),  # no SR-IOV capability (SR-IOV off in the firmware)
    config_space(CX4LX_PF1, (8, 9, 1), size=64),  # a reader without the rights for the extended space: 64 bytes
    config_space(CX4LX_PF1, (8, 9, 1), size=0x190),  # cut inside the capability
    bytes(4096),  # no extended capabilities
    b"\xff" * 4096,  # a function that does not answer
    None, "text",
])
def test_no_capability_is_none(data):
    assert sriov_capability(data) is None


def test_a_looping_chain_ends():
    data = bytearray(config_space([(0x100, 0x0001), (0x150, 0x000e)]))
    data[0x150:0x154] = ext_header(0x000e, 1, 0x100)
    assert sriov_capability(bytes(data)) is None
