# -*- coding: utf-8 -*-
"""nvswitch: the HGX H100 and HGX A100 boards' Fabric Manager partitions against the published listings
(tests/fixtures/fabricmanager), and policy.gpu_modules refused with the input and the fix named."""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import nvswitch
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

from conftest import FIXTURES
from placement_families import a100_partition_table  # pylint: disable=import-error

LISTING = os.path.join(FIXTURES, "fabricmanager", "partitioner-o0_hgx-8gpu-nvlink18_15-partitions.txt")
ONEFABRIC = os.path.join(FIXTURES, "fabricmanager", "onefabric_nvswitch-partition_module-id-to-pci_hgx-8480c_FRAGMENT.txt")
H100_SWITCH = {"vendor_id": "0x10de", "device_id": "0x22a3", "class": "0x068000"}
A100_SWITCH = dict(H100_SWITCH, device_id="0x1af1")


def listed_partitions():
    """(ID, GPU module IDs) of each row of the partitioner's table."""
    rows = []
    with open(LISTING, encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"^(\d+)\s+(\d+)\s+([\d, ]+?)\s{2,}(\d+)\s+(ACTIVE|INACTIVE)$", line.rstrip("\n"))
            if match:
                modules = tuple(int(m) for m in match.group(3).split(","))
                assert len(modules) == int(match.group(2)), line
                rows.append((int(match.group(1)), modules))
    return rows


def onefabric_mapping():
    """{PCI address: module ID} of the OpenNebula probe's two partitions."""
    text = open(ONEFABRIC, encoding="utf-8").read()
    mapping = {}
    for addresses, ids in re.findall(r'PARTITION_GPU_ADDR="([^"]+)",\s+PARTITION_GPU_IDS="([^"]+)"', text):
        mapping.update(zip(addresses.split(), map(int, ids.split())))
    return mapping


def test_the_h100_table_is_the_listed_one():
    rows = listed_partitions()
    assert len(rows) == 15
    _name, table = nvswitch.BOARDS[("0x10de", "0x22a3")]
    assert list(table) == rows


