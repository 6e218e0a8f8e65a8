# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUs the gpu_mps role acts on, from the two nvidia-smi queries it registered (the GPUs,
their processes) and its inputs: the GPUs selected, skipped, missing and in conflict, or why no
NVIDIA GPU answered (plugin_utils mps, pure). Runs on the controller only; asks the host nothing
and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import mps
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("query", "apps", "gpus", "state", "active_thread_percentage", "pinned_memory_limit"))
    REFUSALS = (mps.InputError, mps.ReadError)
    PREFIX = "gpu_mps"

    def decide(self, args, task_vars):
        if "query" not in args:
            raise mps.InputError("query: give the registered nvidia-smi --query-gpu result")
        return mps.mps_plan(args["query"], args.get("apps", ""), args.get("gpus", "all"), args.get("state", "started"),
                            args.get("active_thread_percentage"), args.get("pinned_memory_limit"))
