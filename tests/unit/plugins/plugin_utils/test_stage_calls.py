# -*- coding: utf-8 -*-
"""stage_calls: a stage role's inputs as the options of the stage's one call; for the tenants stage
the tenant_vms inputs as the options of tenant_domain with ``tenants``, which tenant_domain's own
argument spec accepts, the option types read from that spec; for the boot stage the host_boot inputs
as the options of iommu_grub, parts left out when not asked for, validated by iommu_grub's own spec."""

from __future__ import annotations

import os
import re

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub import IOMMU_GRUB_ARGS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.hugepages import MODULE_ARGS as HUGEPAGES_ARGS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner_request import read_policy
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.sriov import MODULE_ARGS as SRIOV_VFS_ARGS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.vfio import VFIO_BIND_ARGS

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_call import (
    TENANT_DOMAIN_ARGS, TENANT_STAGE_OPTIONS, TENANT_STAGE_SETTINGS)
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import StageInputError, stage_module, stage_options
from fakes.stage_inputs import TENANT_VMS  # pylint: disable=import-error

INPUT = TENANT_VMS


def boot(inputs):
    return stage_options("boot", inputs)


def valid(options):
    spec = TENANT_DOMAIN_ARGS
    outcome = ArgumentSpecValidator(spec["argument_spec"], mutually_exclusive=spec["mutually_exclusive"],
                                    required_one_of=spec["required_one_of"], required_by=spec["required_by"]).validate(options)
    return outcome.error_messages


def test_the_inputs_become_the_options_of_one_call():
    options = stage_options("tenants", INPUT)
    assert options["tenants"] == INPUT["tenants"] and options["policy"] == {"numa": "required"}
    assert options["machine"] == "q35" and options["live"] is True and "preview" not in options
    assert options["shutdown_timeout"] == 120 and options["vf_persist"] is True and options["gpu_ids"] == []
    assert not valid(options)
    assert stage_module("tenants") == "gpuvirt.tenancy.tenant_domain"


def test_the_gpu_pool_and_vf_pfs_go_into_the_policy_and_unset_options_are_left_out():
    options = stage_options("tenants", dict(INPUT, gpus=["0000:07:00.0"], vf_pfs=["0000:0c:00.0"], machine=None, policy=None,
                                            live=None, shutdown_timeout=None, firmware=""))
    assert options["policy"] == {"gpus": ["0000:07:00.0"], "vf_pfs": ["0000:0c:00.0"]}
    # keys of the planner's policy, as the planner reads it on the host
    assert read_policy(options["policy"])["vf_pfs"] == ["0000:0c:00.0"]
    assert not {"machine", "live", "shutdown_timeout", "firmware"} & set(options)
    # an empty pool stays an empty pool (no GPU to tenants), unlike none (every GPU), which ansible-core 2.16
    # templates as "" (tenant_vms_gpus: "{{ gpuvirt_gpus | default(none) }}")
    assert stage_options("tenants", dict(INPUT, gpus=[]))["policy"]["gpus"] == []
    assert "gpus" not in stage_options("tenants", dict(INPUT, gpus=""))["policy"]
    assert "machine" not in stage_options("tenants", dict(INPUT, machine=""))
    # the stage's own lists and dicts are always sent, an unset one empty; an unset flag is left out, so that
    # the module's meaning of none stands (vf_persist: none is persist, as the tenant_domain module reads it)
    unset = stage_options("tenants", dict(INPUT, tenants=None, priorities=None, vf_persist=None, nic_ids=None))
    assert unset["tenants"] == [] and unset["priorities"] == {} and unset["nic_ids"] == []
    assert "vf_persist" not in unset and not valid(unset)
    assert not valid(options)


@pytest.mark.parametrize("value", [{}, None, ""])
def test_the_service_vm_is_sent_only_when_given(value):
    assert "fabric_vm" not in stage_options("tenants", dict(INPUT, fabric_vm=value))
    wanted = {"name": "fm", "vcpus": 2, "memory_mb": 4096, "image": {"base": "/srv/fm.qcow2"}, "address": "192.168.150.5/24"}
    options = stage_options("tenants", dict(INPUT, fabric_vm=wanted))
    assert options["fabric_vm"] == wanted and not valid(options)
    with pytest.raises(StageInputError, match=r"fabric_vm \(tenant_vms_fabric_vm\) must be a dict, got list"):
        stage_options("tenants", dict(INPUT, fabric_vm=["fm"]))


