# -*- coding: utf-8 -*-
"""PCI addresses in the forms lspci and sysfs print them."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import (
    address_parts, format_address, is_address, nearest_shared_bridge, normalize_address, upstream_bridges)


@pytest.mark.parametrize("text, normal", [
    ("0000:81:00.0", "0000:81:00.0"), ("81:00.1", "0000:81:00.1"), (" 0000:C1:00.7 ", "0000:c1:00.7"),
    ("81:00.8", None), ("0000:81:00", None), ("10de:20b5", None), (None, None), (42, None),
])
def test_normalize_address(text, normal):
    assert normalize_address(text) == normal


@pytest.mark.parametrize("text, expected", [("0000:81:00.0", True), ("81:00.0", False), ("0000:81:00.0 ", False), (None, False)])
def test_is_address(text, expected):
    assert is_address(text) is expected


def test_parts_and_format():
    assert address_parts("0000:81:00.1") == (0, 0x81, 0, 1)
    assert address_parts("x") is None
    assert format_address(0, 0x81, 0x1f, 7) == "0000:81:1f.7"


@pytest.mark.parametrize("real, address, chain", [
    # a GPU below a switch (downstream port under upstream port under a root port), as sysfs links it
    ("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", "0000:03:00.0",
     ["0000:02:08.0", "0000:01:00.0", "0000:00:01.0"]),
    ("/sys/devices/pci0000:fe/0000:fe:00.0/0000:ff:00.0", "0000:ff:00.0", ["0000:fe:00.0"]),
    ("/sys/devices/pci0000:00/0000:00:05.0", "0000:00:05.0", []),
    # the path of another device, or none: no chain
    ("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", "0000:03:00.0", []),
    (None, "0000:03:00.0", []),
])
def test_upstream_bridges(real, address, chain):
    assert upstream_bridges(real, address) == chain


def test_nearest_shared_bridge():
    gpu = ["0000:02:08.0", "0000:01:00.0", "0000:00:01.0"]
    nic = ["0000:02:10.0", "0000:01:00.0", "0000:00:01.0"]
    other_root = ["0000:00:03.0"]
    assert nearest_shared_bridge(gpu, nic) == "0000:01:00.0"
    assert nearest_shared_bridge(gpu, nic, ["0000:00:01.0"]) == "0000:00:01.0"
    assert nearest_shared_bridge(gpu, other_root) is None
    assert nearest_shared_bridge(gpu) == "0000:02:08.0"
