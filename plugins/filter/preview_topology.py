# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuvirt.tenancy.preview_topology``: the preview's host model (docs/preview.md)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain

__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.


def _preview_topology(result, wanted=None):
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import project  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import finish  # pylint: disable=import-outside-toplevel
    topology = result.get("topology") if isinstance(result, dict) else None
    if not isinstance(topology, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.preview_topology: expected the result registered from "
                                 "gpuvirt.tenancy.host_topology_info (with its topology)")
    topology, wanted = plain(topology), plain(wanted or {})
    try:
        projected = project(topology, wanted.get("sriov_pfs") or [], wanted.get("hugepages") or [])
    except InputError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.preview_topology: %s" % exc)
    topology, notes = finish(topology, projected, wanted.get("gpus") or [], wanted.get("vf_addresses") or {})
    return dict(result, topology=topology, preview_notes=notes)


class FilterModule:
    """Preview filters."""

    def filters(self):
        return {"preview_topology": _preview_topology}