def test_values_take_the_type_of_the_modules_option():
    options = stage_options("tenants", dict(INPUT, live="yes", force_off="false", shutdown_timeout="90"))
    assert options["live"] is True and options["force_off"] is False and options["shutdown_timeout"] == 90


def test_a_preview_sends_what_the_earlier_stages_leave():
    options = stage_options("tenants", dict(INPUT, preview=True))
    assert options["preview"] == {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}], "hugepages": [], "gpus": []}
    assert not valid(options)
    # what the preview does not say is the module's default for it
    assert stage_options("tenants", dict(INPUT, preview=True, preview_wanted=None))["preview"] == {
        "sriov_pfs": [], "hugepages": [], "gpus": []}


def test_the_fabric_manager_is_sent_only_when_set():
    """Unset (none, or "" as ansible-core 2.16 templates it), the call asks no Fabric Manager: the option is left out."""
    assert "fabric_manager" not in stage_options("tenants", INPUT)
    assert "fabric_manager" not in stage_options("tenants", dict(INPUT, fabric_manager=""))
    options = stage_options("tenants", dict(INPUT, fabric_manager={"hostname": "192.0.2.10"}))
    assert options["fabric_manager"] == {"hostname": "192.0.2.10"} and not valid(options)
    with pytest.raises(StageInputError, match=r"fabric_manager \(tenant_vms_fabric_manager\) must be a dict"):
        stage_options("tenants", dict(INPUT, fabric_manager="192.0.2.10"))


def test_every_option_of_the_stage_is_an_input():
    """The inputs are the stage's options of tenant_domain's spec (TENANT_STAGE_OPTIONS, every tenant's
    settings), plus the three that fold into policy and preview: none is missing, none unknown."""
    names = set(TENANT_STAGE_OPTIONS) | set(TENANT_STAGE_SETTINGS) | {"gpus", "vf_pfs", "preview_wanted"}
    assert sorted(INPUT) == sorted(names)


@pytest.mark.parametrize("stage, inputs, message", [
    ("tenants", [], "inputs: give the tenants stage's inputs as a dict"),
    ("tenants", dict((k, v) for k, v in INPUT.items() if k != "policy"), "missing: policy"),
    ("tenants", dict(INPUT, cpus=4), "not an input of the stage: cpus"),
    ("tenants", dict(INPUT, tenants={"a": {}}), r"tenants \(tenant_vms_tenants\) must be a list, got dict"),
    ("tenants", dict(INPUT, policy=["numa"]), r"policy \(tenant_vms_policy\) must be a dict"),
    ("tenants", dict(INPUT, live="maybe"), r"live \(tenant_vms_live\) must be a boolean, got 'maybe': give tenant_vms_live true or false"),
    ("tenants", dict(INPUT, shutdown_timeout="soon"), r"shutdown_timeout \(tenant_vms_shutdown_timeout\) must be an integer"),
    ("tenants", dict(INPUT, gpus="0000:07:00.0"), r"gpus \(tenant_vms_gpus\) must be a list"),
    ("boats", INPUT, "'boats' is not a host stage whose call is built here; give one of boot, libvirt_mounts, sriov, sriov_vfio, tenants"),
])
def test_bad_inputs_name_the_input_and_the_fix(stage, inputs, message):
    with pytest.raises(StageInputError, match=message):
        stage_options(stage, inputs)


# ---- the boot stage

