# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host stage's one module call, built on the controller from its role's inputs (the stage's
desired state as the inventory says it): the role inputs -> module options mapping of each stage,
written once. An input is the role's variable without its prefix; an input that is an option of the
stage's module is taken with that option's type, read from the module's own argument spec (the
same spec the module validates the call with); the few inputs that are not options say where they
go. Nothing about the host is decided here: the module decides on the host.

Used by the actions ``stage_options`` (the call for the preflight gate), ``gate_check`` (the gate's
check of exactly this call) and ``stage_call`` (the call itself, where the gate did not answer it)."""

from __future__ import absolute_import, division, print_function

from ansible.module_utils.common.validation import check_type_int
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import STAGE_MODULES
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain

__metaclass__ = type

# a key of the options left out: unset, the module's own default applies
UNSET = object()
# the empty value of a collection the stage always sends (a bool or a number has none: unset, it is left out)
EMPTY = {"list": list, "dict": dict}


class StageInputError(ValueError):
    """A role input the stage's call cannot take: the message names the input and the fix."""


def _option(role, name, value, spec, always):
    """``value`` of input ``name`` as the option of type ``spec['type']``; unset (None, or "": how
    ansible-core 2.16 templates a variable set to none) is UNSET (left out: the module's default
    applies), or with ``always``, for a list or dict option without a default in ``spec``, the
    type's empty value (an option the stage always sends). A bool and an int convert as the
    module's argument spec converts them (ansible-core's ``boolean`` and ``check_type_int``, so
    2.5 is not 2); a list or dict is not taken for a scalar option."""
    kind = spec.get("type", "str")
    variable = "%s_%s" % (role, name)
    if value is None or value == "":
        if always and kind in EMPTY and spec.get("default") is None:
            return EMPTY[kind]()
        return UNSET
    if kind in ("list", "dict"):
        wanted = list if kind == "list" else dict
        if not isinstance(value, wanted):
            raise StageInputError("%s (%s) must be a %s, got %s: give %s as a YAML %s"
                                  % (name, variable, wanted.__name__, type(value).__name__, variable,
                                     "list" if kind == "list" else "mapping"))
        return wanted(value)
    if kind in ("str", "path") and isinstance(value, (list, dict)):
        raise StageInputError("%s (%s) must be a single value, got a %s: give %s one %s"
                              % (name, variable, type(value).__name__, variable, "path" if kind == "path" else "string"))
    try:
        if kind == "bool":
            return boolean(value, strict=True)
        if kind == "int":
            if isinstance(value, bool):
                raise TypeError(value)
            return check_type_int(value)
    except (TypeError, ValueError):
        raise StageInputError("%s (%s) must be a%s, got %r: give %s %s"
                              % (name, variable, "n integer" if kind == "int" else " boolean", value, variable,
                                 "a whole number" if kind == "int" else "true or false"))
    return value


def _flag(role, name, value):
    """A yes/no input that is not an option (unset is no)."""
    return _option(role, name, value, {"type": "bool"}, False) is True


# Inputs a stage no longer takes: its role hands the variable on all the same (``| default(none)``
# in its vars/main.yml), so that an inventory that still sets it is refused, naming the variable
# and what to give instead, before any call (the variable would be read by nothing otherwise).
TENANT_VFS_FIX = ("give each tenant's vfs as a count in gpuvirt_tenants, with its mac and vlan: the tenants stage "
                  "(gpuvirt.tenancy.tenant_vms) picks its VFs near its GPU and sets their MAC, VLAN, spoof check on and "
                  "trust off, kept at boot (for settings of VFs named by address, gpuvirt.tenancy.sriov_vfs's vf_settings)")
REMOVED_INPUTS = {
    "sriov_vfio": {"tenants": "the SR-IOV/VFIO stage sets no tenant's VF settings any more. Remove %s; " + TENANT_VFS_FIX},
    "sriov": {"tenants": "the host_sriov role sets no tenant's VF settings any more. Remove %s; " + TENANT_VFS_FIX},
}


def _removed(stage, role, given):
    """Each removed input of ``stage`` (:data:`REMOVED_INPUTS`) unset (None, or "" as ansible-core
    2.16 templates none), else StageInputError naming its variable and the fix."""
    for name, fix in sorted(REMOVED_INPUTS.get(stage, {}).items()):
        if given.get(name) is not None and given.get(name) != "":
            variable = "%s_%s" % (role, name)
            raise StageInputError("%s (%s) is no longer an input: %s" % (name, variable, fix % variable))


