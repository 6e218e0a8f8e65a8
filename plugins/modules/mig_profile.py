#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
  - A MIG mode change that stays pending is handled per O(reset). A Hopper GPU (H100, H200,
    GH200, told by the name nvidia-smi prints) takes a mode change without a reset or a
    reboot (NVIDIA/gpu-operator#2600), so it never reports RV(gpus[].reboot_required); a
    change a client left pending is set again, and one held by a client fails naming it.
  - While MIG mode is off a GPU lists no profiles; then profile names are checked for form
    only, and the full check runs right after the mode becomes current, before any
    instance is created.
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
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
      - A mig-parted v1 configuration file on the managed host (C(version), C(mig-configs)), a host
        path under O(root).
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
requirements:
  - C(nvidia-smi) (NVIDIA driver utilities) on the host.
  - PyYAML for O(config_file).
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
    msg: "MIG mode change pending on {{ mig | gpuvirt.tenancy.mig_reboot_gpus }}"
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

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.mig_apply import mig_profile

MODULE_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
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
)


def main(host=None):
    run_module(MODULE_ARGS, mig_profile, host=host)


if __name__ == "__main__":
    main()
