#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_profile
short_description: Declare MIG mode and MIG instances per NVIDIA GPU
version_added: "0.1.0"
description:
  - Brings the MIG (Multi-Instance GPU) mode and the GPU instances of each NVIDIA GPU to a
    declared layout, reading and changing state only through C(nvidia-smi).
  - The layout is given inline (O(layout)) or as a mig-parted v1 file (O(config_file) plus
    O(config)), read as-is.
  - The layout is validated against each GPU's own profiles (C(nvidia-smi mig -lgip)) and
    placements (C(nvidia-smi mig -lgipp)) before anything changes. Unknown profiles, too
    many instances, layouts that do not fit and GPUs that are not MIG-capable fail with a
    message and change nothing.
  - Only the difference is applied, in this order per GPU - destroy GPU instances that are
    not wanted (with their compute instances), change the MIG mode, create the missing GPU
    instances with their default compute instances (C(-cgi ... -C)). A GPU that already
    matches is not touched.
  - A MIG mode change that stays pending is handled per O(reset).
  - While MIG mode is off a GPU lists no profiles; then profile names are checked for form
    only, and the full check runs right after the mode becomes current, before any
    instance is created.
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
requirements:
  - C(nvidia-smi) (the NVIDIA driver) on the managed host (the tenant guest)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes
  - gpuvirt.tenancy.attributes.PLATFORM
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
options:
  layout:
    description:
      - The wanted state, one entry per group of GPUs (the semantics of a mig-parted v1
        C(mig-configs) entry).
      - GPUs no entry applies to are left alone. Two entries applying to the same GPU is
        an error.
      - Mutually exclusive with O(config_file).
    type: list
    elements: dict
    suboptions:
      devices:
        description:
          - C(all), or a list of GPU indexes (as C(nvidia-smi) numbers them).
        type: raw
        default: all
      device_filter:
        description:
          - Only GPUs with one of these PCI ids, written as mig-parted does (C(0x20B010DE),
            device then vendor) or as V(10de:20b0).
        type: list
        elements: str
      mig_enabled:
        description:
          - Whether MIG mode is on.
        type: bool
        required: true
      mig_devices:
        description:
          - 'GPU instance profile name to count, for example C({"3g.40gb": 1, "1g.10gb": 4}).'
        type: dict
        default: {}
  config_file:
    description:
      - A mig-parted v1 configuration file on the managed host (C(version), C(mig-configs)).
      - Requires O(config).
    type: path
  config:
    description:
      - The name of the configuration in O(config_file) to apply, for example C(all-balanced).
    type: str
  reset:
    description:
      - What to do when a MIG mode change stays pending.
      - V(auto) resets the GPU (C(nvidia-smi --gpu-reset)) when no process uses it; if the
        reset is refused, the GPU is reported with RV(gpus[].reboot_required).
      - V(never) never resets; the GPU is reported with RV(gpus[].reboot_required) and its
        instances are left for the next run after the reboot. This is not a failure.
    type: str
    choices: [auto, never]
    default: auto
  force:
    description:
      - Destroy GPU instances even when processes run on them. Without it such a plan fails
        before anything changes.
    type: bool
    default: false
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary. Default - found on C(PATH).
    type: path
notes:
  - The GPU is changed only through C(nvidia-smi); nothing is written elsewhere.
  - A mig-parted file's hooks and C(mig-parted) itself are not used.
seealso:
  - name: mig-parted
    description: NVIDIA's MIG partition editor, whose v1 configuration format this module reads.
    link: https://github.com/NVIDIA/mig-parted
"""

EXAMPLES = r"""
- name: One 3g.40gb and three 1g.10gb instances on every H100 PCIe (0x233110DE)
  gpuvirt.tenancy.mig_profile:
    layout:
      - devices: all
        device_filter: ["0x233110DE"]
        mig_enabled: true
        mig_devices:
          3g.40gb: 1
          1g.10gb: 3

- name: Apply the all-balanced layout of NVIDIA's mig-parted default file, unchanged
  gpuvirt.tenancy.mig_profile:
    config_file: /etc/nvidia-mig-manager/config-default.yaml
    config: all-balanced
    reset: never
  register: mig

- name: Tell the operator when a reboot is needed
  ansible.builtin.debug:
    msg: "MIG mode change pending on {{ mig.gpus | selectattr('reboot_required') | map(attribute='bus_id') | list }}"
  when: mig.reboot_required

- name: Turn MIG off on GPU 1, destroying its instances even if processes use them
  gpuvirt.tenancy.mig_profile:
    layout:
      - devices: [1]
        mig_enabled: false
    force: true