BOOT = {
    "iommu": True, "vendor": "auto", "passthrough": True, "pre_bind_ids": ["10de:20b0"], "pre_bind_driver": "pci-stub",
    "args": [], "grub_file": "/etc/default/grub", "variable": "GRUB_CMDLINE_LINUX", "bootloader_update": "auto",
    "tenant_gpus": None, "host_gpus": [], "gpu_ids": [], "nic_ids": [], "gpu_host_stack": True, "early_driver": True,
    "early_driver_before": ["nouveau", "nvidia", "nvidiafb"], "early_driver_initramfs": True,
    "sriov_pfs": [{"pf": "0000:0c:00.0", "num_vfs": 8, "link_type": "eth"}], "firmware_sriov": True,
    "firmware_install": True, "firmware_reset": True, "firmware_reset_level": 3, "firmware_ats": False, "acs": False, "reboot_ok": False,
    "hugepages": [{"size": "1G", "count": 4, "node": 1}], "hugepages_at_boot": ["1G"], "hugepages_persist": True,
    "hugepages_unit": "gpuvirt-hugepages.service", "hugepages_mounts": [],
}


def test_boot_every_part_maps_and_validates_as_iommu_grub_does():
    options = boot(BOOT)
    # host_boot_tenant_gpus unset (gpuvirt_gpus undefined): left to iommu_grub's default, [] (every GPU not the host's)
    assert "tenant_gpus" not in options["gpu_stack"] and options["gpu_stack"]["initramfs"] is True
    assert options["firmware"]["sriov_pfs"] == BOOT["sriov_pfs"] and options["firmware"]["reset_ok"] is False
    assert options["hugepages"]["persist_unit"] == "/etc/systemd/system/gpuvirt-hugepages.service"
    validated = nested_params("boot", "gpuvirt.tenancy.iommu_grub", IOMMU_GRUB_ARGS, options)
    assert validated["firmware"]["reset_level"] == 3 and validated["gpu_stack"]["tenant_gpus"] == []
    # the hugepages call inside it, as the hugepages module's own spec takes it
    assert nested_params("boot", "gpuvirt.tenancy.hugepages", HUGEPAGES_ARGS, options["hugepages"])["persist_unit"] == (
        "/etc/systemd/system/gpuvirt-hugepages.service")


def test_boot_unset_inputs_take_the_modules_defaults_not_an_empty_value():
    """An always-sent part (gpu_stack, firmware, hugepages) leaves an unset sub-option out, so that
    iommu_grub's (or hugepages') own default applies: not False for manage (default true), not []
    for early_driver_before or at_boot (their defaults name modules and the 1G size)."""
    options = boot(dict(BOOT, gpu_host_stack=None, early_driver_before="", early_driver_initramfs=None, firmware_reset=None,
                        hugepages_at_boot=None, hugepages_persist=None))
    validated = nested_params("boot", "gpuvirt.tenancy.iommu_grub", IOMMU_GRUB_ARGS, options)
    assert "manage" not in options["gpu_stack"] and validated["gpu_stack"]["manage"] is True
    assert validated["gpu_stack"]["early_driver_before"] == ["nouveau", "nvidia", "nvidiafb"]
    assert validated["gpu_stack"]["initramfs"] is True and validated["firmware"]["reset"] is True
    pages = nested_params("boot", "gpuvirt.tenancy.hugepages", HUGEPAGES_ARGS, options["hugepages"])
    assert pages["at_boot"] == ["1G"] and pages["persist"] is False and pages["pages"] == BOOT["hugepages"]


@pytest.mark.parametrize("inputs, message", [
    (dict(BOOT, firmware_reset_level=3.5), r"firmware_reset_level \(host_boot_firmware_reset_level\) must be an integer, got 3.5"),
    (dict(BOOT, firmware_reset_level=True), r"firmware_reset_level \(host_boot_firmware_reset_level\) must be an integer"),
    (dict(BOOT, grub_file=["/etc/default/grub"]),
     r"grub_file \(host_boot_grub_file\) must be a single value, got a list: give host_boot_grub_file one path"),
    (dict(BOOT, vendor={"intel": True}), r"vendor \(host_boot_vendor\) must be a single value, got a dict"),
])
def test_boot_values_convert_as_the_module_converts_them(inputs, message):
    # a whole number given as text converts, a fraction is refused (not cut to 3), as iommu_grub's spec does
    assert boot(dict(BOOT, firmware_reset_level="4"))["firmware"]["reset_level"] == 4
    with pytest.raises(StageInputError, match=message):
        boot(inputs)


def test_boot_parts_not_asked_for_are_left_out():
    options = boot(dict(BOOT, sriov_pfs=[], hugepages=[]))
    assert "firmware" not in options and "hugepages" not in options
    assert "firmware" not in boot(dict(BOOT, firmware_sriov=False))


