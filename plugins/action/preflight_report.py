# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight report, made on the controller from the gate's one read (preflight_info's
registered result) and the inventory's desired state: the tenant plan (the gate's, where it is the
plan of the host as the host stages leave it, else the planner's here) and the report's checks
(plugin_utils preflight_report, pure). Asks the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.preflight_report import PreflightReportError, preflight_report


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("info", "desired", "policy"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        try:
            # plain data: the host model handed over as ansible-core's lazy containers would cost seconds to walk
            made = preflight_report(plain(args.get("info")), plain(args.get("desired")), plain(args.get("policy")))
        except PreflightReportError as exc:
            return dict(result, failed=True, changed=False, msg="preflight_report: %s" % exc)
        result.update(made, changed=False)
        return result
