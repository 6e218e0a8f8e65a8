# -*- coding: utf-8 -*-
"""Parsers of plugins/module_utils/guest/nvidia_smi.py over every real nvidia-smi output variant in
tests/fixtures/mig (copied unchanged from the shared fixtures, each with .source.txt)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nvidia_smi as smi

from conftest import FIXTURES  # pylint: disable=import-error

MIG = os.path.join(FIXTURES, "mig")


def text(name):
    with open(os.path.join(MIG, name), "r", encoding="utf-8") as handle:
        return handle.read()


# ---------------------------------------------------------------- --query-gpu --------
def test_query_noheader_single_field():
    rows = smi.parse_query_csv(text("query-gpu_mig.mode.current_enabled.txt"), fields=["mig.mode.current"])
    assert rows == [{"mig.mode.current": "Enabled"}]


def test_query_with_header():
    rows = smi.parse_query_csv(text("query-gpu_pci.bus_id_mig.mode.current_csv_h100-pcie.txt"))
    assert rows == [{"pci.bus_id": "00000000:01:00.0", "mig.mode.current": "Enabled"}]


def test_query_current_and_pending_four_gpus():
    rows = smi.parse_query_csv(text("query-gpu_uuid_mig.mode.current_pending_csv_4gpus.txt"))
    assert [(r["mig.mode.current"], r["mig.mode.pending"]) for r in rows] == [("Enabled", "Enabled")] + [("Disabled", "Disabled")] * 3
    assert rows[0]["uuid"] == "GPU-ec845691-fb46-e16d-abfb-b135308cb39f"


def test_query_na_is_none_and_bad_rows_fail():
    rows = smi.parse_query_csv("index, mig.mode.current\n0, [N/A]\n")
    assert rows == [{"index": "0", "mig.mode.current": None}]
    with pytest.raises(ValueError):
        smi.parse_query_csv("index, mig.mode.current\n0, Enabled, extra\n")


# ---------------------------------------------------------------- -lgip / -lgipp -----
@pytest.mark.parametrize("name, gpu, expected", [
    ("lgip_a100-sxm4-40gb_driver450.txt", 0,
     [("1g.5gb", 19, 7), ("1g.5gb+me", 20, 1), ("1g.10gb", 15, 4), ("2g.10gb", 14, 3), ("3g.20gb", 9, 2), ("4g.20gb", 5, 1), ("7g.40gb", 0, 1)]),
    ("lgip_h100-pcie-80gb_driver525.txt", 0,
     [("1g.10gb", 19, 7), ("1g.10gb+me", 20, 1), ("1g.20gb", 15, 4), ("2g.20gb", 14, 3), ("3g.40gb", 9, 2), ("4g.40gb", 5, 1), ("7g.80gb", 0, 1)]),
    # PARTIAL: the table ends after 2g.36gb without its separator.
    ("lgip_gh200-144gb-hbm3e_partial.txt", 0, [("1g.18gb", 19, 7), ("1g.18gb+me", 20, 1), ("1g.36gb", 15, 4), ("2g.36gb", 14, 3)]),
    # FRAGMENT: no header, two GPUs' blocks; rows name their GPU.
    ("lgip_h200-141gb_FRAGMENT_gpu2-gpu3.txt", 2, [("3g.71gb", 9, 2), ("4g.71gb", 5, 1), ("7g.141gb", 0, 1)]),
    ("lgip_h200-141gb_FRAGMENT_gpu2-gpu3.txt", 3, [("1g.18gb", 19, 7), ("1g.18gb+me", 20, 1)]),
])
def test_lgip(name, gpu, expected):
    parsed = smi.parse_lgip(text(name))
    assert [(p["name"], p["id"], p["total"]) for p in parsed[gpu]] == expected
    assert all(p["free"] == p["total"] for p in parsed[gpu])


def test_lgip_memory_and_sm():
    h100 = smi.parse_lgip(text("lgip_h100-pcie-80gb_driver525.txt"))[0]
    assert (h100[-1]["memory_gib"], h100[-1]["sm"]) == (79.0, 114)
    h200 = smi.parse_lgip(text("lgip_h200-141gb_FRAGMENT_gpu2-gpu3.txt"))[2]
    assert (h200[-1]["memory_gib"], h200[-1]["sm"]) == (139.75, 132)


def test_lgipp():
    parsed = smi.parse_lgipp(text("lgipp_h100-pcie-80gb_driver525.txt"))[0]
    assert parsed == {19: {"starts": [0, 1, 2, 3, 4, 5, 6], "size": 1}, 20: {"starts": [0, 1, 2, 3, 4, 5, 6], "size": 1},
                      15: {"starts": [0, 2, 4, 6], "size": 2}, 14: {"starts": [0, 2, 4], "size": 2},
                      9: {"starts": [0, 4], "size": 4}, 5: {"starts": [0], "size": 4}, 0: {"starts": [0], "size": 8}}


def test_a100_placements_borrowed_by_the_standin_agree_with_real_a100_instances():
    """The stand-in gives the A100 the H100 PCIe placements per profile id (no A100 -lgipp
    capture exists); every placement a real A100 reported in -lgi must be among them."""
    placements = smi.parse_lgipp(text("lgipp_h100-pcie-80gb_driver525.txt"))[0]
    seen = 0
    for name in ("lgi_a100-40gb_2x3g.20gb_driver450.txt", "lgi_a100-sxm4-40gb_7x1g.5gb.txt"):
        for gi in smi.parse_lgi(text(name)):
            assert gi["start"] in placements[gi["profile_id"]]["starts"] and gi["size"] == placements[gi["profile_id"]]["size"]
            seen += 1
    assert seen == 9


# ---------------------------------------------------------------- -lgi / -lci --------
@pytest.mark.parametrize("name, expected", [
    ("lgi_a100-40gb_2x3g.20gb_driver450.txt", [(0, 1, "3g.20gb", 9, 4, 4), (0, 2, "3g.20gb", 9, 0, 4)]),
    ("lgi_a100-sxm4-40gb_7x1g.5gb.txt", [(0, 7 + s, "1g.5gb", 19, s, 1) for s in range(7)]),
    ("lgi_h100-pcie_3g.40gb+3x1g.10gb_driver525.txt",
     [(0, 7, "1g.10gb", 19, 0, 1), (0, 8, "1g.10gb", 19, 1, 1), (0, 9, "1g.10gb", 19, 2, 1), (0, 2, "3g.40gb", 9, 4, 4)]),
    ("lgi_2gpus_1g.10gb-2g.20gb-3g.40gb_partial.txt",
     [(0, 9, "1g.10gb", 19, 2, 1), (0, 10, "1g.10gb", 19, 3, 1), (0, 3, "2g.20gb", 14, 0, 2), (0, 2, "3g.40gb", 9, 4, 4),
      (1, 13, "1g.10gb", 19, 2, 1), (1, 14, "1g.10gb", 19, 3, 1), (1, 5, "2g.20gb", 14, 0, 2), (1, 1, "3g.40gb", 9, 4, 4)]),
])
def test_lgi(name, expected):
    parsed = smi.parse_lgi(text(name))
    assert [(g["gpu"], g["id"], g["profile"], g["profile_id"], g["start"], g["size"]) for g in parsed] == expected


def test_lgi_nothing_found_is_empty():
    assert smi.parse_lgi("No GPU instances found: Not Found\n") == []
    assert smi.parse_lgi("No MIG-enabled devices found.\n") == []


def test_lci_insufficient_permissions_raises():
    with pytest.raises(smi.NvidiaSmiError, match="Insufficient Permissions"):
        smi.parse_lci(text("err_lci_insufficient-permissions.txt"))


def test_lci_table_with_and_without_placement():
    with_placement = ("|   0      7       MIG 1g.10gb          0         0          0:1     |\n"
                      "|   0      2       MIG 3g.40gb          2         0          0:4     |\n")
    without = "|   0      1       MIG 1c.3g.20gb       0         2     |\n"
    assert [(c["gpu_instance"], c["id"], c["profile_id"]) for c in smi.parse_lci(with_placement)] == [(7, 0, 0), (2, 0, 2)]
    assert [(c["gpu_instance"], c["id"], c["profile"]) for c in smi.parse_lci(without)] == [(1, 2, "1c.3g.20gb")]


# ---------------------------------------------------------------- -cgi / -dci / -dgi -
@pytest.mark.parametrize("name, gis, cis", [
    ("cgi_9-19-19-19_-C_h100-pcie_driver525.txt", [(2, "3g.40gb", 9), (7, "1g.10gb", 19), (8, "1g.10gb", 19), (9, "1g.10gb", 19)],
     [(2, 0, 2), (7, 0, 0), (8, 0, 0), (9, 0, 0)]),
    ("cgi_9-3g.20gb_-C_a100-40gb_driver450.txt", [(2, "3g.20gb", 9), (1, "3g.20gb", 9)], [(2, 0, 2), (1, 0, 2)]),
])
def test_create(name, gis, cis):
    parsed = smi.parse_create(text(name))
    assert [(g["id"], g["profile"], g["profile_id"]) for g in parsed["gpu_instances"]] == gis
    assert [(c["gpu_instance"], c["id"], c["profile_id"]) for c in parsed["compute_instances"]] == cis


def test_destroy():
    parsed = smi.parse_destroy(text("dci-dgi_destroy_h100-pcie_driver525.txt"))
    assert parsed == {"compute_instances": [(0, 7, 0), (0, 8, 0), (0, 9, 0), (0, 2, 0)], "gpu_instances": [(0, 7), (0, 8), (0, 9), (0, 2)]}


# ---------------------------------------------------------------- -mig / reset -------
@pytest.mark.parametrize("name, expected", [
    ("enable-mig_success_a100.txt", {"bus_id": "00000000:36:00.0", "mode": "enabled", "pending": False, "reason": None, "in_use": False}),
    ("enable-mig_success_h100-pcie.txt", {"bus_id": "00000000:01:00.0", "mode": "enabled", "pending": False, "reason": None, "in_use": False}),
    ("disable-mig_success_h100-pcie.txt", {"bus_id": "00000000:01:00.0", "mode": "disabled", "pending": False, "reason": None, "in_use": False}),
    ("err_mig-enable-pending_not-supported_reboot-or-gpu-reset_a100_driver450.txt",
     {"bus_id": "00000000:00:03.0", "mode": "enabled", "pending": True, "reason": "Not Supported", "in_use": False}),
    ("err_mig-disable-pending_in-use-by-another-client_gpu-reset.txt",
     {"bus_id": "00000000:C1:00.0", "mode": "disabled", "pending": True, "reason": "In use by another client", "in_use": True}),
    # TRUNCATED (source note: partial use only): the warning line alone, newline collapsed.
    ("err_mig-enable-pending_in-use_a100_driver580_truncated.txt",
     {"bus_id": "00000001:00:00.0", "mode": "enabled", "pending": True, "reason": "In use by another client", "in_use": True}),
])
def test_mig_mode(name, expected):
    assert smi.parse_mig_mode(text(name)) == [expected]


def test_gpu_reset_busy_then_done():
    session = text("err_mig-disable-pending_in-use-by-another-client_gpu-reset.txt")
    first, second = session.split("$ killall nvidia-persistenced")
    assert smi.parse_gpu_reset(first) == {"00000000:C1:00.0": "in use"}
    assert smi.parse_gpu_reset(second) == {"00000000:C1:00.0": "reset"}


def test_gpu_reset_lines_relayed_by_mig_parted():
    parsed = smi.parse_gpu_reset(text("err_mig-parted_gpu-reset_in-use-nvidia_drm.txt"))
    assert parsed == {bus: "in use" for bus in ("00000000:01:00.0", "00000000:47:00.0", "00000000:81:00.0", "00000000:C2:00.0")}


def test_processes_table_empty():
    assert smi.parse_processes(text("nvidia-smi_mig-devices_a100-40gb_2x3g.20gb_driver450.txt")) == []


def test_processes_table_rows():
    table = ("| Processes:                                                                            |\n"
             "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |\n"
             "|    0    2    0       4242      C   python3                                  1024MiB |\n"
             "|    1  N/A  N/A        777      G   /usr/lib/xorg/Xorg                          4MiB |\n")
    assert [(p["gpu"], p["gpu_instance"], p["pid"], p["name"]) for p in smi.parse_processes(table)] == [
        (0, 2, 4242, "python3"), (1, None, 777, "/usr/lib/xorg/Xorg")]


@pytest.mark.parametrize("value, expected", [("0x20B010DE", "10de:20b0"), ("10de:20B0", "10de:20b0"), ("0x2331", "10de:2331")])
def test_device_ids(value, expected):
    assert smi.normalize_device_id(value, "x") == expected
