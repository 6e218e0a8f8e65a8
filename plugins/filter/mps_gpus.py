# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuvirt.tenancy.mps_gpus``: the GPUs the gpu_mps role acts on, from nvidia-smi's output."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError


__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.


def _mps_gpus(query_text, apps_text="", wanted="all", state="started"):
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.mps import mps_gpus  # pylint: disable=import-outside-toplevel
    try:
        return mps_gpus(query_text, apps_text, wanted, state)
    except ValueError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.mps_gpus: nvidia-smi printed what the filter cannot read: %s" % exc)


class FilterModule:
    """GPU sharing filters."""

    def filters(self):
        return {"mps_gpus": _mps_gpus}