def test_module_ids_of_the_published_host_place_its_partitions_off_bus_order():
    mapping = onefabric_mapping()
    assert sorted(mapping.values()) == list(range(1, 9))
    pci = {"0000:07:00.0": H100_SWITCH}
    board = nvswitch.read_board(pci, set(mapping), mapping)
    assert board.name == "HGX H100/H200 8-GPU" and board.sizes() == (1, 2, 4, 8)
    assert board.partition_of(["0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]) == (
        1, ("0000:c3:00.0", "0000:df:00.0", "0000:d1:00.0", "0000:9d:00.0"))
    assert board.partition_of(["0000:c3:00.0", "0000:d1:00.0"])[0] == 3  # modules 1 and 3
    # the two lowest buses are modules 8 and 5: no partition of 2 holds them
    assert board.partition_of(["0000:1b:00.0", "0000:43:00.0"]) is None
    assert board.partition_of(["0000:1b:00.0"]) == (14, ("0000:1b:00.0",))


def test_without_module_ids_the_board_is_known_and_its_partitions_are_not():
    board = nvswitch.read_board({"0000:07:00.0": H100_SWITCH}, {"0000:19:00.0"}, None)
    assert board.switches == ["0000:07:00.0"] and board.partitions == [] and board.sizes() == (1, 2, 4, 8)
    assert nvswitch.read_board({"0000:19:00.0": {"vendor_id": "0x10de", "class": "0x030200"}}, {"0000:19:00.0"}, None) is None


def test_an_unknown_board_has_no_table():
    board = nvswitch.read_board({"0000:07:00.0": dict(H100_SWITCH, device_id="0x1aaa")}, set(), None)
    assert board.table is None and board.sizes() == () and "10de:1aaa" in board.name


def test_the_a100_table_is_the_guides():
    rows = a100_partition_table()
    assert len(rows) == 35 and [n for n, _m in rows] == list(range(35))
    _name, table = nvswitch.BOARDS[("0x10de", "0x1af1")]
    assert list(table) == rows


A100_GPUS = ["0000:%02x:00.0" % bus for bus in (0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd)]


@pytest.mark.parametrize("first", [1, 9])
def test_one_a100_baseboard_has_the_partitions_of_its_module_ids(first):
    """Strapped as the bottom tray (1-8) or the top tray (9-16): the partitions of the other tray are
    not on the host; those left keep the guide's IDs and nest (8, 4, 2, 1)."""
    modules = dict(zip(A100_GPUS, range(first, first + 8)))
    board = nvswitch.read_board({"0000:b3:00.0": A100_SWITCH}, set(A100_GPUS), modules)
    assert board.name == "HGX A100 8-GPU" and board.sizes() == (1, 2, 4, 8)
    ids = [number for number, _gpus in board.partitions]
    assert ids == ([1, 7, 8, 11, 12, 13, 14] + list(range(19, 27)) if first == 1
                   else [2, 9, 10, 15, 16, 17, 18] + list(range(27, 35)))
    assert board.partition_of(A100_GPUS[:2]) == (11 if first == 1 else 15, tuple(A100_GPUS[:2]))
    assert board.partition_of(A100_GPUS[1:3]) is None
    for _number, gpus in board.partitions:
        bigger = [set(other) for _n, other in board.partitions if len(other) > len(gpus) and set(other) & set(gpus)]
        assert all(set(gpus) < other for other in bigger)


def test_without_module_ids_an_a100_board_offers_one_baseboards_sizes():
    board = nvswitch.read_board({"0000:b3:00.0": A100_SWITCH}, set(A100_GPUS), None)
    assert board.sizes() == (1, 2, 4, 8) and board.partitions == []


GPUS = ["0000:%02x:00.0" % bus for bus in (0x19, 0x3b, 0x4c, 0x5d, 0x9b, 0xbb, 0xcb, 0xdb)]
GOOD = dict(zip(GPUS, (8, 5, 7, 6, 4, 1, 3, 2)))


@pytest.mark.parametrize("pci, value, message", [
    ({}, GOOD, "policy.gpu_modules: this host has no NVSwitch"),
    (None, "1,2", "policy.gpu_modules: expected a dict GPU PCI address -> module ID"),
    (None, dict(GOOD, gpu0=1), "policy.gpu_modules: 'gpu0' is not a PCI address"),
    (None, dict(GOOD, **{"0000:aa:00.0": 1}), "policy.gpu_modules: 0000:aa:00.0 is not a GPU of this host"),
    (None, dict(GOOD, **{GPUS[0]: 9}), "policy.gpu_modules.0000:19:00.0: 9 is not a module ID of the HGX H100/H200 8-GPU board"),
    (None, dict(GOOD, **{GPUS[0]: "8"}), "policy.gpu_modules.0000:19:00.0: '8' is not a module ID"),
    (None, dict(GOOD, **{GPUS[0]: 5}), "policy.gpu_modules: module ID(s) 5 given to more than one GPU (0000:19:00.0, 0000:3b:00.0)"),
    (None, dict((a, m) for a, m in GOOD.items() if m != 8), "policy.gpu_modules: no GPU has module ID(s) 8"),
    ({"0000:07:00.0": dict(H100_SWITCH, device_id="0x1aaa")}, GOOD, "are not known to the collection"),
    ({"0000:07:00.0": A100_SWITCH}, dict(zip(GPUS, (1, 2, 3, 4, 9, 10, 11, 12))),
     "policy.gpu_modules: module IDs 1, 2, 3, 4, 9, 10, 11, 12 are not one baseboard's; the HGX A100 8-GPU board has 1-8 or 9-16"),
    ({"0000:07:00.0": A100_SWITCH}, dict(zip(GPUS[:7], range(1, 8))), "module IDs 1, 2, 3, 4, 5, 6, 7 are not one baseboard's"),
    ({"0000:07:00.0": A100_SWITCH}, dict(GOOD, **{GPUS[0]: 17}), "17 is not a module ID of the HGX A100 8-GPU board"),
])
def test_bad_module_ids_are_refused_with_the_fix(pci, value, message):
    with pytest.raises(InputError) as failure:
        nvswitch.read_board({"0000:07:00.0": H100_SWITCH} if pci is None else pci, set(GPUS), value)
    assert message in str(failure.value)
