# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    """The option of a host stage's one module call that keeps its options on the host for the next run's gate."""

    DOCUMENTATION = r"""
options:
  record:
    description:
      - Keep the options of this call on the host as the record of the host stage O(record.stage), in
        C(/var/lib/gpuvirt-tenancy/stage-records.json) (the other stages' records stay), after a run that did not
        fail and not in check mode. Options left unset or at their default are not kept.
      - The next run's preflight gate (M(gpuvirt.tenancy.preflight_info) O(gpuvirt.tenancy.preflight_info#module:stage_checks))
        runs the recorded call again in check mode, inside its own call; a stage whose options have the same digest
        and whose check changes nothing takes that check's result instead of calling this module (docs/ARCHITECTURE.md,
        section Stage records).
      - The record is bookkeeping, not a change of the host; it does not make the result C(changed), and a record that
        cannot be written is a warning.
    type: dict
    suboptions:
      stage:
        description: The host stage this call is (the key of its record).
        type: str
        required: true
        choices: [boot, sriov_vfio, tenants]
      digest:
        description:
          - The digest of the options the caller sent, as the filter P(gpuvirt.tenancy.stage_digest#filter) computes it
            on the controller (the stage compares it with its options of the next run).
        type: str
        required: true
"""
