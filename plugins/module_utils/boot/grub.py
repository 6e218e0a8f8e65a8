# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The iommu_grub feature: the kernel command line for device passthrough (IOMMU on in
passthrough mode, devices pre-bound from boot, other args), written into the GRUB defaults
file by :class:`bootloader.GrubCmdlineEdit`. The file's text is edited by the pure
:mod:`grub_defaults`; the operations on the args are :mod:`kernel_args`. With
``early_driver``, the files that load the stub driver early (:mod:`early_driver`) are written
in the same call, so that one module decides everything the next boot needs. With ``hugepages``
the hugepages feature runs in the same call too (:mod:`hugepages`), its boot sizes going into
this call's one GRUB edit. With ``gpu_stack`` and ``firmware`` the rest of the boot stage is
decided here too, on the host, from the stage's desired state (:mod:`boot_stage`): the NVIDIA
host stack (modprobe.d, its daemons, the pre-binding ids and blacklist args, the early stub
driver, the initramfs), and the ConnectX firmware with its reset. The boot stage is one call."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages as hugepages_feature
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import add_diffs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.bootloader import GrubCmdlineEdit, quoted_arg_refusal
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import acs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx.pf_lookup import resolve_pf
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpu_vendor import IOMMU_TABLES, vendor_of_cpuinfo
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.early_driver import EarlyDriver
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import host_sizes_kb
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.locks import root_lock
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params

__metaclass__ = type


def detect_vendor(fs):
    """intel / amd from /proc/cpuinfo; when that names no vendor this module knows, the
    platform's IOMMU table (DMAR: Intel VT-d, IVRS: AMD-Vi); else the raw vendor_id or None."""
    vendor = vendor_of_cpuinfo(fs.read_keys("/proc/cpuinfo", ("vendor_id",)))
    if vendor in ("intel", "amd"):
        return vendor
    for table, table_vendor in IOMMU_TABLES:
        if fs.exists("/sys/firmware/acpi/tables/" + table):
            return table_vendor
    return vendor


def iommu_grub_ops(params, fs, extra_args=()):
    """(vendor, the kernel_args operations the iommu_grub options ask for, ``extra_args`` (the
    hugepages boot sizes) after ``args``); InputError on bad input."""
    vendor = params["vendor"]
    if vendor == "auto":
        detected = detect_vendor(fs)
        if detected not in ("intel", "amd"):
            raise InputError("vendor: auto could not tell Intel from AMD in /proc/cpuinfo (vendor_id %s); "
                             "set vendor: intel or vendor: amd" % (detected or "missing"))
        vendor = detected
    ops = kernel_args.iommu_ops(vendor, params["iommu"], params["passthrough"])
    ops += kernel_args.pre_bind_ops(params["pre_bind_ids"], params["pre_bind_driver"])
    ops += kernel_args.args_ops(list(params["args"]) + list(extra_args), hugepage_sizes_kb=host_sizes_kb(fs))
    return vendor, ops


def iommu_grub(params, host, run):
    """The iommu_grub module: decide, then write the early driver's files and the GRUB
    file and regenerate the boot menu unless in check mode. Everything is decided (and every
    input checked) before the first write. One call at a time per root (:func:`locks.root_lock`):
    a second call decides from what the first wrote, so neither loses the other's args."""
    with root_lock(host.root, "iommu_grub"):
        return _iommu_grub(params, host, run)