def _inputs(stage, role, inputs, names):
    """``inputs`` checked: a dict of exactly ``names``, and of the stage's removed inputs, which
    may be given, unset (:func:`_removed`)."""
    if not isinstance(inputs, dict):
        raise StageInputError("inputs: give the %s stage's inputs as a dict (the %s role's inputs without the prefix), "
                              "got %s" % (stage, role, type(inputs).__name__))
    missing = sorted(set(names) - set(inputs))
    unknown = sorted(set(inputs) - set(names) - set(REMOVED_INPUTS.get(stage, ())))
    if missing or unknown:
        raise StageInputError("inputs: the %s stage takes the inputs %s; %s" % (
            stage, ", ".join(sorted(names)), "; ".join(
                ([("missing: %s" % ", ".join(missing))] if missing else [])
                + ([("not an input of the stage: %s" % ", ".join(unknown))] if unknown else []))))
    _removed(stage, role, inputs)
    return plain(inputs)


def _tenants(inputs):
    """The tenants stage's tenant_domain call with ``tenants``: the stage's own options always sent
    (an unset one empty), every tenant's settings (module_utils tenant_domain_call
    TENANT_STAGE_SETTINGS) left out when unset; the GPU pool (``gpus``: none is every GPU, [] none)
    and the PFs whose VFs are given (``vf_pfs``) into ``policy``; in a preview (``preview`` true)
    what the earlier stages will leave (``preview_wanted``) as ``preview``. The Fabric Manager
    service VM (``fabric_vm``) and where the Fabric Manager is reached (``fabric_manager``) are sent
    only when given, so that a call without them is as before (it defines no service VM and asks no
    Fabric Manager)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_domain_call as call

    spec = call.TENANT_DOMAIN_ARGS["argument_spec"]
    when_given = ("fabric_manager", "fabric_vm")
    always = [name for name in sorted(call.TENANT_STAGE_OPTIONS) if name != "preview" and name not in when_given]
    folded = ("gpus", "vf_pfs", "preview", "preview_wanted")
    given = _inputs("tenants", "tenant_vms", inputs, always + list(when_given) + list(call.TENANT_STAGE_SETTINGS) + list(folded))
    options = {}
    for name in always + list(when_given) + list(call.TENANT_STAGE_SETTINGS):
        if name in when_given and given[name] in ({}, None, ""):
            continue
        value = _option("tenant_vms", name, given[name], spec[name], name in always)
        if value is not UNSET:
            options[name] = value
    if given["gpus"] not in (None, ""):
        options["policy"]["gpus"] = _option("tenant_vms", "gpus", given["gpus"], {"type": "list"}, True)
    if given["vf_pfs"]:
        options["policy"]["vf_pfs"] = _option("tenant_vms", "vf_pfs", given["vf_pfs"], {"type": "list"}, True)
    if _flag("tenant_vms", "preview", given["preview"]):
        wanted = _option("tenant_vms", "preview_wanted", given["preview_wanted"], {"type": "dict"}, True)
        options["preview"] = dict((key, wanted.get(key) or list(sub.get("default") or []))
                                  for key, sub in sorted(spec["preview"]["options"].items()))
    return options


def _pick(role, given, spec, names, always):
    """{option: value} for ``names`` (option -> the input it takes), each of the type of its option in
    ``spec``; an unset one left out, or with ``always`` the type's empty value."""
    options = {}
    for option, name in names.items():
        value = _option(role, name, given[name], spec[option], always)
        if value is not UNSET:
            options[option] = value
    return options


# The boot stage: iommu_grub's options the role gives as they are (the role's input of the same name,
# but variable: host_boot_grub_variable), then its sub-options under gpu_stack and firmware, an input
# each: of the same name, or the one named here.
BOOT_DIRECT = ("iommu", "vendor", "passthrough", "pre_bind_ids", "pre_bind_driver", "args", "grub_file", "variable",
               "bootloader_update")
BOOT_RENAMED = {"gpu_stack": {"manage": "gpu_host_stack", "initramfs": "early_driver_initramfs"},
                "firmware": {"install": "firmware_install", "reset": "firmware_reset", "reset_level": "firmware_reset_level",
                             "reset_ok": "reboot_ok"}}
# computed from other inputs: firmware.ats_pfs (firmware_ats), acs (acs); the hugepages call (the
# hugepages module's options, run inside iommu_grub's call) from the hugepages_* inputs
BOOT_OTHER = ("firmware_sriov", "firmware_ats", "acs", "hugepages", "hugepages_at_boot", "hugepages_persist", "hugepages_unit",
              "hugepages_mounts")


