# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters ``gpuvirt.tenancy.preflight_projection``, ``preflight_summary`` and ``preflight_stop_lines`` (the
report itself is the action ``preflight_report``'s, plugin_utils preflight_report)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.


def _projection(topology, sriov_pfs=None, hugepages=None):
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import project  # pylint: disable=import-outside-toplevel
    if not isinstance(topology, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.preflight_projection: expected the topology dict of "
                                 "gpuvirt.tenancy.host_topology_info or preflight_info, got %s" % type(topology).__name__)
    try:
        return project(topology, sriov_pfs or [], hugepages or [])
    except InputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.preflight_projection: %s" % exc) from exc


def _summary(report, report_path=None):
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.text import summary_line  # pylint: disable=import-outside-toplevel
    if report is not None and not isinstance(report, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.preflight_summary: expected a preflight report (the fact preflight_report) or "
                                 "null, got %s" % type(report).__name__)
    return summary_line(report, report_path)


def _stop_lines(report, batch, play_hosts=None, report_path=None):
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.text import (  # pylint: disable=import-outside-toplevel
        batches_around, stop_lines)
    if not isinstance(report, dict) or "checks" not in report:
        raise AnsibleFilterError("gpuvirt.tenancy.preflight_stop_lines: expected a preflight report (the fact preflight_report), "
                                 "got %s" % type(report).__name__)
    batch = list(batch or [])
    earlier, later = batches_around(batch, list(play_hosts or []))
    return stop_lines(report, batch, earlier, later, report_path)


class FilterModule:
    """Preflight filters."""

    def filters(self):
        return {"preflight_projection": _projection, "preflight_summary": _summary, "preflight_stop_lines": _stop_lines}
