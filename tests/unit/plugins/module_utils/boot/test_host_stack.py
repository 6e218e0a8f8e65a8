# -*- coding: utf-8 -*-
"""The NVIDIA host stack kept off tenant GPUs: the plan (blacklist file, kernel args, services,
pre-binding by id or by address when the host keeps GPUs) and the initramfs decision. Pure
functions over host-model dicts; the initramfs listings are in the formats of lsinitramfs
(one path a line) and lsinitrd (ls -l lines)."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import host_stack
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

A100 = ("0x10de", "0x20b2")


def gpu(address, ids=A100):
    return {"address": address, "vendor_id": ids[0], "device_id": ids[1], "model": None, "numa_node": 0}


def topology(*gpus, cmdline=()):
    return {"gpus": list(gpus), "cmdline": list(cmdline), "pci_devices": {}}


EIGHT = topology(*[gpu("0000:%02x:00.0" % bus) for bus in (0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd)])


def test_all_gpus_to_tenants_blacklists_the_whole_stack():
    plan = host_stack.gpu_stack_plan(EIGHT, pre_bind_ids=["10de:20b2"])
    assert plan["active"] and plan["host_gpus"] == [] and len(plan["nvidia_tenant_gpus"]) == 8
    assert plan["pre_bind_ids"] == ["10de:20b2"] and plan["address_prebind"] == []
    assert plan["blacklist"] == ["nouveau", "nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidiafb"]
    lines = plan["modprobe_conf"].splitlines()
    assert "blacklist nouveau" in lines and "options nouveau modeset=0" in lines
    for module in host_stack.NVIDIA_MODULES:
        assert "blacklist %s" % module in lines and "install %s /bin/false" % module in lines
    assert plan["kernel_args"] == [{"name": "modprobe.blacklist", "state": "present",
                                    "value": "nouveau,nvidia,nvidia_drm,nvidia_modeset,nvidia_uvm,nvidiafb"}]
    assert plan["services"] == ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "dcgm"]


def nvswitch(address):
    """An HGX H100/H200 NVSwitch as the topology reader gives it: 10de:22a3, class bridge/other, on nvidia."""
    return {"address": address, "vendor_id": "0x10de", "device_id": "0x22a3", "class": "0x068000", "driver": "nvidia",
            "numa_node": 0, "iommu_group": 301}


def test_nvswitches_of_an_hgx_board_are_named_with_what_full_passthrough_needs():
    """Blacklisting nvidia and stopping nvidia-fabricmanager leaves the NVSwitches untrained: the plan says so, naming
    them, the Shared NVSwitch virtualization model and its service VM's input, instead of saying nothing."""
    switches = ["0000:a4:00.0", "0000:a5:00.0"]
    topo = dict(EIGHT, pci_devices=dict((a, nvswitch(a)) for a in switches))
    [note] = [n for n in host_stack.gpu_stack_plan(topo)["notes"] if "NVSwitch" in n]
    assert note.startswith("NVSwitch(es) 0000:a4:00.0, 0000:a5:00.0 (nvidia) stay with the host, and the nvidia modules are "
                           "blacklisted and nvidia-fabricmanager is stopped")
    assert "Shared NVSwitch virtualization model" in note and "give gpuvirt_fabric_vm" in note and "NVLink off" in note
    kept = host_stack.gpu_stack_plan(topo, host_gpus=["0000:07:00.0"])["notes"]
    assert any("nvidia-fabricmanager stays with the host's GPUs" in n for n in kept)
    assert not [n for n in host_stack.gpu_stack_plan(EIGHT)["notes"] if "NVSwitch" in n]


def test_rhel_family_gets_the_dracut_arg_too_and_running_blacklists_are_kept():
    topo = dict(EIGHT, cmdline=["ro", "modprobe.blacklist=floppy,nouveau"])
    args = host_stack.gpu_stack_plan(topo, os_family="RedHat")["kernel_args"]
    assert [a["name"] for a in args] == ["modprobe.blacklist", "rd.driver.blacklist"]
    assert args[0]["value"].split(",") == ["nouveau"] + list(host_stack.NVIDIA_MODULES) + ["floppy"]
    assert args[1]["value"] == ",".join(["nouveau"] + list(host_stack.NVIDIA_MODULES))


