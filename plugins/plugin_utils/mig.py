# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_mig role's one mig_profile call and what waits for a reboot, for the action
``gpuvirt.tenancy.mig_layout``: :func:`mig_profile_options` (the role's inputs mapped to the call's
options, the layout checked) and :func:`waiting_gpus` (the GPUs whose MIG mode change waits for a
reboot, from the call's result and the call after the reboot). Pure: a bad input raises a
:class:`MigInputError` whose message names it and the fix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class MigInputError(ValueError):
    """A gpu_mig input or result the role cannot use: its message names it and the fix."""


def mig_profile_options(layout, reset="auto", force=False, nvidia_smi=None):
    """The options of the gpu_mig role's mig_profile call: ``layout`` (gpu_mig_layout) as the
    call's ``layout`` when it is a list, as ``config_file`` and ``config`` when it is a mapping
    that names a mig-parted v1 file; ``reset`` and ``force`` as given; ``nvidia_smi`` only when
    set (empty: found on PATH). The role's one check of its layout: anything else (an empty list,
    a string, a mapping without both keys) is refused, naming gpu_mig_layout."""
    if isinstance(layout, dict):
        missing = [key for key in ("config_file", "config") if key not in layout]
        if missing:
            raise MigInputError("gpu_mig_layout (gpuvirt_mig_layout) as a mapping names a mig-parted v1 file with "
                                "config_file and config; %s missing" % " and ".join(missing))
        options = {"config_file": layout["config_file"], "config": layout["config"]}
    elif isinstance(layout, list) and layout:
        options = {"layout": layout}
    elif isinstance(layout, list):
        raise MigInputError("gpu_mig_layout (gpuvirt_mig_layout) is an empty layout list; give at least one entry "
                            "(devices, mig_enabled, mig_devices) or {config_file, config}")
    else:
        raise MigInputError("gpu_mig_layout (gpuvirt_mig_layout) must be a mig_profile layout list or "
                            "{config_file, config}, got %s" % type(layout).__name__)
    options["reset"] = reset
    options["force"] = force
    if nvidia_smi:
        options["nvidia_smi"] = nvidia_smi
    return options


def waiting_gpus(result, after=None):
    """The bus ids of the GPUs whose MIG mode change waits for a reboot, in mig_profile's order,
    from its result (``gpus``, each with ``reboot_required``); with ``after`` (the call made after
    the reboot, as registered), from that call where it ran: what still waits."""
    if not isinstance(result, dict):
        raise MigInputError("result: expected the mig_profile result, got %s" % type(result).__name__)
    if after is not None and not isinstance(after, dict):
        raise MigInputError("after: the mig_profile result after the reboot, got %s" % type(after).__name__)
    if after and not after.get("skipped"):
        result = after
    return [gpu.get("bus_id") for gpu in result.get("gpus") or [] if isinstance(gpu, dict) and gpu.get("reboot_required")]