def _iommu_grub(params, host, run):
    pages = None
    if params.get("hugepages") is not None:
        pages_params = nested_params("hugepages", "gpuvirt.tenancy.hugepages without its GRUB options (boot_config, grub_file, "
                                     "variable, bootloader_update: this call's GRUB edit takes the boot sizes)",
                                     hugepages_feature.WITHOUT_GRUB_ARGS, params["hugepages"])
        pages = (hugepages_feature.hugepages_plan(pages_params, host), pages_params)
    stack_spec, fw_spec, acs_spec = params.get("gpu_stack"), params.get("firmware"), params.get("acs")
    stack = firmware = model = None
    if stack_spec is not None or fw_spec is not None or acs_spec is not None:
        # imported here: only the boot stage's call needs the host model and the firmware tools
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import stage as boot_stage
        model = boot_stage.read_model(host, (stack_spec or {}).get("gpu_ids"), (fw_spec or {}).get("nic_ids"))
        if stack_spec is not None:
            stack = boot_stage.GpuStack(host, stack_spec, model, params["pre_bind_ids"], params["pre_bind_driver"])
        if fw_spec is not None:
            firmware = boot_stage.Firmware(host, fw_spec, model)
    call = dict(params)
    early_spec = params.get("early_driver")
    extra_args = list(pages[0].boot_args) if pages else []
    if stack:
        call["pre_bind_ids"] = stack.pre_bind_ids
        extra_args = list(stack.kernel_args) + extra_args
        if stack_spec.get("early_driver") and stack.pre_bind_ids and not early_spec:
            early_spec = {"name": params["pre_bind_driver"], "softdep_for": stack_spec.get("early_driver_before") or [],
                          "initramfs": bool(stack_spec.get("initramfs"))}
    vendor, ops = iommu_grub_ops(call, host.fs, extra_args=extra_args)
    acs_result = acs_decision(host, acs_spec, model, stack, firmware) if acs_spec is not None else None
    if acs_result and acs_result["written"]:
        ops.append(kernel_args.ConfigAcs(acs_result["arg"].split("=", 2)[2]))
    elif acs_result and not acs_result["bridges"]:
        # no bridge on the tenants' paths: a config_acs an earlier decision wrote goes
        ops.append(kernel_args.ConfigAcs(None))
    for note in (acs_result or {}).get("notes") or []:
        run.warn(note)
    edit = GrubCmdlineEdit(host, ops, grub_file=params["grub_file"], variable=params["variable"],
                           bootloader_update=params["bootloader_update"])
    early = EarlyDriver(host, early_spec) if early_spec else None
    early_plan = early.plan() if early else None
    plan = edit.plan()
    if early:
        add_diffs(run.diff, early.changes)
    stack_result = stack.plan(run.diff) if stack else None
    initramfs = initramfs_result = None
    if stack and stack_spec.get("initramfs") and (stack_result["active"] or (early_plan or {}).get("in_initramfs")):
        initramfs = boot_stage.Initramfs(host, stack_result["os_family"])
        initramfs_result = initramfs.plan(early_plan, stack_result, boot_stage.driver_file_pattern(params["pre_bind_driver"]))
    fw_result = firmware.plan(run.diff) if firmware else None
    run.diff.add(params["grub_file"], plan["before"], plan["after"])
    backup_file = None
    # the hugepages first: in check mode they only report; a shortfall fails before the GRUB edit
    pages_result = hugepages_feature.hugepages_act(pages[0], pages[1], run) if pages else None
    if not run.check_mode:
        if early:
            early.apply(run)
        if stack:
            stack.apply(run)
        backup_file = edit.apply(run, backup=params["backup"])
        if initramfs:
            initramfs.apply(run)
        if firmware:
            firmware.apply(run, fw_result)
    result = dict((key, plan[key]) for key in ("changed", "cmdline", "args", "running_cmdline", "reboot_required",
                                               "args_missing", "args_unwanted", "args_in_other_variable",
                                               "bootloader_commands"))
    result.update(vendor=vendor, backup_file=backup_file, early_driver=early_plan, hugepages=pages_result,
                  gpu_stack=stack_result, initramfs=initramfs_result, firmware=fw_result, acs=acs_result)
    result["changed"] = (plan["changed"] or bool(early_plan and early_plan["changed"])
                         or bool(pages_result and pages_result["changed"])
                         or any(bool(part and (part.get("changed") or part.get("rebuild")))
                                for part in (stack_result, initramfs_result, fw_result)))
    early_pending = bool(early_plan and early_plan.get("reboot_required"))
    result["reboot_required"] = plan["reboot_required"] or early_pending
    result["firmware_pending"] = list((fw_result or {}).get("pending") or [])
    result["cold_boot_required"] = list((fw_result or {}).get("cold_boot") or [])
    result["pending"] = pending_reasons(result)
    return result


