# -*- coding: utf-8 -*-
"""vfio_bind with ``fabric_vm``: the Fabric Manager service VM's NVSwitches (10de:22a3, class 0x068000, as the
HGX H100 tree has them) moved from the host's nvidia driver to vfio-pci and kept there at boot, over the lab
layout (fakes.kernel.lab_host: sysfs writes go to the FakeKernel stand-in); refusals change nothing."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.modules import vfio_bind
from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import lab_host  # pylint: disable=import-error

SWITCHES = ["0000:86:00.0", "0000:87:00.0"]
FABRIC_VM = {"name": "fm", "vcpus": 1, "memory_mb": 64, "image": {"base": "/srv/fm.qcow2"}, "address": "192.168.150.5/24"}


def make_lab(tmp_path, groups=(21, 22)):
    tree, kernel = lab_host(tmp_path / "root")
    tree.add_pci("0000:85:00.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:85", numa_node=0, driver="pcieport",
                 iommu_group=20)
    for address, group in zip(SWITCHES, groups):
        tree.add_pci(address, "0x10de", "0x22a3", "0x068000", parent="0000:85:00.0", numa_node=0, driver="nvidia",
                     iommu_group=group)
    return tree, kernel


def run(lab, args, **kwargs):
    tree, kernel = lab
    commands = RecordedCommands()
    result = run_module(vfio_bind.main, args, host=Host(tree.root, commands=commands, kernel=kernel), **kwargs)
    assert commands.calls == []
    return result


def test_the_service_vms_nvswitches_go_to_vfio_pci_and_stay_there(tmp_path):
    lab = make_lab(tmp_path)
    tree, kernel = lab
    predicted = run(lab, {"fabric_vm": FABRIC_VM}, check_mode=True)
    assert predicted["changed"] and not kernel.writes and predicted["nvswitches"] == SWITCHES
    done = run(lab, {"fabric_vm": FABRIC_VM})
    assert done["changed"] and not done.get("failed"), done
    by = dict((d["address"], d) for d in done["devices"])
    assert sorted(by) == SWITCHES and all((by[a]["driver_before"], by[a]["driver_after"]) == ("nvidia", "vfio-pci") for a in SWITCHES)
    assert all(kernel.driver(a) == "vfio-pci" for a in SWITCHES)
    assert restore.UDEV_RULES in done["persisted_files"] and os.path.exists(tree.p(restore.VFIO_CONFIG))
    kernel.writes.clear()
    again = run(lab, {"fabric_vm": FABRIC_VM})
    assert again["changed"] is False and not kernel.writes
    # the ones named only
    one = run(make_lab(tmp_path / "one"), {"fabric_vm": dict(FABRIC_VM, nvswitches=SWITCHES[1:])})
    assert [d["address"] for d in one["devices"]] == SWITCHES[1:]


@pytest.mark.parametrize("groups, fabric_vm, words", [
    ((21, 22), dict(FABRIC_VM, nvswitches=["0000:82:00.0"]), "fabric_vm.nvswitches[0]: 0000:82:00.0 is not an NVSwitch of this host"),
    # the lab GPU 0000:82:00.0 is in IOMMU group 7
    ((7, 22), FABRIC_VM, "fabric_vm: NVSwitch 0000:86:00.0 shares IOMMU group 7 with 0000:82:00.0, which is no NVSwitch"),
    # ansible-core 2.16 says "of type <class 'str'>", later ones "of type str"
    ((21, 22), "fm", "argument 'fabric_vm' is of type "),
])
def test_a_bad_service_vm_binds_nothing(tmp_path, groups, fabric_vm, words):
    lab = make_lab(tmp_path, groups)
    tree, kernel = lab
    done = run(lab, {"fabric_vm": fabric_vm})
    assert done["failed"] and words in done["msg"], done
    assert not kernel.writes and not os.path.exists(tree.p(restore.VFIO_CONFIG))


def test_a_host_without_nvswitches_is_refused(tmp_path):
    tree, kernel = lab_host(tmp_path / "root")
    done = run((tree, kernel), {"fabric_vm": FABRIC_VM})
    assert done["failed"] and "fabric_vm: this host has no NVSwitch" in done["msg"] and not kernel.writes