"""

RETURN = r"""
gpus:
  description: Every GPU nvidia-smi lists, with what was found and what was (or would be) done.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index as nvidia-smi numbers it.
      type: int
      sample: 0
    bus_id:
      description: PCI bus id as nvidia-smi prints it.
      type: str
      sample: "00000000:01:00.0"
    name:
      description: GPU name.
      type: str
      sample: NVIDIA H100 PCIe
    device_id:
      description: PCI vendor:device.
      type: str
      sample: "10de:2331"
    managed:
      description: Whether a layout entry applies to this GPU.
      type: bool
      sample: true
    mig_capable:
      description: Whether the GPU reports a MIG mode.
      type: bool
      sample: true
    mig_mode:
      description: MIG mode before the run.
      type: dict
      sample: {current: disabled, pending: disabled}
    mig_mode_after:
      description: MIG mode after the run (predicted in check mode).
      type: dict
      sample: {current: enabled, pending: enabled}
    instances_before:
      description: GPU instances found, with their compute instances and process counts.
      type: list
      elements: dict
      sample: [{gpu_instance_id: 2, profile: 3g.40gb, profile_id: 9, placement: "4:4", compute_instances: [0], processes: 0}]
    instances_after:
      description: GPU instance profiles after the run; in check mode the prediction.
      type: list
      elements: str
      sample: [1g.10gb, 1g.10gb, 1g.10gb, 3g.40gb]
    actions:
      description: The plan for this GPU, in order.
      type: list
      elements: str
      sample: ["GPU 0: create GPU instance 3g.40gb with its default compute instance"]
    reset_performed:
      description: Whether the GPU was reset to make a pending mode change current.
      type: bool
      sample: false
    reboot_required:
      description: Whether a MIG mode change is pending until a reboot (or a reset).
      type: bool
      sample: false
plan:
  description: All actions for all GPUs, in order (the exact create/destroy plan in check mode).
  returned: always
  type: list
  elements: str
  sample: ["GPU 0: enable MIG mode", "GPU 0: create 3g.40gb"]
reboot_required:
  description: Whether any GPU needs a reboot for its MIG mode.
  returned: always
  type: bool
  sample: false
commands:
  description: The nvidia-smi command lines run, with their exit status.
  returned: always
  type: list
  elements: dict
  sample: [{"cmd": ["nvidia-smi", "-i", "0", "-mig", "1"], "rc": 0}]
