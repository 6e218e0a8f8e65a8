# -*- coding: utf-8 -*-
"""pci_ids: vendor/device id forms and the model names of the GPUs and NICs placed."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids


@pytest.mark.parametrize("value, expected", [
    ("10de", "0x10de"),
    ("0x10DE", "0x10de"),
    (" 15b3 ", "0x15b3"),
    ("1", "0x0001"),
    (16, "0x0016"),       # an int is read as its text: YAML gives 0016 as 16
    (None, None),
    ("", None),
    ("0x", None),
    ("10de0", None),
    ("nvidia", None),
])
def test_normalize_id(value, expected):
    assert pci_ids.normalize_id(value) == expected


def test_parse_vendor_device():
    assert pci_ids.parse_vendor_device("10de:20B0") == ("0x10de", "0x20b0")
    assert pci_ids.parse_vendor_device("0x15b3:0x101d") == ("0x15b3", "0x101d")


@pytest.mark.parametrize("pair, message", [
    ("10de", "is not a vendor:device id such as"),
    ("10de:20b0:1", "is not a vendor:device id such as"),
    ("nvidia:a100", "of two 4-digit hex ids"),
    ("10de:20b0\n", "of two 4-digit hex ids"),
    ("10d:20b0", "of two 4-digit hex ids"),
])
def test_parse_vendor_device_errors_name_the_value(pair, message):
    with pytest.raises(ValueError) as err:
        pci_ids.parse_vendor_device(pair)
    assert message in str(err.value) and repr(pair) in str(err.value)


@pytest.mark.parametrize("vendor, device, gpu, nic", [
    ("0x10de", "0x20b0", "A100 SXM4 40GB", None),
    ("0x10de", "0x2330", "H100 SXM5 80GB", None),
    ("0x15b3", "0x101d", None, "ConnectX-6 Dx"),
    ("0x15b3", "0x101e", None, "ConnectX Family mlx5Gen Virtual Function"),
    ("0x1234", "0x11e8", None, None),
])
def test_models(vendor, device, gpu, nic):
    assert pci_ids.gpu_model(vendor, device) == gpu
    assert pci_ids.nic_model(vendor, device) == nic
