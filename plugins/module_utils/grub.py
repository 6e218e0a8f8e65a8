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
this call's one GRUB edit: the boot stage of a converged host is one round trip."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import hugepages as hugepages_feature
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot_files import add_diffs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.bootloader import GrubCmdlineEdit
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.cpu_vendor import IOMMU_TABLES, vendor_of_cpuinfo
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.early_driver import EarlyDriver
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.hugepage_sizes import host_sizes_kb
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.stage_record import RECORD_OPTION

__metaclass__ = type


def detect_vendor(fs):
    """intel / amd from /proc/cpuinfo; when that names no vendor this module knows, the
    platform's IOMMU table (DMAR: Intel VT-d, IVRS: AMD-Vi); else the raw vendor_id or None."""
    vendor = vendor_of_cpuinfo(fs.read("/proc/cpuinfo", ""))
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
    input checked) before the first write."""
    pages = None
    if params.get("hugepages") is not None:
        pages_params = nested_params("hugepages", "gpuvirt.tenancy.hugepages without its GRUB options (boot_config, grub_file, "
                                     "variable, bootloader_update: this call's GRUB edit takes the boot sizes)",
                                     hugepages_feature.WITHOUT_GRUB_ARGS, params["hugepages"])
        pages = (hugepages_feature.hugepages_plan(pages_params, host), pages_params)
    vendor, ops = iommu_grub_ops(params, host.fs, extra_args=pages[0].boot_args if pages else ())
    edit = GrubCmdlineEdit(host, ops, grub_file=params["grub_file"], variable=params["variable"],
                           bootloader_update=params["bootloader_update"])
    early = EarlyDriver(host, params["early_driver"]) if params.get("early_driver") else None
    early_plan = early.plan() if early else None
    plan = edit.plan()
    if early:
        add_diffs(run.diff, early.changes)
    run.diff.add(params["grub_file"], plan["before"], plan["after"])
    backup_file = None
    # the hugepages first: in check mode they only report; a shortfall fails before the GRUB edit
    pages_result = hugepages_feature.hugepages_act(pages[0], pages[1], run) if pages else None
    if not run.check_mode:
        if early:
            early.apply(run)
        backup_file = edit.apply(run, backup=params["backup"])
    result = dict((key, plan[key]) for key in ("changed", "cmdline", "args", "running_cmdline", "reboot_required",
                                               "args_missing", "args_unwanted", "bootloader_commands"))
    result.update(vendor=vendor, backup_file=backup_file, early_driver=early_plan, hugepages=pages_result)
    result["changed"] = plan["changed"] or bool(early_plan and early_plan["changed"]) or bool(pages_result and pages_result["changed"])
    return result


# iommu_grub's argument spec (plugins/modules/iommu_grub.py), here so that the preflight gate can
# check a recorded call inside its own (stage_checks).
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
        root=dict(type="path", default="/"),
        record=RECORD_OPTION,
    ),
)