def test_the_plan_is_stable_so_a_second_run_writes_the_same():
    first = host_stack.gpu_stack_plan(EIGHT, pre_bind_ids=["10de:20b2"], os_family="Debian")
    assert host_stack.gpu_stack_plan(EIGHT, pre_bind_ids=["10de:20b2"], os_family="Debian") == first


def test_modprobe_file_is_read_by_modprobe_as_meant(tmp_path):
    """The rendered file, fed to the real ``modprobe --showconfig`` parser when kmod is here."""
    conf = tmp_path / "gpuvirt.conf"
    conf.write_text(host_stack.gpu_stack_plan(EIGHT)["modprobe_conf"])
    try:
        out = subprocess.run(["modprobe", "-C", str(conf), "--showconfig"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = conf.read_text()  # no kmod here: the text itself
    assert "blacklist nvidia_uvm" in out and "install nvidia /bin/false" in out and "options nouveau modeset=0" in out


@pytest.mark.parametrize("tenant, host, expect_host", [
    (None, ["0000:07:00.0"], ["0000:07:00.0"]),                       # gpuvirt_host_gpus
    (["0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"],
     None, ["0000:07:00.0"]),                                          # gpuvirt_gpus leaves one out
])
@pytest.mark.parametrize("given_id", ["10de:20b2", "0x10DE:0x20b2"])  # gpuvirt_gpu_pci_ids as the host model reads it
def test_a_host_that_keeps_a_gpu_keeps_the_nvidia_stack_and_prebinds_by_address(tenant, host, expect_host, given_id):
    plan = host_stack.gpu_stack_plan(EIGHT, tenant, host, pre_bind_ids=[given_id], pre_bind_driver="vfio-pci")
    assert plan["host_gpus"] == expect_host and "0000:07:00.0" not in plan["tenant_gpus"]
    # the id of the host's GPU is not pre-bound by id: pci-stub.ids would take it too
    assert plan["pre_bind_ids"] == []
    assert plan["address_prebind"] == plan["nvidia_tenant_gpus"] and len(plan["address_prebind"]) == 7
    assert plan["blacklist"] == ["nouveau"] and plan["services"] == []
    assert plan["kernel_args"] == [{"name": "modprobe.blacklist", "value": "nouveau", "state": "present"}]
    lines = plan["modprobe_conf"].splitlines()
    assert "blacklist nvidia" not in lines and not [line for line in lines if "/bin/false" in line]
    hook = [line for line in lines if line.startswith("install nvidia ")]
    assert len(hook) == 1 and "0000:07:00.0" not in hook[0]
    assert "echo vfio-pci > /sys/bus/pci/devices/$d/driver_override" in hook[0]
    assert hook[0].endswith("/sbin/modprobe --ignore-install nvidia $CMDLINE_OPTS")
    assert any("pre-bound by address" in note for note in plan["notes"])


def test_the_address_hook_writes_driver_override_before_loading(tmp_path):
    """The install hook's shell, run by /bin/sh over a fake sysfs: every tenant GPU gets the driver."""
    plan = host_stack.gpu_stack_plan(EIGHT, None, ["0000:07:00.0"], pre_bind_ids=["10de:20b2"])
    hook = next(line for line in plan["modprobe_conf"].splitlines() if line.startswith("install nvidia "))
    command = hook[len("install nvidia "):].split("; /sbin/modprobe")[0]
    for address in plan["address_prebind"] + ["0000:07:00.0"]:
        (tmp_path / address).mkdir()
        (tmp_path / address / "driver_override").write_text("(null)\n")
    subprocess.run(["/bin/sh", "-c", command.replace("/sys/bus/pci/devices", str(tmp_path))], check=True)
    assert all((tmp_path / a / "driver_override").read_text() == "pci-stub\n" for a in plan["address_prebind"])
    assert (tmp_path / "0000:07:00.0" / "driver_override").read_text() == "(null)\n"


def test_a_running_prebind_id_that_takes_a_host_gpu_is_refused_with_the_fix():
    topo = dict(EIGHT, cmdline=["intel_iommu=on", "pci-stub.ids=10de:20b2"])
    with pytest.raises(InputError, match="remove that id from GRUB_CMDLINE_LINUX"):
        host_stack.gpu_stack_plan(topo, None, ["0000:07:00.0"])


@pytest.mark.parametrize("tenant, host, words", [
    (None, ["0000:99:00.0"], "not a GPU of this host"),
    (["0000:07:00.0"], ["0000:07:00.0"], "not both"),
    (None, ["zz"], "not a PCI address"),
])
def test_bad_host_gpu_inputs(tenant, host, words):
    with pytest.raises(InputError, match=words):
        host_stack.gpu_stack_plan(EIGHT, tenant, host)


@pytest.mark.parametrize("topo, manage", [
    (topology(gpu("0000:82:00.0", ("0x1234", "0x11e8"))), True),     # the lab: no NVIDIA GPU
    (EIGHT, False),                                                   # turned off
    (topology(), True),                                               # no GPU at all
])
def test_nothing_to_do_without_nvidia_tenant_gpus(topo, manage):
    plan = host_stack.gpu_stack_plan(topo, pre_bind_ids=["1234:11e8"], manage=manage)
    assert not plan["active"] and plan["kernel_args"] == [] and plan["modprobe_conf"] is None
    assert plan["pre_bind_ids"] == ["1234:11e8"]
    assert host_stack.services_to_stop({"nvidia-persistenced.service": {}}, plan) == []


def test_services_present_are_stopped_by_unit_name():
    plan = host_stack.gpu_stack_plan(EIGHT)
    facts = {"nvidia-persistenced.service": {"state": "running", "status": "enabled"},
             "nvidia-dcgm.service": {"state": "stopped", "status": "enabled"}, "sshd.service": {}}
    assert host_stack.services_to_stop(facts, plan) == ["nvidia-persistenced.service", "nvidia-dcgm.service"]
    assert host_stack.services_to_stop({}, plan) == []


LSINITRAMFS = "kernel\nusr/lib/modules/6.1.0-13-amd64/kernel/drivers/pci/pci-stub.ko\netc/modprobe.d/gpuvirt-nvidia-host.conf\n"
LSINITRD = ("-rw-r--r--   1 root     root          312 Jan  1 00:00 etc/modprobe.d/gpuvirt-nvidia-host.conf\n"
            "-rw-r--r--   1 root     root        20912 Jan  1 00:00 usr/lib/modules/5.14.0/kernel/drivers/pci/pci-stub.ko.xz\n")
PATTERN = r"/pci[-_]stub\.ko(\.[a-z]+)?$"
NVIDIA_FILE = {"path": host_stack.MODPROBE_FILE, "in_image": True}


@pytest.mark.parametrize("listing, result, reasons", [
    (LSINITRAMFS, {"changed": False}, []),
    (LSINITRD, {"changed": False}, []),
    (LSINITRAMFS, {"changed": True}, ["/etc/modprobe.d/gpuvirt-nvidia-host.conf changed"]),
    ("kernel\n", {"changed": False}, ["the pre-bind driver is not in it", "/etc/modprobe.d/gpuvirt-nvidia-host.conf is not in it"]),
    ("usr/lib/modules/x/pci-stub.ko\n", {"skipped": True}, []),
    ("usr/lib/modules/x/pci-stub.ko\n", {}, []),
])
def test_initramfs_rebuilt_when_its_module_config_changed_or_is_missing(listing, result, reasons):
    assert host_stack.initramfs_reasons(listing, PATTERN, [dict(NVIDIA_FILE, result=result)]) == reasons


def test_initramfs_config_files_outside_the_image_count_only_when_changed():
    files = [{"path": "/etc/initramfs-tools/modules", "in_image": False, "result": {"changed": False}}]
    assert host_stack.initramfs_reasons(LSINITRAMFS, PATTERN, files) == []
    files[0]["result"] = {"changed": True}
    assert host_stack.initramfs_reasons(LSINITRAMFS, None, files) == ["/etc/initramfs-tools/modules changed"]
