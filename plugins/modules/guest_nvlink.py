#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: guest_nvlink
short_description: NVLink disabled in a tenant's NVIDIA driver (a modprobe.d option), or that file removed
version_added: 0.1.0
description:
  - Inside a tenant on an HGX board with NVSwitches whose GPUs get no Fabric Manager partition, the NVIDIA
    driver waits for an NVLink fabric nobody trains and CUDA does not start. The driver's option
    C(NVreg_NvLinkDisable=1) (C(NvLinkDisable) in NVIDIA's open-gpu-kernel-modules, C(kernel-open/nvidia/nv-reg.h))
    makes it leave NVLink untrained, so a tenant's GPUs work without NVLink between them.
  - O(state=disabled) writes O(path) with the line C(options nvidia NVreg_NvLinkDisable=1), whole and atomically;
    O(state=enabled) removes that file. Other files in C(/etc/modprobe.d) that set the option are reported and
    warned about, never edited.
  - The driver reads the option when it loads. The result says whether the loaded driver holds another value
    (RV(reboot_required)); the guest's initramfs is not rebuilt (a guest that loads C(nvidia) from its initramfs
    needs that rebuilt too).
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
options:
  state:
    description:
      - V(disabled) writes the file that disables NVLink in the NVIDIA driver; V(enabled) removes it.
    type: str
    required: true
    choices: [disabled, enabled]
  path:
    description: The modprobe.d file, a C(NAME.conf) directly in C(/etc/modprobe.d), a host path under O(root).
    type: path
    default: /etc/modprobe.d/gpuvirt-nvlink.conf
"""

EXAMPLES = r"""
- name: A single-GPU tenant on an NVSwitch board without a Fabric Manager partition
  gpuvirt.tenancy.guest_nvlink:
    state: disabled
  register: __nvlink

- name: The tenant's partition is activated now; NVLink back in the driver
  gpuvirt.tenancy.guest_nvlink:
    state: enabled
"""

RETURN = r"""
path:
  description: The modprobe.d file written or removed.
  returned: success
  type: str
  sample: /etc/modprobe.d/gpuvirt-nvlink.conf
state:
  description: The state asked.
  returned: success
  type: str
  sample: disabled
others:
  description: Other modprobe.d files that set C(NVreg_NvLinkDisable), with the values they set.
  returned: success
  type: dict
  sample: {"/etc/modprobe.d/nvidia.conf": ["0"]}
loaded:
  description: The value the loaded NVIDIA driver holds (its module parameter), null while the driver is not loaded.
  returned: success
  type: str
  sample: "0"
reboot_required:
  description: Whether the loaded driver holds another value than O(state) gives it (the option applies when it loads).
  returned: success
  type: bool
  sample: true
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nvlink_driver

MODULE_ARGS = nvlink_driver.MODULE_ARGS


def main(host=None):
    run_module(MODULE_ARGS, nvlink_driver.guest_nvlink, host=host)


if __name__ == "__main__":
    main()