def acs_decision(host, spec, model, stack, firmware):
    """ACS per path (boot/acs.py) for the tenants' GPUs (``acs.gpus``, else the GPU stack's tenant
    GPUs, else every GPU of the host model) and the PFs whose VFs go to them (``acs.pfs``, else the
    firmware targets), with the running kernel's release."""
    gpus = list(spec.get("gpus") or [])
    if not gpus:
        gpus = list(stack.plan_["tenant_gpus"]) if stack else [g["address"] for g in model.get("gpus") or []]
    pfs = [resolve_pf(model, pf) or str(pf) for pf in spec.get("pfs") or []]
    if not pfs and firmware:
        pfs = [t["pf"] for t in firmware.targets]
    release = (host.fs.read("/proc/sys/kernel/osrelease") or "").strip() or None
    return acs.acs_plan(model, gpus, pfs, spec.get("flags") or acs.DEFAULT_FLAGS, release,
                        list_refused=quoted_arg_refusal(host.fs, host.commands.which))


def pending_reasons(result):
    """What this boot still waits for, in words (empty: nothing)."""
    reasons = []
    if result["args_missing"] or result["args_unwanted"]:
        reasons.append("the kernel command line (%s)" % " ".join(
            ["+" + a for a in result["args_missing"]] + ["-" + a for a in result["args_unwanted"]]))
    if (result.get("early_driver") or {}).get("reboot_required"):
        reasons.append("the early stub driver %s (loaded at the next boot)" % result["early_driver"]["name"])
    if result["cold_boot_required"]:
        reasons.append("a cold boot for the ConnectX firmware of %s" % ", ".join(result["cold_boot_required"]))
    elif result["firmware_pending"]:
        reasons.append("a firmware reset of %s" % ", ".join(result["firmware_pending"]))
    return reasons


# iommu_grub's argument spec (plugins/modules/iommu_grub.py), here so that the preflight gate can
# check this stage's call inside its own (stage_checks).
IOMMU_GRUB_ARGS = dict(
    argument_spec=dict(
        iommu=dict(type="bool", default=True),
        vendor=dict(type="str", default="auto", choices=["auto", "intel", "amd"]),
        passthrough=dict(type="bool"),
        pre_bind_ids=dict(type="list", elements="str", default=[]),
        pre_bind_driver=dict(type="str", default="pci-stub", choices=["pci-stub", "vfio-pci"]),
        args=dict(type="list", elements="dict", default=[], options=dict(
            name=dict(type="str", required=True),
            value=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent"]),
        )),
        grub_file=dict(type="path", default="/etc/default/grub"),
        variable=dict(type="str", default="GRUB_CMDLINE_LINUX",
                      choices=["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"]),
        bootloader_update=dict(type="str", default="auto", choices=["auto", "none"]),
        backup=dict(type="bool", default=False),
        hugepages=dict(type="dict"),
        early_driver=dict(type="dict", options=dict(
            name=dict(type="str", required=True),
            softdep_for=dict(type="list", elements="str", default=[]),
            initramfs=dict(type="bool", default=False),
        )),
        gpu_stack=dict(type="dict", options=dict(
            tenant_gpus=dict(type="list", elements="str", default=[]),
            host_gpus=dict(type="list", elements="str", default=[]),
            gpu_ids=dict(type="list", elements="str", default=[]),
            manage=dict(type="bool", default=True),
            early_driver=dict(type="bool", default=True),
            early_driver_before=dict(type="list", elements="str", default=["nouveau", "nvidia", "nvidiafb"]),
            initramfs=dict(type="bool", default=True),
        )),
        firmware=dict(type="dict", options=dict(
            sriov_pfs=dict(type="list", elements="dict", default=[]),
            ats_pfs=dict(type="list", elements="str", default=[]),
            nic_ids=dict(type="list", elements="str", default=[]),
            install=dict(type="bool", default=False),
            reset=dict(type="bool", default=True),
            reset_level=dict(type="int", default=3, choices=[0, 3, 4]),
            reset_ok=dict(type="bool", default=False),
        )),
        acs=dict(type="dict", options=dict(
            gpus=dict(type="list", elements="str", default=[]),
            pfs=dict(type="list", elements="str", default=[]),
            flags=dict(type="str", default=acs.DEFAULT_FLAGS),
        )),
        root=dict(type="path", default="/"),
    ),
)
