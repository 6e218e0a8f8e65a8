# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVLink disabled in a tenant's NVIDIA driver: the guest_nvlink module.

A tenant on an HGX board with NVSwitches whose GPUs get no Fabric Manager partition (no service VM
holds the NVSwitches) sees GPUs whose NVLinks lead to switches nobody trained: the driver then waits
for a fabric that never comes and CUDA does not start (error 802, "system not yet initialized",
NVIDIA/nccl-tests#260, NVIDIA/nvrc#159). The NVIDIA kernel module's registry option ``NvLinkDisable``
(NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia/nv-reg.h at 965db985520c0c2aefa56dc2e81f9bfa67e91375:
"the NVIDIA kernel module will not attempt to initialize or train NVLink connections for any GPUs",
1 disables, 0 is the default, a reboot applies it) is given to the module as ``NVreg_NvLinkDisable``
(nv-reg.h's ``NV_REG_STRING`` prefix), here in a modprobe.d file of its own:
``options nvidia NVreg_NvLinkDisable=1``.

``state: disabled`` writes that file (atomically); ``state: enabled`` removes it. Other modprobe.d
files that set the option are reported, never edited. The loaded driver shows the value it took in
``/sys/module/nvidia/parameters/NVreg_NvLinkDisable``; a reboot is due while it differs.
"""

from __future__ import absolute_import, division, print_function

import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, normalised_path

__metaclass__ = type

OPTION = "NVreg_NvLinkDisable"
MODPROBE_DIR = "/etc/modprobe.d"
PARAMETER = "/sys/module/nvidia/parameters/" + OPTION
STATES = ("disabled", "enabled")
HEADER = ("# Written by gpuvirt.tenancy guest_nvlink: NVLink disabled in the NVIDIA driver (a tenant on an NVSwitch\n"
          "# board without a Fabric Manager partition). Removed by guest_nvlink with state enabled.\n")
LINE = "options nvidia %s=1\n" % OPTION
# an "options nvidia ..." line's NVreg_NvLinkDisable value (modprobe.d(5): options MODULE OPTION...)
SETTING_RE = re.compile(r"^\s*options\s+nvidia\s+(?:.*\s)?%s=(\S+)" % OPTION)

MODULE_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
        state=dict(type="str", required=True, choices=list(STATES)),
        path=dict(type="path", default=MODPROBE_DIR + "/gpuvirt-nvlink.conf"),
    ),
)


def wanted_text(state):
    """The file's text for ``state``: None (no file) for enabled."""
    return HEADER + LINE if state == "disabled" else None


def settings_in(text):
    """The NVreg_NvLinkDisable values a modprobe.d file's text sets, in order."""
    return [match.group(1) for match in (SETTING_RE.match(line) for line in (text or "").splitlines()) if match]


def check_path(path):
    """The file is a .conf file directly in /etc/modprobe.d: modprobe reads no other (modprobe.d(5))."""
    normalised_path(path, "path")
    if os.path.dirname(path) != MODPROBE_DIR or not path.endswith(".conf") or path == MODPROBE_DIR + "/.conf":
        raise InputError("path: %s is not a file modprobe reads; give a NAME.conf in %s (the default %s/gpuvirt-nvlink.conf)"
                         % (path, MODPROBE_DIR, MODPROBE_DIR))
    return path


def other_settings(host, path):
    """{host path: [values]} of the other modprobe.d files that set the option."""
    found = {}
    for name in sorted(host.fs.listdir(MODPROBE_DIR) or ()):
        shown = MODPROBE_DIR + "/" + name
        if shown == path or not name.endswith(".conf"):
            continue
        values = settings_in(host.fs.read(shown))
        if values:
            found[shown] = values
    return found


def reboot_due(loaded, state):
    """Whether the loaded driver holds another value than ``state`` gives it (None: not loaded, nothing due)."""
    if loaded is None:
        return False
    return loaded.strip() != ("1" if state == "disabled" else "0")


def guest_nvlink(params, host, run):
    """The guest_nvlink module: decide the file, then write or remove it (not in check mode)."""
    state = params["state"]
    path = check_path(params["path"])
    real = host.file_target(path, "path", create_parent=True)
    before = host.read_text(path, "path")
    after = wanted_text(state)
    others = other_settings(host, path)
    loaded = host.fs.read(PARAMETER)
    changed = before != after
    run.diff.add(path, before, after)
    for shown, values in sorted(others.items()):
        run.warn("%s also sets %s=%s; modprobe applies every options line, the last one read winning: remove the line "
                 "there so that %s decides" % (shown, OPTION, ",".join(values), path))
    if changed and not run.check_mode:
        if after is None:
            host.files.remove(real)
        else:
            host.files.makedirs(os.path.dirname(real))
            host.files.write(real, after, mode=0o644)
        run.changed = True
    return {"changed": changed, "path": path, "state": state, "others": others,
            "loaded": None if loaded is None else loaded.strip(),
            "reboot_required": reboot_due(loaded, state)}