"""

import os
import traceback
from collections import Counter

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError, run_command
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.mig import (
    MigManager, NvidiaSmi, describe_plan, desired_per_gpu, normalize_entry, predicted_after, public_instances,
    select_mig_parted_config, state_view)

try:
    import yaml
    HAS_YAML = True
    YAML_ERROR = None
except ImportError:
    HAS_YAML = False
    YAML_ERROR = traceback.format_exc()


def load_entries(module):
    params = module.params
    if params["layout"] is not None:
        if not params["layout"]:
            raise InputError("layout is empty; give at least one entry like {devices: all, mig_enabled: true, mig_devices: {'1g.10gb': 7}}")
        return [normalize_entry(dict((k, v) for k, v in entry.items() if v is not None), "layout[%d]" % i)
                for i, entry in enumerate(params["layout"])]
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML (for config_file)"), exception=YAML_ERROR)
    path = params["config_file"]
    try:
        with open(path, "r", encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except (OSError, IOError) as exc:
        raise InputError("config_file %s cannot be read: %s" % (path, exc))
    except yaml.YAMLError as exc:
        raise InputError("config_file %s is not valid YAML: %s" % (path, exc))
    return select_mig_parted_config(document, params["config"], path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            layout=dict(type="list", elements="dict", options=dict(
                devices=dict(type="raw", default="all"),
                device_filter=dict(type="list", elements="str"),
                mig_enabled=dict(type="bool", required=True),
                mig_devices=dict(type="dict", default={}),
            )),
            config_file=dict(type="path"),
            config=dict(type="str"),
            reset=dict(type="str", choices=["auto", "never"], default="auto"),
            force=dict(type="bool", default=False),
            nvidia_smi=dict(type="path"),
        ),
        mutually_exclusive=[("layout", "config_file")],
        required_one_of=[("layout", "config_file")],
        required_together=[("config_file", "config")],
        supports_check_mode=True,
    )
    try:
        entries = load_entries(module)
    except InputError as exc:
        module.fail_json(msg=str(exc))

    binary = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    if module.params["nvidia_smi"] and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        module.fail_json(msg="nvidia_smi %s is not an executable file: point it at nvidia-smi or leave it unset to use PATH; "
                             "nothing was changed" % binary)
    if not binary:
        module.fail_json(msg="nvidia-smi was not found on PATH: install the NVIDIA driver utilities on this host, "
                             "or set nvidia_smi to its path; nothing was changed")
    smi = NvidiaSmi(binary, lambda argv: run_command(module, argv, check=False))
    manager = MigManager(smi, reset=module.params["reset"], force=module.params["force"])
    try:
        gpus = manager.read()
        if not gpus:
            module.fail_json(msg="nvidia-smi lists no GPU on this host; nothing was changed", commands=smi.commands)
        wanted, warnings = desired_per_gpu(entries, gpus)
        for warning in warnings:
            module.warn(warning)
        plans, errors, blocked = manager.plan(wanted, gpus)
        if errors:
            module.fail_json(msg="the layout cannot be applied; nothing was changed: " + "; ".join(errors), commands=smi.commands)
        if blocked and not module.params["force"]:
            module.fail_json(msg="refusing to destroy GPU instances in use (set force: true to destroy them anyway); nothing was changed: "
                             + "; ".join(blocked), commands=smi.commands)
    except (InputError, StateError) as exc:
        module.fail_json(msg="%s; nothing was changed" % exc, commands=smi.commands)

    results, all_actions, before, after = [], [], {}, {}
    changed, reboot_required = False, False
    for gpu in gpus:
        index = gpu["index"]
        entry, plan = wanted.get(index), plans.get(index)
        actions = describe_plan(gpu, plan) if plan else []
        result = {
            "index": index, "bus_id": gpu["bus_id"], "name": gpu["name"], "device_id": gpu["device_id"],
            "managed": entry is not None, "mig_capable": gpu["mig_capable"], "mig_mode": dict(gpu["mig_mode"]),
            "instances_before": public_instances(gpu), "actions": actions,
            "reset_performed": False, "reboot_required": False,
        }
        key = "gpu%d %s" % (index, gpu["bus_id"])
        before[key] = state_view(gpu)
        if plan and plan.get("pending_reboot"):
            result["reboot_required"] = True
        if not actions:
            result["mig_mode_after"] = dict(gpu["mig_mode"])
            result["instances_after"] = [gi["profile"] for gi in result["instances_before"]]
            result["instances_after"].sort()
        elif module.check_mode:
            target = "enabled" if entry["mig_enabled"] else "disabled"
            # A change already pending stays pending without a reset (or while the GPU is
            # busy); whether a new change goes pending is known only when it is made.
            stays_pending = bool(plan.get("mode_already_pending")) and (module.params["reset"] == "never" or bool(gpu["processes"]))
            result["mig_mode_after"] = {"current": gpu["mig_mode"]["current"] if stays_pending else target, "pending": target}
            result["instances_after"] = predicted_after(gpu, entry, plan)
            if stays_pending:
                result["reboot_required"] = True
                plan["create"] = []
                result["actions"] = actions = describe_plan(gpu, plan)
                destroyed = set(gi["id"] for gi in plan["destroy"])
                result["instances_after"] = sorted(gi["profile"] for gi in gpu["instances"] if gi["id"] not in destroyed)
        else:
            try:
                reset_done, reboot, messages = manager.apply_gpu(gpu, entry, plan)
            except (InputError, StateError) as exc:
                module.fail_json(msg="GPU %d: %s" % (index, exc), changed=True, gpus=results, plan=all_actions, commands=smi.commands)
            for message in messages:
                module.warn(message)
            result["reset_performed"], result["reboot_required"] = reset_done, reboot
            result["actions"] = describe_plan(gpu, plan)
            fresh = manager.smi.gpus()
            now = [g for g in fresh if g["index"] == index][0]
            result["mig_mode_after"] = now["mig_mode"]
            now_instances = manager.smi.instances(index) if now["mig_mode"]["current"] == "enabled" else []
            result["instances_after"] = sorted(gi["profile"] for gi in now_instances)
            if not reboot and entry["mig_enabled"]:
                wanted_list = sorted(Counter(entry["mig_devices"]).elements())
                if result["instances_after"] != wanted_list:
                    module.fail_json(msg="GPU %d: after applying, nvidia-smi lists %s instead of %s" % (index, result["instances_after"], wanted_list),
                                     changed=True, gpus=results + [result], plan=all_actions, commands=smi.commands)
        all_actions.extend(result["actions"])
        reboot_required = reboot_required or result["reboot_required"]
        after[key] = {"mig_mode": result["mig_mode_after"], "instances": result["instances_after"]}
        if plan:
            # Honest: a mode change that was already pending changes nothing by itself; a
            # reset that made it current does.
            changed = changed or bool(plan["destroy"] or plan["create"] or result["reset_performed"]
                                      or (plan["mode"] and not plan.get("mode_already_pending"))
                                      or (module.check_mode and plan["mode"] and not result["reboot_required"]))
        results.append(result)

    module.exit_json(changed=changed, gpus=results, plan=all_actions, reboot_required=reboot_required, commands=smi.commands,
                     diff={"before": before, "after": after})


if __name__ == "__main__":
    main()
