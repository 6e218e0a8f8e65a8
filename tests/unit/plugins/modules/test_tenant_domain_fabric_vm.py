# -*- coding: utf-8 -*-
"""tenant_domain with ``tenants`` and ``fabric_vm``: the Fabric Manager service VM planned beside the tenants
(its CPUs and memory placed like a tenant's, so that no tenant takes them), defined with the host's NVSwitches
as its only PCI host devices and a seed whose first boot sets fabricmanager.cfg; against libvirt's test
driver (conftest ``libvirt_conn``) and the lab host tree with four NVSwitches (10de:22a3, class 0x068000, as
the HGX H100 tree has them) added, each in its own IOMMU group, on vfio-pci."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.modules import tenant_domain

from conftest import LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.kernel import lab_host  # pylint: disable=import-error
from fakes.paths import STANDINS  # pylint: disable=import-error

EDU = "0000:82:00.0"
SWITCHES = ["0000:86:00.0", "0000:87:00.0", "0000:88:00.0", "0000:89:00.0"]
GPU_IDS, NIC_IDS = ["1234:11e8"], ["15b3:1017"]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDAw ops@example"
FABRIC_VM = {"name": "fm", "vcpus": 1, "memory_mb": 64, "image": {"base": "/srv/fm.qcow2", "size_gb": 1},
             "address": "192.168.150.5/24", "firmware": "bios", "hugepage_size": "none"}


def make_host(tmp_path, monkeypatch, switches=True):
    tree, kernel = lab_host(tmp_path / "root")
    if switches:
        tree.add_pci("0000:85:00.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:85", numa_node=0, driver="pcieport",
                     iommu_group=20)
        for index, address in enumerate(SWITCHES):
            tree.add_pci(address, "0x10de", "0x22a3", "0x068000", parent="0000:85:00.0", numa_node=0, driver="vfio-pci",
                         iommu_group=21 + index)
    base = tmp_path / "root" / "srv" / "fm.qcow2"
    base.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "1G"], check=True)
    monkeypatch.setenv("PATH", STANDINS + os.pathsep + os.environ["PATH"])
    return LiveHost(tree.root, kernel=kernel)


def tenant(name, **options):
    return dict({"name": name, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "firmware": "bios"}, **options)


def call(tenants, fabric_vm=None, **options):
    out = dict({"uri": URI, "tenants": tenants, "domain_type": "test", "policy": {"emulator": "vcpus"},
                "gpu_ids": GPU_IDS, "nic_ids": NIC_IDS, "vf_persist": False, "live": True,
                "guest_access": {"management": {"network": "default"}, "ssh_authorized_keys": [KEY]}}, **options)
    if fabric_vm is not None:
        out["fabric_vm"] = fabric_vm
    return out


def names(conn):
    return sorted(d.name() for d in conn.listAllDomains(0) if d.name() != "test")


def hostdevs(conn, name):
    root = ET.fromstring(conn.lookupByName(name).XMLDesc(0))
    return sorted("%04x:%02x:%02x.%x" % tuple(int(a.get(k), 16) for k in ("domain", "bus", "slot", "function"))
                  for a in root.findall("devices/hostdev/source/address")), root


def pinned(root):
    return set(cpu for pin in root.findall("cputune/vcpupin") for cpu in parse_cpulist(pin.get("cpuset")))


def test_the_service_vm_holds_the_nvswitches_and_cpus_no_tenant_takes(libvirt_conn, tmp_path, monkeypatch):
    host = make_host(tmp_path, monkeypatch)
    done = run_module(tenant_domain.main, call([tenant("st-a", gpus=1, state="running")], FABRIC_VM), host=host)
    assert not done.get("failed") and done["changed"], done
    assert names(libvirt_conn) == ["fm", "st-a"] and sorted(done["created"]) == ["fm", "st-a"]
    assert done["fabric_vm"] == {"name": "fm", "nvswitches": SWITCHES, "address": "192.168.150.5"}
    # planned like a tenant without GPUs or VFs: its own CPUs, none of the tenant's
    assert done["placements"]["fm"]["gpus"] == [] and done["placements"]["fm"]["vfs"] == []
    devices, fm_root = hostdevs(libvirt_conn, "fm")
    assert devices == SWITCHES
    tenant_devices, tenant_root = hostdevs(libvirt_conn, "st-a")
    assert tenant_devices == [EDU] and not set(tenant_devices) & set(devices)
    assert pinned(fm_root) and not pinned(fm_root) & pinned(tenant_root)
    # its seed: the Fabric Manager in the Shared NVSwitch mode, listening on its management address
    seed = host.path("/var/lib/libvirt/images/gpuvirt/tenants/fm/seed/user-data")
    user_data = json.loads(open(seed, encoding="utf-8").read().split("\n", 1)[1])
    edit, enable, restart = user_data["runcmd"]
    assert edit[-3:] == ["/usr/share/nvidia/nvswitch/fabricmanager.cfg", "FABRIC_MODE=1", "FM_CMD_BIND_INTERFACE=192.168.150.5"]
    assert (enable, restart) == (["systemctl", "enable", "nvidia-fabricmanager"], ["systemctl", "restart", "nvidia-fabricmanager"])
    tenant_seed = host.path("/var/lib/libvirt/images/gpuvirt/tenants/st-a/seed/user-data")
    assert not os.path.exists(tenant_seed) or "runcmd" not in open(tenant_seed, encoding="utf-8").read()
    # a re-run of the converged host changes nothing; the service VM keeps its place
    again = run_module(tenant_domain.main, call([tenant("st-a", gpus=1, state="running")], FABRIC_VM), host=host)
    assert again["changed"] is False and again["placements"]["fm"]["kept"], again


@pytest.mark.parametrize("switches, tenants, fabric_vm, words", [
    (False, [tenant("st-a")], FABRIC_VM, "fabric_vm: this host has no NVSwitch (an NVIDIA function of PCI class 0x0680)"),
    (True, [tenant("fm")], FABRIC_VM, "fabric_vm.name: fm is also the name of tenants[0]"),
    (True, [tenant("st-a", guest={"address": "192.168.150.5/24"})], FABRIC_VM,
     "fabric_vm (fm): guest.address 192.168.150.5 is also the guest.address of tenants[0] (st-a)"),
    (True, [tenant("st-a")], dict(FABRIC_VM, nvswitches=[EDU]), "fabric_vm.nvswitches[0]: 0000:82:00.0 is not an NVSwitch"),
    (True, [tenant("st-a")], dict(FABRIC_VM, vcpus=None), "fabric_vm: vcpus required"),
])
def test_a_bad_service_vm_is_refused_before_any_change(libvirt_conn, tmp_path, monkeypatch, switches, tenants, fabric_vm, words):
    host = make_host(tmp_path, monkeypatch, switches)
    done = run_module(tenant_domain.main, call(tenants, fabric_vm), host=host)
    assert done["failed"] and words in done["msg"] and not done.get("changed"), done
    assert names(libvirt_conn) == []


def test_without_the_option_the_call_plans_as_before(libvirt_conn, tmp_path, monkeypatch):
    host = make_host(tmp_path, monkeypatch)
    plain = run_module(tenant_domain.main, call([tenant("st-a", gpus=1)]), check_mode=True, host=host)
    empty = run_module(tenant_domain.main, call([tenant("st-a", gpus=1)], {}), check_mode=True, host=host)
    assert plain["fabric_vm"] is None and json.dumps(plain["plan"], sort_keys=True) == json.dumps(empty["plan"], sort_keys=True)
    assert sorted(plain["placements"]) == ["st-a"]
