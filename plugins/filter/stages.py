# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage records on the controller: ``stage_digest`` (the digest of a stage call's options, sent
with the call as its ``record``) and ``stage_check_result`` (the preflight gate's check of a
stage, when it answers the call the stage would make now). The logic lives in module_utils
``stage_record``."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import stage_record

__metaclass__ = type


def _options(value, name):
    if not isinstance(value, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.%s: expected the dict of a module call's options, got %s"
                                 % (name, type(value).__name__))
    return value


def stage_digest(options):
    """The digest a stage sends with its call (``record.digest``) and compares with the gate's."""
    return stage_record.options_digest(_options(options, "stage_digest"))


def stage_check_result(check, options):
    """The gate's check result for ``options`` ({} when it does not answer them: no record,
    other options, an error, or something to change)."""
    if check is not None and not isinstance(check, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.stage_check_result: expected one stage of preflight_info's stage_checks "
                                 "(or {}), got %s" % type(check).__name__)
    return stage_record.check_result(check or {}, _options(options, "stage_check_result"))


class FilterModule:
    """Stage record filters."""

    def filters(self):
        return {"stage_digest": stage_digest, "stage_check_result": stage_check_result}
