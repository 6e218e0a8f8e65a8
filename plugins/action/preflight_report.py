# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight report, made on the controller from the gate's one read (preflight_info's
registered result) and the inventory's desired state: the tenant plan (the gate's, where it is the
plan of the host as the host stages leave it, else the planner's here) and the report's checks
(plugin_utils preflight_report, pure). Asks the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.preflight_report import PreflightReportError, preflight_report
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("info", "desired", "policy"))
    REFUSALS = (PreflightReportError,)
    PREFIX = "preflight_report"

    def decide(self, args, task_vars):
        # plain data: the host model handed over as ansible-core's lazy containers would cost seconds to walk
        return preflight_report(plain(args.get("info")), plain(args.get("desired")), plain(args.get("policy")))