def test_boot_ats_is_opt_in_and_names_the_pfs_of_sriov_pfs():
    assert "ats_pfs" not in boot(BOOT)["firmware"]
    every = boot(dict(BOOT, firmware_ats=True))
    assert every["firmware"]["ats_pfs"] == ["0000:0c:00.0"]
    listed = boot(dict(BOOT, firmware_ats=["0c:00.0"]))
    assert listed["firmware"]["ats_pfs"] == ["0c:00.0"]
    assert nested_params("boot", "gpuvirt.tenancy.iommu_grub", IOMMU_GRUB_ARGS, listed)["firmware"]["ats_pfs"] == ["0c:00.0"]
    with pytest.raises(StageInputError, match=r"firmware_ats \(host_boot_firmware_ats\) must be true, false or a list of PFs"):
        boot(dict(BOOT, firmware_ats="yes please"))


def test_boot_acs_is_opt_in_and_names_the_tenants_devices():
    assert "acs" not in boot(BOOT)
    every = boot(dict(BOOT, acs=True))
    assert every["acs"] == {"gpus": [], "pfs": ["0000:0c:00.0"]}
    chosen = boot(dict(BOOT, acs={"flags": "1xxxx0x"}, firmware_ats=["0c:00.0"], tenant_gpus=["0000:15:00.0"]))
    assert chosen["acs"] == {"gpus": ["0000:15:00.0"], "pfs": ["0c:00.0"], "flags": "1xxxx0x"}
    assert nested_params("boot", "gpuvirt.tenancy.iommu_grub", IOMMU_GRUB_ARGS, every)["acs"]["flags"] == "1xxxx0x"
    with pytest.raises(StageInputError, match=r"acs \(host_boot_acs\) must be true, false or"):
        boot(dict(BOOT, acs={"flag": "1"}))


@pytest.mark.parametrize("value, message", [
    (["x"], "inputs: give the boot stage's inputs as a dict"),
    ({"iommu": True}, "missing: acs, args, bootloader_update"),
])
def test_boot_bad_inputs_are_named(value, message):
    with pytest.raises(StageInputError, match=message):
        boot(value)


# ---- the SR-IOV/VFIO stage

# "tenants": the removed input host_vfio_tenants, unset (the role hands it on as none)
VFIO = {"sriov_pfs": [{"pf": "0000:81:00.0", "num_vfs": 4}], "tenants": None, "gpus": [], "gpu_ids": ["10de:20b0"], "devices": [],
        "group_policy": "strict", "autoprobe": False, "persist": True, "force": False, "fabric_vm": {}}


@pytest.mark.parametrize("inputs, asks", [
    (VFIO, True),
    (dict(VFIO, sriov_pfs=[], gpus=["0000:82:00.0"]), True),
    (dict(VFIO, sriov_pfs=[], devices=["0000:83:00.0"]), True),
    (dict(VFIO, sriov_pfs=[]), False),
    (dict(VFIO, sriov_pfs=None, gpus=""), False),
    # the Fabric Manager service VM's NVSwitches alone are a reason for the call
    (dict(VFIO, sriov_pfs=[], fabric_vm={"name": "fm", "nvswitches": ["0000:6d:00.0"]}), True),
    (dict(VFIO, sriov_pfs=[], fabric_vm=None), False),
])
def test_sriov_vfio_calls_only_when_the_inventory_names_a_pf_gpu_or_device(inputs, asks):
    options = stage_options("sriov_vfio", inputs)
    if not asks:
        assert options == {}
        return
    # the service VM only when given; the removed input never
    assert options == dict((key, value) for key, value in inputs.items() if key != "tenants" and (key != "fabric_vm" or value))
    validated = nested_params("sriov_vfio", "gpuvirt.tenancy.vfio_bind", VFIO_BIND_ARGS, options)
    assert validated["group_policy"] == "strict" and validated["persist"] is True


