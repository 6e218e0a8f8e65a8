# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``fmpm`` where the Fabric Manager is reached (:class:`FabricManager`: its listing read, a partition
activated or deactivated, through the host seam's command runner), and the fabric_partition module's
feature: the partitions decided first from ``fmpm -l`` (fabric/fmpm.py), changed only outside check
mode. The tenants stage (libvirt/tenant_fabric.py) runs the same :class:`FabricManager`."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import CommandError, program_path
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError, check_line_value
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric import fmpm
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric.manager_options import FABRIC_MANAGER_OPTIONS

__metaclass__ = type

MODULE_ARGS = dict(
    argument_spec=dict(
        partitions=dict(type="list", elements="dict", required=True, options=dict(
            id=dict(type="int", required=True),
            state=dict(type="str", default="active", choices=list(fmpm.STATES)),
            physical_ids=dict(type="list", elements="int"),
        )),
        **FABRIC_MANAGER_OPTIONS
    ),
)
WHERE_FMPM = "build NVIDIA's Fabric-Manager-Client (fmpm) where the Fabric Manager runs"
FLAGS = {"activate": "-a", "deactivate": "-d"}


class FabricManager:
    """``fmpm`` run through the host's command runner against one Fabric Manager: ``options`` are
    {fmpm, hostname} (fabric/manager_options.py), ``prefix`` names them in errors (``fabric_manager.``
    in the tenants stage). The program is found when this is made (the option when it is an executable
    file, else PATH); ``hostname`` goes to every call as ``--hostname``."""

    def __init__(self, host, options, prefix=""):
        self.host = host
        self.prefix = prefix
        self.where = []
        if options.get("hostname"):
            self.where = ["--hostname", check_line_value(options["hostname"], prefix + "hostname")]
        self.binary = program_path(host, options.get("fmpm"), prefix + "fmpm", "fmpm", WHERE_FMPM)

    def listing(self):
        """``fmpm -l`` read (fmpm.parse_list): {ID: {active, physical_ids, gpus}}."""
        return fmpm.parse_list(self.host.commands.run([self.binary, "-l"] + self.where)[1])

    def step(self, action, number):
        """``fmpm -a ID`` or ``fmpm -d ID``; the Fabric Manager's refusal is a StateError quoting fmpm."""
        argv = [self.binary, FLAGS[action], str(number)] + self.where
        try:
            self.host.commands.run(argv)
        except CommandError as exc:
            error = StateError("the Fabric Manager did not %s partition %d: %s" % (action, number, exc))
            error.details = exc.details
            raise error


def fabric_partition(params, host, run):
    """Read the partitions, decide the steps, then take them (deactivations first) outside check mode."""
    wanted = fmpm.check_wanted(params["partitions"])
    manager = FabricManager(host, params)
    listed = manager.listing()
    steps = fmpm.decide(listed, wanted)
    run.diff.add("fabric partitions (active)", fmpm.render_active(listed), fmpm.render_active(fmpm.after(listed, steps)))
    if steps and not run.check_mode:
        for action, number in steps:
            manager.step(action, number)
            run.changed = True
        listed = manager.listing()
    return {"changed": bool(steps),
            "activated": [n for a, n in steps if a == "activate"],
            "deactivated": [n for a, n in steps if a == "deactivate"],
            "partitions": dict((str(n), p) for n, p in sorted(listed.items()))}
