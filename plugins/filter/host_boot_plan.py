# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot stage's decisions (role host_boot), as filters over what the role read:
``host_boot_plan`` (GPU host stack, ConnectX firmware targets), ``host_boot_firmware_tools``,
``host_boot_firmware_settings``, ``host_boot_firmware_outcome``, ``host_boot_services`` and
``host_boot_initramfs``. The logic lives in module_utils ``host_stack`` and ``mlxconfig``."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import host_stack
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError

__metaclass__ = type


def _fail(name, exc):
    return AnsibleFilterError("gpuvirt.tenancy.%s: %s" % (name, exc))


def _loop_results(registered, name):
    """The ``results`` of a registered loop (or the list itself), skipped items left out."""
    results = registered.get("results", []) if isinstance(registered, dict) else registered
    if not isinstance(results, list):
        raise AnsibleFilterError("gpuvirt.tenancy.%s: expected a registered loop result, got %s" % (name, type(registered).__name__))
    return [r for r in results if isinstance(r, dict) and not r.get("skipped")]


def plan(topology, settings=None):
    """{gpu_stack: host_stack.gpu_stack_plan(...), firmware_targets: [{pf, num_vfs}]}."""
    if not isinstance(topology, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_plan: expected the topology of gpuvirt.tenancy.host_topology_info, "
                                 "got %s" % type(topology).__name__)
    settings = settings or {}
    try:
        stack = host_stack.gpu_stack_plan(
            topology, settings.get("tenant_gpus"), settings.get("host_gpus"), settings.get("pre_bind_ids") or [],
            settings.get("pre_bind_driver") or "pci-stub", settings.get("os_family"), settings.get("manage_gpu_stack", True))
        targets = mlx.firmware_targets(topology, settings.get("sriov_pfs") or []) if settings.get("firmware", True) else []
    except InputError as exc:
        raise _fail("host_boot_plan", exc)
    return {"gpu_stack": stack, "firmware_targets": targets}


def firmware_tools(lines):
    """{config, reset}: the tool paths among ``command -v`` output lines."""
    return mlx.pick_tools(lines if isinstance(lines, list) else str(lines or "").splitlines())


def firmware_settings(read):
    """``[{pf, firmware}]`` for mlx_rocev2, from its registered query loop (items ``{pf, num_vfs}``)."""
    wanted = []
    for result in _loop_results(read, "host_boot_firmware_settings"):
        item = result.get("item") or {}
        try:
            wanted.append({"pf": item["pf"], "firmware": mlx.sriov_firmware(result.get("firmware") or {}, int(item["num_vfs"]))})
        except InputError as exc:
            raise _fail("host_boot_firmware_settings", "%s: %s" % (item.get("pf"), exc))
    return wanted


def _pending(registered, name):
    """{pf: pending parameters} of a registered mlx_rocev2 loop (items ``{pf, ...}`` or addresses)."""
    pending = {}
    for result in _loop_results(registered, name):
        item = result.get("item")
        pending[item.get("pf") if isinstance(item, dict) else item] = result.get("pending_parameters") or []
    return pending


def firmware_outcome(set_results, reset_results=None, after_results=None, reset_tool=None, reset_enabled=True):
    """mlxconfig.firmware_outcome over the registered loops of the set, the resets and the read after them."""
    resets = dict((r.get("item"), r.get("rc")) for r in _loop_results(reset_results or [], "host_boot_firmware_outcome"))
    return mlx.firmware_outcome(_pending(set_results, "host_boot_firmware_outcome"), resets,
                                _pending(after_results or [], "host_boot_firmware_outcome"), reset_tool, reset_enabled)


def services(service_facts, stack):
    """The NVIDIA host daemons present on the host that the plan stops and disables."""
    return host_stack.services_to_stop(service_facts or {}, stack or {})


def initramfs(listing, driver_pattern=None, files=None):
    """Why the initramfs must be rebuilt (an empty list: it need not)."""
    return host_stack.initramfs_reasons(listing, driver_pattern, files or [])


class FilterModule:
    """Boot stage filters."""

    def filters(self):
        return {"host_boot_plan": plan, "host_boot_firmware_tools": firmware_tools,
                "host_boot_firmware_settings": firmware_settings, "host_boot_firmware_outcome": firmware_outcome,
                "host_boot_services": services, "host_boot_initramfs": initramfs}