def test_sriov_vfio_unset_lists_are_empty_and_unset_settings_left_out():
    options = stage_options("sriov_vfio", dict(VFIO, tenants="", devices="", force=None, group_policy="", gpu_ids=None))
    assert options["devices"] == [] and "force" not in options and "group_policy" not in options and "tenants" not in options
    # gpu_ids has a default in vfio_bind's spec ([]): unset, it is left to it
    assert "gpu_ids" not in options


@pytest.mark.parametrize("inputs, message", [
    (dict(VFIO, gpus="0000:82:00.0"), r"gpus \(host_vfio_gpus\) must be a list, got str"),
    (dict(VFIO, persist="sometimes"), r"persist \(host_vfio_persist\) must be a boolean"),
    (dict(VFIO, driver="vfio-pci"), "not an input of the stage: driver"),
])
def test_sriov_vfio_bad_inputs_name_the_input(inputs, message):
    with pytest.raises(StageInputError, match=message):
        stage_options("sriov_vfio", inputs)


# ---- the libvirt host role's hugetlbfs mounts (the tenants stage's, before libvirtd starts)

MOUNTS = {"hugetlbfs_mounts": [{"size": "1G", "path": "/dev/hugepages1G"}]}


def test_libvirt_mounts_is_a_hugepages_call_with_mounts_only():
    options = stage_options("libvirt_mounts", MOUNTS)
    assert options == {"pages": [], "mounts": MOUNTS["hugetlbfs_mounts"], "persist": True, "boot_config": "none"}
    assert stage_module("libvirt_mounts") == "gpuvirt.tenancy.hugepages"
    validated = nested_params("libvirt_mounts", "gpuvirt.tenancy.hugepages", HUGEPAGES_ARGS, options)
    assert validated["mounts"] == MOUNTS["hugetlbfs_mounts"] and validated["boot_config"] == "none"
    # no mount asked for: no call
    assert stage_options("libvirt_mounts", {"hugetlbfs_mounts": []}) == {}
    assert stage_options("libvirt_mounts", {"hugetlbfs_mounts": None}) == {}


@pytest.mark.parametrize("inputs, message", [
    ({"hugetlbfs_mounts": {"size": "1G"}}, r"hugetlbfs_mounts \(libvirt_host_hugetlbfs_mounts\) must be a list, got dict"),
    ({}, "the libvirt_mounts stage takes the inputs hugetlbfs_mounts; missing: hugetlbfs_mounts"),
    (dict(MOUNTS, pages=[]), "not an input of the stage: pages"),
])
def test_libvirt_mounts_bad_inputs_name_the_input(inputs, message):
    with pytest.raises(StageInputError, match=message):
        stage_options("libvirt_mounts", inputs)


# ---- the standalone host_sriov role's sriov_vfs call (the gate does not check it)

SRIOV = {"pfs": [{"pf": "0000:81:00.0", "num_vfs": 4}], "tenants": None, "autoprobe": False, "persist": True, "force": False}


@pytest.mark.parametrize("inputs, expected_pfs", [
    (SRIOV, [{"pf": "0000:81:00.0", "num_vfs": 4, "autoprobe": False, "persist": True, "force": False}]),
    # a PF's own autoprobe wins; the flags as the role's variables give them (text too), unset is false
    (dict(SRIOV, pfs=[{"pf": "a", "num_vfs": 0, "autoprobe": True}, {"pf": "b", "num_vfs": 2}], persist="no", force="true",
          autoprobe=None),
     [{"pf": "a", "num_vfs": 0, "autoprobe": True, "persist": False, "force": True},
      {"pf": "b", "num_vfs": 2, "autoprobe": False, "persist": False, "force": True}]),
    (dict(SRIOV, pfs=[]), []),
])
def test_sriov_is_one_sriov_vfs_call_for_every_pf(inputs, expected_pfs):
    options = stage_options("sriov", inputs)
    # no VF settings: the tenants stage gives the tenants' VFs theirs
    assert options == {"pfs": expected_pfs}
    # a caller of the action that gives no removed input at all: the same call
    assert stage_options("sriov", dict((k, v) for k, v in inputs.items() if k != "tenants")) == options
    assert stage_module("sriov") == "gpuvirt.tenancy.sriov_vfs"
    # the module's own spec takes the call as built
    validated = nested_params("sriov", "gpuvirt.tenancy.sriov_vfs", SRIOV_VFS_ARGS, options)
    assert [pf["pf"] for pf in validated["pfs"]] == [pf["pf"] for pf in expected_pfs]