def _boot(inputs):
    """The boot stage's iommu_grub call: the options given as they are, the GPU host stack always
    (gpu_stack), the ConnectX firmware when firmware_sriov and sriov_pfs ask for it (with the PFs
    that get ATS), ACS per path when asked, the hugepages call when pages or mounts are asked."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import grub, hugepages

    spec = grub.IOMMU_GRUB_ARGS["argument_spec"]
    parts = dict((part, dict((sub, BOOT_RENAMED[part].get(sub, sub)) for sub in spec[part]["options"] if sub != "ats_pfs"))
                 for part in ("gpu_stack", "firmware"))
    names = set(BOOT_DIRECT) | set(BOOT_OTHER) | set(parts["gpu_stack"].values()) | set(parts["firmware"].values())
    given = _inputs("boot", "host_boot", inputs, sorted(names))
    options = _pick("host_boot", given, spec, dict((name, name) for name in BOOT_DIRECT), False)
    options["gpu_stack"] = _pick("host_boot", given, spec["gpu_stack"]["options"], parts["gpu_stack"], True)
    if _flag("host_boot", "firmware_sriov", given["firmware_sriov"]) and given["sriov_pfs"]:
        options["firmware"] = _pick("host_boot", given, spec["firmware"]["options"], parts["firmware"], True)
        ats = _ats_pfs(given["firmware_ats"], given["sriov_pfs"])
        if ats:
            options["firmware"]["ats_pfs"] = ats
    acs = _acs(given["acs"], given)
    if acs is not None:
        options["acs"] = acs
    if given["hugepages"] or given["hugepages_mounts"]:
        pages = hugepages.MODULE_ARGS["argument_spec"]
        options["hugepages"] = _pick("host_boot", given, pages, {"pages": "hugepages", "at_boot": "hugepages_at_boot",
                                                                 "persist": "hugepages_persist", "mounts": "hugepages_mounts"}, True)
        unit = _option("host_boot", "hugepages_unit", given["hugepages_unit"], {"type": "str"}, False)
        if unit is not UNSET:
            options["hugepages"]["persist_unit"] = "/etc/systemd/system/%s" % unit
        options["hugepages"]["enable_units"] = True
    return options


def _ats_pfs(wanted, sriov_pfs):
    """firmware.ats_pfs from host_boot_firmware_ats: false (none, the default), true (every PF of
    sriov_pfs: their VFs go to the tenants), or a list of those PFs (the ones whose VFs go to GPU tenants)."""
    if wanted in (None, "", False):
        return []
    if wanted is True:
        return [str(item["pf"]) for item in sriov_pfs or [] if isinstance(item, dict) and item.get("pf")]
    if not isinstance(wanted, (list, tuple)) or not all(isinstance(pf, str) and pf for pf in wanted):
        raise StageInputError("firmware_ats (host_boot_firmware_ats) must be true, false or a list of PFs of gpuvirt_sriov_pfs "
                              "whose VFs go to GPU tenants, got %r" % (wanted,))
    return list(wanted)


def _acs(wanted, given):
    """iommu_grub's acs from host_boot_acs: false (the default: none), true, or {flags}; the
    tenants' GPUs (host_boot_tenant_gpus, else the module's) and the PFs whose VFs go to them
    (those of host_boot_firmware_ats when it lists them, else every PF of sriov_pfs)."""
    if wanted in (None, "", False):
        return None
    if wanted is not True and not (isinstance(wanted, dict) and set(wanted) <= {"flags"}):
        raise StageInputError("acs (host_boot_acs) must be true, false or {flags: <config_acs flags>}, got %r" % (wanted,))
    ats = given["firmware_ats"]
    options = {"gpus": list(given["tenant_gpus"] or []),
               "pfs": list(ats) if isinstance(ats, (list, tuple)) else _ats_pfs(True, given["sriov_pfs"])}
    if isinstance(wanted, dict) and wanted.get("flags") is not None:
        options["flags"] = str(wanted["flags"])
    return options


# The SR-IOV/VFIO stage: the vfio_bind options the role gives, an input each of the same name (the
# module's other forms, devices by id, VFs of a PF, a sriov_vfs request, are not the stage's).
SRIOV_VFIO_OPTIONS = ("sriov_pfs", "gpus", "gpu_ids", "devices", "group_policy", "autoprobe", "persist", "force",
                      "fabric_vm")


def _sriov_vfio(inputs):
    """The SR-IOV/VFIO stage's vfio_bind call: the inputs as the options of the same name (a list
    always sent, [] when unset; another option left out when unset), or {} when they name no PF,
    GPU or device (the inventory asks nothing of the stage: no call). ``fabric_vm`` (the Fabric
    Manager service VM, whose NVSwitches the call binds) is sent only when given."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import vfio

    spec = vfio.VFIO_BIND_ARGS["argument_spec"]
    given = _inputs("sriov_vfio", "host_vfio", inputs, SRIOV_VFIO_OPTIONS)
    options = {}
    for name in SRIOV_VFIO_OPTIONS:
        if name == "fabric_vm" and given[name] in ({}, None, ""):
            continue
        value = _option("host_vfio", name, given[name], spec[name], spec[name]["type"] == "list")
        if value is not UNSET:
            options[name] = value
    return options if any(options.get(key) for key in ("sriov_pfs", "gpus", "devices", "fabric_vm")) else {}


