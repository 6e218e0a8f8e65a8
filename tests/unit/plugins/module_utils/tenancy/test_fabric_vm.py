# -*- coding: utf-8 -*-
"""tenancy/fabric_vm.py: the Fabric Manager service VM's option checked against the host model of the HGX
H100 tree (tests/tools/hgx_tree.py: four NVSwitches 10de:22a3, each in its own IOMMU group), each refusal
naming the key and the fix; its record among the tenants'; the cloud-init commands that set fabricmanager.cfg,
run with sh against a file in the KEY=VALUE form NVIDIA's variables reference gives."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy import fabric_vm as fm
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_inputs import validate_guest
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
SWITCHES = ["0000:6d:00.0", "0000:6e:00.0", "0000:6f:00.0", "0000:70:00.0"]
WANTED = {"name": "fm", "vcpus": 2, "memory_mb": 4096, "image": {"base": "/srv/images/fm.qcow2"}, "address": "192.168.150.5/24"}
TENANTS = [{"name": "h-a", "gpus": 1, "vcpus": 4, "memory_mb": 8192, "guest": {"address": "192.168.150.11/24"}}]


@pytest.fixture(name="hgx", scope="module")
def fixture_hgx(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("hgx_tree", os.path.join(REPO_ROOT, "tests", "tools", "hgx_tree.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = str(tmp_path_factory.mktemp("hgx") / "root")
    module.write_tree(root)
    return read_topology(root, ["10de:2330"])


def test_the_service_vm_takes_every_nvswitch_and_is_a_tenant_without_gpus(hgx):
    assert fm.host_nvswitches(hgx) == SWITCHES
    spec = fm.fabric_vm(WANTED, hgx, TENANTS)
    assert spec["nvswitches"] == SWITCHES and spec["address"] == "192.168.150.5" and spec["name"] == "fm"
    assert spec["tenant"] == {"name": "fm", "vcpus": 2, "memory_mb": 4096, "gpus": 0, "vfs": 0, "state": "running",
                              "image": WANTED["image"], "guest": {"address": "192.168.150.5/24"}}
    records = fm.with_fabric_vm(tenant_records(TENANTS), spec)
    assert [r.name for r in records] == ["h-a", "fm"] and records[1].label == "fabric_vm (fm)"
    assert records[1].gpus == 0 and records[1].vfs == 0


@pytest.mark.parametrize("value", [None, {}])
def test_no_service_vm_leaves_the_tenants_as_they_are(hgx, value):
    assert fm.fabric_vm(value, hgx, TENANTS) is None
    records = tenant_records(TENANTS)
    assert fm.with_fabric_vm(records, None) == records
    assert fm.fabric_entries([{"name": "h-a"}], None) == [{"name": "h-a"}]


def test_the_nvswitches_named_are_the_ones_it_takes(hgx):
    spec = fm.fabric_vm(dict(WANTED, nvswitches=["6e:00.0", "0000:6D:00.0"]), hgx, TENANTS)
    assert spec["nvswitches"] == ["0000:6e:00.0", "0000:6d:00.0"]


def no_switch(topology):
    out = copy.deepcopy(topology)
    for address in SWITCHES:
        del out["pci_devices"][address]
    return out


def shared_group(topology):
    """NVSwitch 0000:6d:00.0 in the IOMMU group of GPU 0000:18:00.0 (no ACS between them)."""
    out = copy.deepcopy(topology)
    gpu = sorted(g["address"] for g in out["gpus"])[0]
    group = out["pci_devices"][gpu]["iommu_group"]
    out["pci_devices"]["0000:6d:00.0"]["iommu_group"] = group
    groups = out.get("iommu", {}).get("groups") or {}
    if str(group) in groups:
        groups[str(group)] = sorted(set(groups[str(group)]) | {"0000:6d:00.0"})
    return out


def no_group(topology):
    out = copy.deepcopy(topology)
    out["pci_devices"]["0000:6f:00.0"]["iommu_group"] = None
    return out


REFUSALS = [
    ("not a dict", ["fm"], None, None, "fabric_vm: expected a dict"),
    ("unknown key", dict(WANTED, gpus=1), None, None, "fabric_vm: unknown key(s) gpus; it takes name"),
    ("no address", dict(WANTED, address=None), None, None, "fabric_vm: address required"),
    ("no size", dict((k, v) for k, v in WANTED.items() if k not in ("vcpus", "memory_mb")), None, None,
     "fabric_vm: vcpus, memory_mb required"),
    ("no image", dict(WANTED, image={}), None, None, "fabric_vm: image required"),
    ("name not a string", dict(WANTED, name=5), None, None, "fabric_vm.name: expected a string"),
    ("name libvirt refuses", dict(WANTED, name="a/b"), None, "record", "fabric_vm.name"),
    ("name of a tenant", dict(WANTED, name="h-a"), None, None,
     "fabric_vm.name: h-a is also the name of tenants[0]; a domain has one name: give the service VM another name"),
    ("host without NVSwitches", WANTED, no_switch, None,
     "fabric_vm: this host has no NVSwitch (an NVIDIA function of PCI class 0x0680) in its host model"),
    ("not an NVSwitch", dict(WANTED, nvswitches=["0000:18:00.0"]), None, None,
     "fabric_vm.nvswitches[0]: 0000:18:00.0 is not an NVSwitch of this host (its NVSwitches: 0000:6d:00.0, 0000:6e:00.0"),
    ("not an address", dict(WANTED, nvswitches=["switch1"]), None, None, "fabric_vm.nvswitches[0]: 'switch1' is not a PCI address"),
    ("listed twice", dict(WANTED, nvswitches=SWITCHES[:1] * 2), None, None,
     "fabric_vm.nvswitches[1]: 0000:6d:00.0 is listed twice"),
    ("empty list", dict(WANTED, nvswitches=[]), None, None, "fabric_vm.nvswitches: expected a non-empty list"),
    ("group with a GPU", WANTED, shared_group, None,
     "fabric_vm: NVSwitch 0000:6d:00.0 shares IOMMU group"),
    ("IOMMU off", WANTED, no_group, None, "fabric_vm: NVSwitch 0000:6f:00.0 has no IOMMU group (the IOMMU is off)"),
    ("IPv6 address", dict(WANTED, address="fd00::5/64"), None, "record",
     "fabric_vm (fm): guest.address: 'fd00::5/64' is not an IPv4 address with its prefix"),
    ("address without prefix", dict(WANTED, address="192.168.150.5"), None, "record",
     "fabric_vm (fm): guest.address: '192.168.150.5' is not an IPv4 address with its prefix"),
    ("address of a tenant", dict(WANTED, address="192.168.150.11/24"), None, "record",
     "fabric_vm (fm): guest.address 192.168.150.11 is also the guest.address of tenants[0] (h-a)"),
    ("bad size", dict(WANTED, vcpus=0), None, "record", "fabric_vm (fm): vcpus"),
]


@pytest.mark.parametrize("case, value, change, stage, message", REFUSALS, ids=[case[0] for case in REFUSALS])
def test_each_bad_service_vm_is_refused_naming_the_key(hgx, case, value, change, stage, message):
    topology = change(hgx) if change else hgx
    before = copy.deepcopy(topology)
    with pytest.raises(InputError) as error:
        spec = fm.fabric_vm(value, topology, TENANTS)
        assert stage == "record", case
        fm.with_fabric_vm(tenant_records(TENANTS), spec)
    assert message in str(error.value), str(error.value)
    assert topology == before


def test_the_service_vm_entry_gets_its_nvswitches_and_the_fabric_manager_address(hgx):
    spec = fm.fabric_vm(WANTED, hgx, TENANTS)
    entries = [{"name": "h-a", "gpus": ["0000:18:00.0"], "cloud_init": {"user": "u"}},
               {"name": "fm", "gpus": [], "vfs": [], "cloud_init": {"user": "u"}}, {"name": "old", "state": "absent"}]
    out = fm.fabric_entries(entries, spec)
    assert out[0] == entries[0] and out[2] == entries[2]
    assert out[1] == {"name": "fm", "gpus": SWITCHES, "vfs": [], "cloud_init": {"user": "u", "fabric_manager_address": "192.168.150.5"}}
    # a preview's entry has no seed: only the devices
    assert fm.fabric_entries([{"name": "fm", "gpus": []}], spec) == [{"name": "fm", "gpus": SWITCHES}]


CFG = """# Fabric Manager configuration (KEY=VALUE lines, as NVIDIA's variables reference lists them)
LOG_LEVEL=4
FABRIC_MODE=0
FABRIC_MODE_RESTART=0
FM_CMD_BIND_INTERFACE=127.0.0.1
FM_CMD_PORT_NUMBER=6666
"""


def run_edit(tmp_path, text, address="192.168.150.5"):
    cfg = tmp_path / "fabricmanager.cfg"
    if text is not None:
        cfg.write_text(text, encoding="utf-8")
    edit, enable, restart = fm.fabric_runcmd(address, str(cfg))
    assert enable == ["systemctl", "enable", "nvidia-fabricmanager"] and restart == ["systemctl", "restart", "nvidia-fabricmanager"]
    done = subprocess.run(edit, capture_output=True, text=True, check=False)
    return done, cfg


def test_the_first_boot_sets_the_shared_nvswitch_mode_and_the_bind_address(tmp_path):
    done, cfg = run_edit(tmp_path, CFG)
    assert done.returncode == 0, done.stderr
    assert cfg.read_text(encoding="utf-8") == CFG.replace("FABRIC_MODE=0\n", "FABRIC_MODE=1\n").replace(
        "FM_CMD_BIND_INTERFACE=127.0.0.1", "FM_CMD_BIND_INTERFACE=192.168.150.5")
    # run again (cloud-init runs it once; by hand twice): the same file
    again, _cfg = run_edit(tmp_path, None)
    assert again.returncode == 0 and cfg.read_text(encoding="utf-8").count("FABRIC_MODE=1\n") == 1


def test_a_key_the_file_lacks_is_added(tmp_path):
    done, cfg = run_edit(tmp_path, "LOG_LEVEL=4\n#FABRIC_MODE=0\n")
    assert done.returncode == 0, done.stderr
    assert cfg.read_text(encoding="utf-8") == "LOG_LEVEL=4\n#FABRIC_MODE=0\nFABRIC_MODE=1\nFM_CMD_BIND_INTERFACE=192.168.150.5\n"


def test_an_image_without_the_fabric_manager_fails_the_first_boot_saying_so(tmp_path):
    done, cfg = run_edit(tmp_path, None)
    assert done.returncode == 1 and not cfg.exists()
    assert "is missing: the image needs the NVIDIA driver and nvidia-fabricmanager" in done.stderr


def test_a_defined_service_vm_is_read_without_its_nvswitches_for_the_planner(hgx):
    spec = fm.fabric_vm(WANTED, hgx, TENANTS)
    existing = {"fm": {"hostdevs": SWITCHES + ["0000:18:00.0"], "vcpu_pins": {"0": 2}}, "h-a": {"hostdevs": ["0000:18:00.0"]}}
    out = fm.fabric_existing(existing, spec)
    # another device it holds stays: the planner then places it anew
    assert out == {"fm": {"hostdevs": ["0000:18:00.0"], "vcpu_pins": {"0": 2}}, "h-a": {"hostdevs": ["0000:18:00.0"]}}
    assert existing["fm"]["hostdevs"][:4] == SWITCHES
    assert fm.fabric_existing(existing, None) is existing and fm.fabric_existing({}, spec) == {}


@pytest.mark.parametrize("address, message", [
    ("192.168.150.5/24", "cloud_init.fabric_manager_address: '192.168.150.5/24' has a prefix"),
    ("127.0.0.1", "cloud_init.fabric_manager_address: 127.0.0.1 is a loopback address"),
])
def test_a_domains_fabric_manager_address_is_an_address_without_prefix(address, message):
    options = {"image": {"base": "/srv/fm.qcow2", "url": None, "checksum": None, "size_gb": None, "copy": False},
               "cloud_init": {"user": "ops", "ssh_authorized_keys": [], "packages": [], "hostname": None, "rdma_address": None,
                              "fabric_manager_address": address},
               "management": None, "data_nic": None}
    with pytest.raises(InputError) as error:
        validate_guest(options, "fm")
    assert message in str(error.value), str(error.value)
    options["cloud_init"]["fabric_manager_address"] = "192.168.150.5"
    assert validate_guest(options, "fm")[1]["fabric_manager_address"] == "192.168.150.5"
