# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric_partition module: Fabric Manager partitions activated and deactivated through ``fmpm``
(fabric/fmpm.py), decided first from ``fmpm -l``, changed only outside check mode."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import program_path
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import check_line_value
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric import fmpm

__metaclass__ = type

MODULE_ARGS = dict(
    argument_spec=dict(
        partitions=dict(type="list", elements="dict", required=True, options=dict(
            id=dict(type="int", required=True),
            state=dict(type="str", default="active", choices=list(fmpm.STATES)),
            physical_ids=dict(type="list", elements="int"),
        )),
        fmpm=dict(type="path"),
        hostname=dict(type="str"),
    ),
)


def fmpm_path(params, host):
    """The fmpm to run: the ``fmpm`` option (a program on the machine) or fmpm on PATH."""
    return program_path(host, params["fmpm"], "fmpm", "fmpm",
                        "build NVIDIA's Fabric-Manager-Client (fmpm) where the Fabric Manager runs")


def fabric_partition(params, host, run):
    """Read the partitions, decide the steps, then take them (deactivations first) outside check mode."""
    wanted = fmpm.check_wanted(params["partitions"])
    where = []
    if params["hostname"]:
        where = ["--hostname", check_line_value(params["hostname"], "hostname")]
    binary = fmpm_path(params, host)
    _rc, out, _err = host.commands.run([binary, "-l"] + where)
    listed = fmpm.parse_list(out)
    steps = fmpm.decide(listed, wanted)
    run.diff.add("fabric partitions (active)", fmpm.render_active(listed), fmpm.render_active(fmpm.after(listed, steps)))
    if steps and not run.check_mode:
        for action, number in steps:
            host.commands.run([binary, "-a" if action == "activate" else "-d", str(number)] + where)
            run.changed = True
        listed = fmpm.parse_list(host.commands.run([binary, "-l"] + where)[1])
    return {"changed": bool(steps),
            "activated": [n for a, n in steps if a == "activate"],
            "deactivated": [n for a, n in steps if a == "deactivate"],
            "partitions": dict((str(n), p) for n, p in sorted(listed.items()))}