# The libvirt host role's hugetlbfs mounts (the tenants stage's, before libvirtd starts): a hugepages call
# with mounts only, the input libvirt_host_hugetlbfs_mounts as the option mounts; no pages, no boot-time
# args (boot_config none: the boot stage's call owns the kernel command line), the mount units
# written and enabled at every boot (persist).
LIBVIRT_MOUNTS_FIXED = {"persist": True, "boot_config": "none"}


def _libvirt_mounts(inputs):
    """The libvirt host role's hugetlbfs mounts call (hugepages with ``mounts`` only), or {} when no
    mount is asked for (no call)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages

    spec = hugepages.MODULE_ARGS["argument_spec"]
    given = _inputs("libvirt_mounts", "libvirt_host", inputs, ("hugetlbfs_mounts",))
    mounts = _option("libvirt_host", "hugetlbfs_mounts", given["hugetlbfs_mounts"], spec["mounts"], False)
    if mounts is UNSET or not mounts:
        return {}
    options = {"pages": [], "mounts": mounts}
    options.update((name, _option("libvirt_host", name, LIBVIRT_MOUNTS_FIXED[name], spec[name], False))
                   for name in ("persist", "boot_config"))
    return options


# The standalone host_sriov role's one sriov_vfs call (the SR-IOV/VFIO stage makes the same VFs inside its
# vfio_bind call instead): every PF of ``pfs`` ([{pf, num_vfs, autoprobe}], as gpuvirt_sriov_pfs),
# module_utils sriov_vfio/stage.pf_request (which vfio_bind runs on the host for its own request). The
# gate does not check it.
SRIOV_INPUTS = ("pfs", "autoprobe", "persist", "force")


def _sriov(inputs):
    """The host_sriov role's sriov_vfs call, ``{pfs}``: each PF with its count, its own
    ``autoprobe`` or the role's, ``persist`` and ``force``. A flag unset is false, as the role's
    ``| bool`` took it."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import stage
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

    given = _inputs("sriov", "host_sriov", inputs, SRIOV_INPUTS)
    flags = [_flag("host_sriov", name, given[name]) for name in ("autoprobe", "persist", "force")]
    try:
        return stage.pf_request(given["pfs"], *flags)
    except InputError as exc:
        raise StageInputError("pfs (host_sriov_pfs): %s" % exc)


STAGE_OPTIONS = {"boot": _boot, "sriov_vfio": _sriov_vfio, "tenants": _tenants, "libvirt_mounts": _libvirt_mounts,
                 "sriov": _sriov}
# each stage's module: the gate's (module_utils stage_checks STAGE_MODULES: it checks the same calls), and
# the standalone host_sriov role's, which the gate does not check
CALL_MODULES = dict(STAGE_MODULES, sriov="sriov_vfs")


def stage_module(stage):
    """The module of ``stage``'s call (module_utils stage_checks STAGE_MODULES: the gate checks the same;
    ``sriov``, the standalone host_sriov role's, sriov_vfs)."""
    if stage not in STAGE_OPTIONS:
        raise StageInputError("stage: %r is not a host stage whose call is built here; give one of %s"
                              % (stage, ", ".join(sorted(STAGE_OPTIONS))))
    return "gpuvirt.tenancy." + CALL_MODULES[stage]


def stage_options(stage, inputs, gate=False):
    """The options of ``stage``'s one call for the role's ``inputs``; StageInputError names a bad input.
    ``gate``: only a stage whose call the preflight gate checks."""
    stage_module(stage)
    if gate and stage not in STAGE_MODULES:
        raise StageInputError("stage: the preflight gate checks no %s call; give one of %s, or make the call with "
                              "gpuvirt.tenancy.stage_call" % (stage, ", ".join(sorted(STAGE_MODULES))))
    return STAGE_OPTIONS[stage](inputs)
