# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vocabulary leaf and pure decisions: the NVIDIA host stack kept off the tenants' GPUs.

A GPU that goes to a tenant must not be claimed at boot by a host driver (nouveau, or the
nvidia modules), nor held by the host daemons that open every GPU the nvidia driver has
(nvidia-persistenced, nvidia-fabricmanager, DCGM's host engine). What the boot stage writes
for that depends on whether the host keeps GPUs of its own:

- no GPU stays with the host: nouveau and every nvidia module are blacklisted in modprobe.d
  and on the kernel command line, ``install <module> /bin/false`` guards the nvidia modules
  against an explicit ``modprobe``, and the daemons are stopped and disabled;
- some GPUs stay with the host (``gpuvirt_host_gpus``, or GPUs left out of ``gpuvirt_gpus``):
  only nouveau is blacklisted (the host's GPUs need the nvidia driver), the daemons stay, and
  the tenant GPUs are pre-bound by address: an ``install nvidia`` hook writes the pre-bind
  driver into each tenant GPU's ``driver_override`` before the nvidia module loads. Ids of
  host GPUs are dropped from the pre-binding by ``vendor:device`` id, which would take the
  host's GPUs too.

Nothing here reads or changes the host: the role hands in the host model and the answers of
``service_facts`` and of the initramfs listing.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address

__metaclass__ = type

NOUVEAU = "nouveau"
NVIDIA_MODULES = ("nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidiafb")
# nvidia-dcgm is the unit of the datacenter-gpu-manager package; older packages called it dcgm.
SERVICES = ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "dcgm")
MODPROBE_FILE = "/etc/modprobe.d/gpuvirt-nvidia-host.conf"
PREBIND_ID_PARAMS = ("pci-stub.ids", "pci_stub.ids", "vfio-pci.ids", "vfio_pci.ids")


def _id(gpu):
    """``10de:20b2`` from a host-model GPU (``0x10de``, ``0x20b2``)."""
    return "%s:%s" % (str(gpu.get("vendor_id") or "")[-4:], str(gpu.get("device_id") or "")[-4:])


def _addresses(values, option):
    result = []
    for value in values or []:
        address = normalize_address(str(value))
        if not address:
            raise InputError("%s: %r is not a PCI address (0000:07:00.0)" % (option, value))
        result.append(address)
    return result


def running_prebind_ids(cmdline):
    """The ``vendor:device`` ids pre-bound by the running kernel's command line."""
    ids = set()
    for arg in cmdline or []:
        name, _sep, value = arg.partition("=")
        if name in PREBIND_ID_PARAMS:
            ids.update(i.strip().lower() for i in value.split(",") if i.strip())
    return ids


def split_gpus(topology, tenant_gpus=None, host_gpus=None):
    """(tenant GPU addresses, host GPU addresses, {address: GPU}) of the host model. Host
    GPUs: those named in ``host_gpus``, and, when ``tenant_gpus`` is given, every GPU it
    leaves out (a GPU given to no tenant stays with the host and keeps its driver)."""
    gpus = dict((g["address"], g) for g in topology.get("gpus") or [])
    host = _addresses(host_gpus, "gpuvirt_host_gpus")
    tenant = _addresses(tenant_gpus, "gpuvirt_gpus") if tenant_gpus else [a for a in sorted(gpus) if a not in host]
    unknown = [a for a in host if a not in gpus]
    if unknown:
        raise InputError("gpuvirt_host_gpus: %s is not a GPU of this host (GPUs: %s)"
                         % (", ".join(unknown), ", ".join(sorted(gpus)) or "none"))
    both = sorted(set(host) & set(tenant))
    if both:
        raise InputError("gpuvirt_host_gpus and gpuvirt_gpus both name %s: a GPU goes to the tenants or stays "
                         "with the host, not both" % ", ".join(both))
    if tenant_gpus:
        host = host + [a for a in sorted(gpus) if a not in tenant and a not in host]
    return tenant, host, gpus


def gpu_stack_plan(topology, tenant_gpus=None, host_gpus=None, pre_bind_ids=(), pre_bind_driver="pci-stub",
                   os_family=None, manage=True):
    """What the boot stage does about the host's GPU drivers (a dict, JSON-ready):

    - ``pre_bind_ids``: the ids to pre-bind by id (those of host GPUs left out);
    - ``address_prebind``: tenant GPUs pre-bound by address (driver_override before nvidia loads);
    - ``active``: NVIDIA GPUs go to tenants, so the host stack is kept off them;
    - ``blacklist``, ``modprobe_conf`` (the text of :data:`MODPROBE_FILE`), ``kernel_args``
      (iommu_grub ``args`` items), ``services`` (units stopped and disabled when present);
    - ``notes``: what was decided and why, for the role's messages.
    """
    tenant, host, gpus = split_gpus(topology, tenant_gpus, host_gpus)
    # read as the kernel argument reads them (gpuvirt_gpu_pci_ids may give 0x10de:0x20b2), so that they compare with _id()
    wanted_ids = kernel_args.validate_pci_ids(pre_bind_ids)
    host_ids = dict((_id(gpus[a]), a) for a in host)
    clashing = [i for i in wanted_ids if i in host_ids]
    notes = []
    stale = sorted(running_prebind_ids(topology.get("cmdline")) & set(host_ids))
    if stale:
        raise InputError("the running kernel pre-binds %s by id (pci-stub.ids/vfio-pci.ids), which also takes the host's "
                         "GPU(s) %s at boot: remove that id from GRUB_CMDLINE_LINUX in /etc/default/grub (and "
                         "update-grub / grub2-mkconfig), then run the boot stage again; it pre-binds the tenant GPUs by "
                         "address instead" % (", ".join(stale), ", ".join(sorted(a for i, a in host_ids.items() if i in stale))))
    final_ids = [i for i in wanted_ids if i not in clashing]
    nvidia_tenant = [a for a in tenant if (gpus.get(a) or {}).get("vendor_id") == pci_ids.NVIDIA]
    # With host GPUs the nvidia driver stays loadable: a tenant GPU not held by id is held by address.
    address_prebind = sorted(a for a in nvidia_tenant if _id(gpus[a]) not in final_ids) if host else []
    if clashing:
        notes.append("%s is also the id of host GPU(s) %s: not pre-bound by id%s"
                     % (", ".join(clashing), ", ".join(sorted(host_ids[i] for i in clashing)),
                        "; tenant GPU(s) %s pre-bound by address (driver_override before the nvidia module loads)"
                        % ", ".join(address_prebind) if address_prebind else ""))
    plan = {"tenant_gpus": tenant, "host_gpus": host, "nvidia_tenant_gpus": nvidia_tenant,
            "pre_bind_ids": final_ids, "address_prebind": address_prebind,
            "active": bool(manage and nvidia_tenant), "blacklist": [], "modprobe_conf": None,
            "kernel_args": [], "services": [], "notes": notes}
    if not plan["active"]:
        return plan
    keep_nvidia = bool(host)
    blacklist = [NOUVEAU] + ([] if keep_nvidia else list(NVIDIA_MODULES))
    plan["blacklist"] = blacklist
    plan["modprobe_conf"] = render_modprobe_conf(blacklist, keep_nvidia, plan["address_prebind"], pre_bind_driver)
    plan["kernel_args"] = blacklist_args(blacklist, os_family, topology.get("cmdline"))
    plan["services"] = [] if keep_nvidia else list(SERVICES)
    if keep_nvidia:
        notes.append("GPU(s) %s stay with the host: the nvidia modules and services stay; only nouveau is blacklisted"
                     % ", ".join(host))
    note = nvswitch_note(topology, keep_nvidia)
    if note:
        notes.append(note)
    return plan


def nvswitch_note(topology, keep_nvidia):
    """What the host stack's plan does not say about an HGX board's NVSwitches (None without any):
    the tenants' GPUs reach NVLink through them only with the Shared NVSwitch virtualization model,
    whose service VM the later stages make where the inventory asks for it (``gpuvirt_fabric_vm``:
    the SR-IOV/VFIO stage binds the NVSwitches to vfio-pci, the tenants stage gives them to it)."""
    pci = topology.get("pci_devices") or {}
    switches = sorted(a for a, d in pci.items() if pci_ids.is_nvswitch(d))
    if not switches:
        return None
    drivers = sorted(set(pci[a].get("driver") or "no driver" for a in switches))
    done = ("the nvidia modules are blacklisted and nvidia-fabricmanager is stopped, so no fabric manager trains them"
            if not keep_nvidia else "nvidia-fabricmanager stays with the host's GPUs")
    return ("NVSwitch(es) %s (%s) stay with the host, and %s: the tenants' GPUs get no NVLink between them. Full passthrough of "
            "HGX GPUs with NVLink needs the Shared NVSwitch virtualization model (the NVSwitches and the fabric manager in a "
            "service VM that partitions them): give gpuvirt_fabric_vm, and the SR-IOV/VFIO stage binds them to vfio-pci and "
            "the tenants stage gives them to that VM (the Fabric Manager's partitions are activated apart, fabric_partition); "
            "otherwise keep NVLink off for the tenants" % (", ".join(switches), ", ".join(drivers), done))


def render_modprobe_conf(blacklist, keep_nvidia, address_prebind=(), driver="pci-stub"):
    """The text of :data:`MODPROBE_FILE`."""
    lines = ["# Written by gpuvirt.tenancy (host_boot): GPUs of this host go to tenants; no host driver claims them."]
    for module in blacklist:
        lines.append("blacklist %s" % module)
    lines.append("options nouveau modeset=0")
    if not keep_nvidia:
        # blacklist stops loading by device alias only; install stops an explicit modprobe too
        lines += ["install %s /bin/false" % module for module in NVIDIA_MODULES]
    elif address_prebind:
        lines.append("# The host keeps GPUs: tenant GPUs not pre-bound by id get driver_override before nvidia loads.")
        lines.append("install nvidia for d in %s; do [ -e /sys/bus/pci/devices/$d/driver_override ] && "
                     "echo %s > /sys/bus/pci/devices/$d/driver_override; done; /sbin/modprobe %s; "
                     "/sbin/modprobe --ignore-install nvidia $CMDLINE_OPTS"
                     % (" ".join(address_prebind), driver, driver.replace("-", "_")))
    return "\n".join(lines) + "\n"


def blacklist_args(blacklist, os_family=None, cmdline=()):
    """iommu_grub ``args`` items: ``modprobe.blacklist=`` (kmod, in the initramfs and after) and on
    RHEL-family hosts ``rd.driver.blacklist=`` (dracut). Modules the running command line already
    blacklists are kept in the list (the arg is set as a whole)."""
    args = []
    params = [("modprobe.blacklist", "modprobe.blacklist")]
    if os_family == "RedHat":
        params.append(("rd.driver.blacklist", "rd.driver.blacklist"))
    for name, running_name in params:
        modules = list(blacklist)
        for arg in cmdline or []:
            key, _sep, value = arg.partition("=")
            if key == running_name:
                modules += [m for m in value.split(",") if m and m not in modules]
        args.append({"name": name, "value": ",".join(modules), "state": "present"})
    return args


def services_to_stop(services, plan):
    """Units of ``plan['services']`` that ``service_facts`` lists (``services``: its
    ``ansible_facts.services``), by their unit names."""
    if not plan.get("active"):
        return []
    found = []
    for name in plan.get("services") or []:
        for unit in (name + ".service", name):
            if unit in (services or {}):
                found.append(unit)
                break
    return found


def initramfs_reasons(listing, driver_pattern=None, files=()):
    """Why the initramfs must be rebuilt (empty: it need not). ``listing``: the output of
    ``lsinitramfs`` (one path a line) or ``lsinitrd`` (``ls -l`` lines); ``driver_pattern``: a
    regular expression of the pre-bind driver's module file, when it must be in the image;
    ``files``: the module config files the role manages, ``{path, in_image, result}`` with
    ``result`` the registered result of the task that writes it (skipped or absent: not
    managed on this host). ``in_image``: the image carries the file itself (modprobe.d), so a
    file missing from the listing is a reason on every run and an interrupted rebuild is done
    again; otherwise (initramfs-tools ``modules``, dracut.conf.d) only a change is."""
    reasons = []
    text = listing or ""
    if driver_pattern and not re.search(driver_pattern, text, re.M):
        reasons.append("the pre-bind driver is not in it")
    for entry in files or []:
        result = entry.get("result") or {}
        if not result or result.get("skipped"):
            continue
        path = entry["path"]
        if result.get("changed"):
            reasons.append("%s changed" % path)
        elif entry.get("in_image") and not re.search(r"(^|[\s/])%s$" % re.escape(path.lstrip("/")), text, re.M):
            reasons.append("%s is not in it" % path)
    return reasons
