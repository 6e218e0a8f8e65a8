# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage records: the options each host stage's one module call ran with, kept on the host.

A stage module given ``record`` (its stage's name and the controller's digest of the options it
sent) writes, after a run that did not fail and not in check mode, the options it ran with into
:data:`RECORDS_PATH` (:func:`write_record`, called by the runner). The next run's preflight gate
(preflight_info ``stage_checks``) runs each recorded call again in check mode, in its own one
call (:func:`stage_checks.check_stages`), and hands back per stage the record's digest, whether the check
would change anything, and the check's result. A stage whose options have the same digest now
and whose check changes nothing takes that result instead of calling its module: a converged
host's boot, SR-IOV/VFIO and tenants stages cost no round trip of their own.

The record only says *which* options to check: the check itself reads the host as it is now,
with this collection's code, so a host that drifted, or a record from another version, is
found different and the stage runs. The record is bookkeeping, not a change of the host: it is
not reported as ``changed``, and a record that cannot be written is a warning."""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import os


__metaclass__ = type

RECORDS_PATH = "/var/lib/gpuvirt-tenancy/stage-records.json"
RECORDS_FORMAT = 1

# The host stages that keep a record (playbooks/stages/), in stage order.
STAGE_NAMES = ("boot", "sriov_vfio", "tenants")

# The ``record`` option of a stage module (doc fragment gpuvirt.tenancy.stage_record).
RECORD_OPTION = dict(type="dict", options=dict(
    stage=dict(type="str", required=True, choices=list(STAGE_NAMES)),
    digest=dict(type="str", required=True),
))

# Options a record never keeps: the host seam (the gate checks its own host) and the record itself.
NOT_RECORDED = ("root", "record")


def options_digest(options):
    """The digest of a module call's options as the controller sends them (the filter
    gpuvirt.tenancy.stage_digest): canonical JSON (sorted keys), SHA-256."""
    text = json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_records(host):
    """The stages' records on the host: stage -> {module, digest, params}. A missing file is
    none; an unreadable one or one of another format is none too (every stage then runs)."""
    path = host.path(RECORDS_PATH, "record")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != RECORDS_FORMAT or not isinstance(data.get("stages"), dict):
        return {}
    return data["stages"]


def write_record(host, module_name, params, argument_spec):
    """Keep ``params`` (the options ``module_name`` ran with, validated against its
    ``argument_spec``) as the record of the stage ``params["record"]`` names; the other stages'
    records stay. Options left unset or at their default are not kept: validated again they come
    back the same, and an option that another excludes is then absent, as when it was sent.
    Returns whether the file changed (an equal record is not written again)."""
    stage = params["record"]["stage"]
    kept = dict((key, value) for key, value in params.items()
                if key not in NOT_RECORDED and value is not None and value != (argument_spec.get(key) or {}).get("default"))
    entry = {"module": module_name, "digest": params["record"]["digest"], "params": kept}
    stages = dict(read_records(host))
    if stages.get(stage) == entry:
        return False
    stages[stage] = entry
    path = host.path(RECORDS_PATH, "record")
    host.files.makedirs(os.path.dirname(path), 0o755)
    host.files.write(path, json.dumps({"format": RECORDS_FORMAT, "stages": stages}, indent=1, sort_keys=True) + "\n",
                     mode=0o644)
    return True


def check_result(check, options):
    """The result a stage takes instead of calling its module: the gate's check of this
    stage (``check``, one entry of :func:`stage_checks.check_stages`) when its record has the digest of the
    ``options`` the stage would send now, it ran without error and it changes nothing; else {}."""
    if not isinstance(check, dict) or not check.get("recorded") or check.get("error"):
        return {}
    if check.get("changed") is not False or not isinstance(check.get("result"), dict):
        return {}
    if check.get("digest") != options_digest(options):
        return {}
    return check["result"]
