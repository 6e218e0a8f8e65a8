# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU sharing inside a tenant: ``gpuvirt.tenancy.mps_gpus`` (the GPUs the gpu_mps role acts on,
from nvidia-smi's output), ``gpuvirt.tenancy.mig_profile_options`` (the gpu_mig role's inputs
mapped to its mig_profile call) and ``gpuvirt.tenancy.mig_reboot_gpus`` (the GPUs whose MIG mode
change waits for a reboot)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError


__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.


def _mps_gpus(query, apps="", wanted="all", state="started", active_thread_percentage=None, pinned_memory_limit=None):
    """``query`` and ``apps``: the two nvidia-smi queries' output, or their registered results;
    from a registered GPU query that printed no GPU, ``answered`` is false and ``message`` says
    why (the role then changes nothing)."""
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import mps  # pylint: disable=import-outside-toplevel
    try:
        mps.check_inputs(wanted, active_thread_percentage, pinned_memory_limit)
    except mps.InputError as exc:
        raise AnsibleFilterError("gpu_mps: %s" % exc)
    message = mps.no_gpu_message(query) if isinstance(query, dict) else None
    if message:
        return dict(mps.mps_gpus("", "", wanted, state), answered=False, message=message)
    if isinstance(apps, dict):
        if apps.get("rc", 1) != 0:
            raise AnsibleFilterError("gpuvirt.tenancy.mps_gpus: the GPUs answered but their processes could not be read "
                                     "(%s); check nvidia-smi --query-compute-apps on this host" % " ".join(
                                         part for part in (apps.get("msg"), apps.get("stderr")) if part).strip())
        apps = apps.get("stdout") or ""
    query_text = (query.get("stdout") or "") if isinstance(query, dict) else query
    try:
        return dict(mps.mps_gpus(query_text, apps, wanted, state), answered=True, message="")
    except ValueError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.mps_gpus: nvidia-smi printed what the filter cannot read: %s" % exc)


def mig_profile_options(layout, reset="auto", force=False, nvidia_smi=None):
    """The options of the gpu_mig role's mig_profile call: ``layout`` (gpu_mig_layout) as the
    call's ``layout`` when it is a list, as ``config_file`` and ``config`` when it is a mapping
    that names a mig-parted v1 file; ``reset`` and ``force`` as given; ``nvidia_smi`` only when
    set (empty: found on PATH). The role's one check of its layout: anything else (an empty list,
    a string, a mapping without both keys) is refused, naming gpu_mig_layout."""
    name = "gpuvirt.tenancy.mig_profile_options"
    if isinstance(layout, dict):
        missing = [key for key in ("config_file", "config") if key not in layout]
        if missing:
            raise AnsibleFilterError("%s: gpu_mig_layout (gpuvirt_mig_layout) as a mapping names a mig-parted v1 file "
                                     "with config_file and config; %s missing" % (name, " and ".join(missing)))
        options = {"config_file": layout["config_file"], "config": layout["config"]}
    elif isinstance(layout, list) and layout:
        options = {"layout": layout}
    elif isinstance(layout, list):
        raise AnsibleFilterError("%s: gpu_mig_layout (gpuvirt_mig_layout) is an empty layout list; give at least one entry "
                                 "(devices, mig_enabled, mig_devices) or {config_file, config}" % name)
    else:
        raise AnsibleFilterError("%s: gpu_mig_layout (gpuvirt_mig_layout) must be a mig_profile layout list or "
                                 "{config_file, config}, got %s" % (name, type(layout).__name__))
    options["reset"] = reset
    options["force"] = force
    if nvidia_smi:
        options["nvidia_smi"] = nvidia_smi
    return options


def mig_reboot_gpus(result, after=None):
    """The bus ids of the GPUs whose MIG mode change waits for a reboot, in mig_profile's order,
    from its result (``gpus``, each with ``reboot_required``); with ``after`` (the call made after
    the reboot, as registered), from that call where it ran: what still waits."""
    name = "gpuvirt.tenancy.mig_reboot_gpus"
    if not isinstance(result, dict):
        raise AnsibleFilterError("%s: expected the mig_profile result, got %s" % (name, type(result).__name__))
    if after is not None and not isinstance(after, dict):
        raise AnsibleFilterError("%s: after is the mig_profile result after the reboot, got %s" % (name, type(after).__name__))
    if after and not after.get("skipped"):
        result = after
    return [gpu.get("bus_id") for gpu in result.get("gpus") or [] if isinstance(gpu, dict) and gpu.get("reboot_required")]


class FilterModule:
    """GPU sharing filters."""

    def filters(self):
        return {"mps_gpus": _mps_gpus, "mig_profile_options": mig_profile_options, "mig_reboot_gpus": mig_reboot_gpus}