@pytest.mark.parametrize("inputs, message", [
    (dict(SRIOV, pfs="0000:81:00.0"), r"pfs \(host_sriov_pfs\): expected the PF list "
                                      r"\[\{pf, num_vfs, autoprobe\}\] \(gpuvirt_sriov_pfs\), got '0000:81:00.0'"),
    (dict(SRIOV, pfs=[{"num_vfs": 4}]), "expected the PF list"),
    (dict(SRIOV, pfs=[{"pf": "x"}]), "expected the PF list"),
    (dict(SRIOV, pfs=["x"]), "expected the PF list"),
    (dict(SRIOV, force="maybe"), r"force \(host_sriov_force\) must be a boolean, got 'maybe'"),
    (dict(SRIOV, num_vfs=4), "not an input of the stage: num_vfs"),
])
def test_sriov_bad_inputs_name_the_input(inputs, message):
    with pytest.raises(StageInputError, match=message):
        stage_options("sriov", inputs)


# ---- inputs the stages no longer take: host_vfio_tenants and host_sriov_tenants, refused while set

TENANTS = [{"name": "tenant-a", "vfs": [{"address": "0000:84:10.0", "mac": "52:54:00:a0:00:01", "vlan": 101}]}]


@pytest.mark.parametrize("stage, inputs, variable, gate", [
    ("sriov_vfio", VFIO, "host_vfio_tenants", False),
    # the call built for the preflight gate (host_vfio tasks_from options): refused before the gate reads the host
    ("sriov_vfio", VFIO, "host_vfio_tenants", True),
    ("sriov", SRIOV, "host_sriov_tenants", False),
])
@pytest.mark.parametrize("value", [TENANTS, [], [{"name": "b", "vfs": 1}], {"name": "a"}, "tenant-a"])
def test_a_removed_input_still_set_is_refused_naming_it_and_the_fix(stage, inputs, variable, gate, value):
    with pytest.raises(StageInputError) as err:
        stage_options(stage, dict(inputs, tenants=value), gate=gate)
    assert str(err.value).startswith("tenants (%s) is no longer an input: " % variable), str(err.value)
    assert "Remove %s; give each tenant's vfs as a count in gpuvirt_tenants, with its mac and vlan" % variable in str(err.value)
    assert "gpuvirt.tenancy.tenant_vms" in str(err.value) and "vf_settings" in str(err.value)
    # unset (none, or "" as ansible-core 2.16 templates it), or not given at all: no refusal
    for unset in (None, ""):
        assert stage_options(stage, dict(inputs, tenants=unset)) == stage_options(stage, inputs)
    assert stage_options(stage, dict((k, v) for k, v in inputs.items() if k != "tenants")) == stage_options(stage, inputs)


def test_the_gate_checks_no_sriov_call():
    with pytest.raises(StageInputError, match="the preflight gate checks no sriov call"):
        stage_options("sriov", SRIOV, gate=True)
    assert stage_options("libvirt_mounts", MOUNTS, gate=True)


@pytest.mark.parametrize("stage, role, inputs", [("tenants", "tenant_vms", TENANT_VMS), ("boot", "host_boot", BOOT),
                                                 ("sriov_vfio", "host_vfio", VFIO), ("libvirt_mounts", "libvirt_host", MOUNTS),
                                                 ("sriov", "host_sriov", SRIOV)])
def test_the_role_hands_the_stage_exactly_its_inputs(stage, role, inputs):
    """The role's __<role>_inputs (roles/<role>/vars/main.yml) names every input the stage's mapping
    takes, and no other: the mapping refuses a missing or unknown one."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", role, "vars", "main.yml")
    with open(path, encoding="utf-8") as handle:
        names = re.findall(r"^\s+'(\w+)': %s_" % role, handle.read(), re.M)
    assert sorted(names) == sorted(inputs)
    stage_options(stage, inputs)
    with pytest.raises(StageInputError, match="missing: %s" % names[0]):
        stage_options(stage, dict((k, v) for k, v in inputs.items() if k != names[0]))
