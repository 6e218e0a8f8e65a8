# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Models of the GPUs and NICs this collection places, by PCI vendor and device id.

Names follow the pci.ids database (Debian package pci.ids 2023.04.10) and, for ids newer
than that file (H100 NVL 2321, H200 2335, H200 NVL 233b, L40S 26b9), NVIDIA's
gpu-admin-tools device-id table.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

NVIDIA = "0x10de"
MELLANOX = "0x15b3"

GPU_MODELS = {
    (NVIDIA, "0x20b0"): "A100 SXM4 40GB",
    (NVIDIA, "0x20b2"): "A100 SXM4 80GB",
    (NVIDIA, "0x20b3"): "A100 SXM 64GB",
    (NVIDIA, "0x20f1"): "A100 PCIe 40GB",
    (NVIDIA, "0x20b5"): "A100 PCIe 80GB",
    (NVIDIA, "0x20f3"): "A800 SXM4 80GB",
    (NVIDIA, "0x2330"): "H100 SXM5 80GB",
    (NVIDIA, "0x2331"): "H100 PCIe",
    (NVIDIA, "0x2339"): "H100",
    (NVIDIA, "0x2321"): "H100 NVL",
    (NVIDIA, "0x2322"): "H800 PCIe",
    (NVIDIA, "0x2324"): "H800",
    (NVIDIA, "0x2335"): "H200",
    (NVIDIA, "0x233b"): "H200 NVL",
    (NVIDIA, "0x2342"): "GH200",
    (NVIDIA, "0x26b9"): "L40S",
    (NVIDIA, "0x26b5"): "L40",
}

NIC_MODELS = {
    (MELLANOX, "0x1013"): "ConnectX-4",
    (MELLANOX, "0x1014"): "ConnectX-4 Virtual Function",
    (MELLANOX, "0x1015"): "ConnectX-4 Lx",
    (MELLANOX, "0x1016"): "ConnectX-4 Lx Virtual Function",
    (MELLANOX, "0x1017"): "ConnectX-5",
    (MELLANOX, "0x1018"): "ConnectX-5 Virtual Function",
    (MELLANOX, "0x1019"): "ConnectX-5 Ex",
    (MELLANOX, "0x101a"): "ConnectX-5 Ex Virtual Function",
    (MELLANOX, "0x101b"): "ConnectX-6",
    (MELLANOX, "0x101c"): "ConnectX-6 Virtual Function",
    (MELLANOX, "0x101d"): "ConnectX-6 Dx",
    (MELLANOX, "0x101e"): "ConnectX Family mlx5Gen Virtual Function",
    (MELLANOX, "0x101f"): "ConnectX-6 Lx",
    (MELLANOX, "0x1021"): "ConnectX-7",
    (MELLANOX, "0x1023"): "ConnectX-8",
    (MELLANOX, "0xa2d6"): "BlueField-2 integrated ConnectX-6 Dx",
    (MELLANOX, "0xa2dc"): "BlueField-3 integrated ConnectX-7",
}

# PCI class codes: base class and subclass (the class attribute >> 8), or the base class alone (>> 16)
CLASS_BRIDGE_PCI = 0x0604
CLASS_DISPLAY = 0x03
CLASS_NETWORK = 0x02
# PCI class 0x0680 (bridge, other): what an NVIDIA NVSwitch of an HGX board reports (10de:1af1 on
# HGX A100, 10de:22a3 on HGX H100/H200); NVIDIA makes no other such function
CLASS_BRIDGE_OTHER = 0x0680


def normalize_id(value):
    """``10DE`` / ``0x10de`` / ``10de`` -> ``0x10de``; None for anything that is not 1-4 hex digits."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    if not text or len(text) > 4 or any(c not in "0123456789abcdef" for c in text):
        return None
    return "0x%04x" % int(text, 16)


# A vendor:device id as a user gives it (vfio_bind ids, the host model's extra GPU/NIC ids): four
# hex digits each, as lspci -n and sysfs print them, optionally 0x-prefixed; nothing around them.
VENDOR_DEVICE_RE = re.compile(r"\A(?:0x)?([0-9a-f]{4}):(?:0x)?([0-9a-f]{4})\Z")


def parse_vendor_device(pair):
    """``"10de:20b0"`` (any case, each id optionally ``0x``-prefixed) -> ``("0x10de", "0x20b0")``;
    raises ValueError naming the value. The one reader of a vendor:device id input."""
    text = pair.lower() if isinstance(pair, str) else None
    if text is None or text.count(":") != 1:
        raise ValueError("%r is not a vendor:device id such as 10de:20b0" % (pair,))
    match = VENDOR_DEVICE_RE.match(text)
    if not match:
        raise ValueError("%r is not a vendor:device id of two 4-digit hex ids such as 10de:20b0" % (pair,))
    return "0x" + match.group(1), "0x" + match.group(2)


def gpu_model(vendor_id, device_id):
    return GPU_MODELS.get((vendor_id, device_id))


def nic_model(vendor_id, device_id):
    return NIC_MODELS.get((vendor_id, device_id))


def is_nvswitch(device):
    """Whether a PCI function of the host model is an NVIDIA NVSwitch (vendor NVIDIA, class bridge/other)."""
    try:
        return (device or {}).get("vendor_id") == NVIDIA and int(str(device.get("class")), 16) >> 8 == CLASS_BRIDGE_OTHER
    except ValueError:
        return False
