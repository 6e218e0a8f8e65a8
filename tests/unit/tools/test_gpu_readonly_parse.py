# -*- coding: utf-8 -*-
"""tests/gpu/readonly_parse.py, the parsing parts of the GPU machine's read-only check
(tests/gpu/readonly_check.sh), over real published outputs (tests/fixtures, each with its
.source.txt): nvidia-smi topo -m in both header forms, nvidia-smi --query-gpu CSV, nvidia-smi -q's
Module ID; and the check script itself parses as bash. The host model beside topo -m is the shape
host_topology_info returns (its RETURN documentation), with the addresses the test gives."""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
A100_TOPO = "topo/topo-m_8xa100-sxm4-40gb_10xmlx5_epyc7742-nps4_driver525.txt"
OLD_TOPO = "topo/topo-m_8xa100-nv12_18xmlx5_old-header-format_partial.txt"
Q_L20 = "nvidia_smi/q_l20_module-id_driver535_partial.txt"


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture(name="parse")
def fixture_parse():
    spec = importlib.util.spec_from_file_location("readonly_parse", os.path.join(REPO_ROOT, "tests", "gpu", "readonly_parse.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_check_script_parses_as_bash():
    proc = subprocess.run(["bash", "-n", os.path.join(REPO_ROOT, "tests", "gpu", "readonly_check.sh")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_topo_m_with_its_nic_legend(parse):
    topo = parse.parse_topo(fixture(A100_TOPO))
    assert topo["columns"] == ["GPU%d" % i for i in range(8)] + ["NIC%d" % i for i in range(10)]
    assert topo["nics"]["NIC0"] == "mlx5_0" and topo["nics"]["NIC9"] == "mlx5_9"
    assert topo["rows"]["GPU0"]["NIC0"] == "PXB" and topo["rows"]["GPU0"]["NIC2"] == "SYS"
    assert topo["rows"]["GPU7"]["NIC7"] == "PXB" and topo["rows"]["NIC8"]["NIC9"] == "PIX"
    assert topo["rows"]["GPU0"]["GPU1"] == "NV12" and topo["rows"]["GPU0"]["GPU0"] == "X"


def test_topo_m_of_older_drivers_names_nics_in_its_columns(parse):
    topo = parse.parse_topo(fixture(OLD_TOPO))
    assert topo["columns"][8] == "mlx5_0" and topo["nics"]["mlx5_0"] == "mlx5_0"
    assert topo["rows"]["GPU0"]["mlx5_0"] == "NODE" and topo["rows"]["GPU0"]["mlx5_4"] == "PXB"
    assert topo["rows"]["GPU2"]["mlx5_0"] == "PXB"


def test_no_topo_m_head_is_refused(parse):
    with pytest.raises(ValueError, match="no nvidia-smi topo -m header"):
        parse.parse_topo(fixture(Q_L20))


def test_topo_m_beside_the_host_model(parse):
    topo = parse.parse_topo(fixture(A100_TOPO))
    gpus = {"0": "0000:07:00.0", "2": "0000:47:00.0"}
    model = {"nics": [{"address": "0000:0c:00.0", "rdma_devices": ["mlx5_0"]},
                      {"address": "0000:4c:00.0", "rdma_devices": ["mlx5_2"]}],
             "gpu_nic_affinity": {"0000:07:00.0": {"0000:0c:00.0": "PXB", "0000:4c:00.0": "SYS"},
                                  "0000:47:00.0": {"0000:0c:00.0": "SYS", "0000:4c:00.0": "PIX"}}}
    rows = {(r["gpu"], r["nic"]): r for r in parse.side_by_side(topo, gpus, model)}
    assert rows[("GPU0", "NIC0")]["same"] and rows[("GPU0", "NIC0")]["nic_address"] == "0000:0c:00.0"
    assert rows[("GPU0", "NIC2")]["same"] and rows[("GPU2", "NIC0")]["same"]
    # the model says PIX where nvidia-smi says PXB: shown, not hidden
    assert not rows[("GPU2", "NIC2")]["same"] and rows[("GPU2", "NIC2")]["host_model"] == "PIX"
    # a NIC the model does not know by its RDMA device, a GPU the query did not list
    assert rows[("GPU0", "NIC5")]["nic_address"] is None and not rows[("GPU0", "NIC5")]["same"]
    assert rows[("GPU1", "NIC0")]["gpu_address"] is None
    assert not any(r["nic"].startswith("GPU") for r in rows.values())


def test_query_gpu_csv_with_and_without_an_index_field(parse):
    assert parse.query_gpus(fixture("mig/query-gpu_pci.bus_id_mig.mode.current_csv_h100-pcie.txt")) == {"0": "0000:01:00.0"}
    with pytest.raises(ValueError, match="no pci.bus_id field"):
        parse.query_gpus(fixture("mig/query-gpu_uuid_mig.mode.current_pending_csv_4gpus.txt"))


def test_module_ids_from_nvidia_smi_q(parse):
    text = fixture(Q_L20)
    assert parse.module_ids(text) == {"0000:12:00.0": "1"}
    # the same block without its Module ID line (drivers before the field): no ID, not a wrong one
    without = "\n".join(line for line in text.splitlines() if "Module ID" not in line)
    assert parse.module_ids(without) == {"0000:12:00.0": None}


def test_acs_flags_and_verdicts(parse):
    assert parse.flags("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-") == {
        "SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True, "UpstreamFwd": True,
        "EgressCtrl": False, "DirectTrans": False}
    assert parse.acs_verdict({"acs_ctl": None}) == "no ACS capability"
    assert parse.acs_verdict({"acs_ctl": "SrcValid+ TransBlk- DirectTrans+"}).startswith("DirectTrans+ TransBlk-: translated")
    assert "not as the boot stage's acs sets it" in parse.acs_verdict({"acs_ctl": "SrcValid+ TransBlk- DirectTrans-"})


def test_addresses_in_both_notations(parse):
    assert parse.pci_address("00000000:12:00.0") == "0000:12:00.0"
    assert parse.pci_address("0000:C1:00.0") == "0000:c1:00.0"
    with pytest.raises(ValueError):
        parse.pci_address("12:00.0")


def test_acs_and_ats_of_a_real_switch_path(parse):
    """The lab's GPU 0 path as lspci -D -vvv printed it (QEMU's root port with ACS, the x3130
    switch whose xio3130 downstream port has none, the edu stand-in)."""
    devices = parse.acs_ats(fixture("pci/lspci-D-vvv_lab-qemu10_gpu0-path_x3130-switch.txt"))
    assert list(devices) == ["0000:80:00.0", "0000:81:00.0", "0000:82:00.0", "0000:82:01.0", "0000:83:00.0"]
    root = devices["0000:80:00.0"]
    assert root["acs_cap"].endswith("DirectTrans+") and root["acs_ctl"].endswith("DirectTrans-")
    assert "not as the boot stage's acs sets it" in parse.acs_verdict(root)
    assert parse.acs_verdict(devices["0000:82:00.0"]) == "no ACS capability"
    assert devices["0000:83:00.0"]["name"].startswith("Unclassified device")
    assert all(device["ats_ctl"] is None for device in devices.values())
