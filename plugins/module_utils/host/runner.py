# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one module runner. A module file holds its documentation, its argument spec and::

    def main(host=None):
        run_module(MODULE_ARGS, feature_function, host=host)

``feature_function(params, host, run)`` decides first, acts only when ``run.check_mode`` is
false, records each finished step with ``run.changed = True``, adds what differs through
``run.diff.add(...)``, times each long step with ``with run.timed(step):`` (the seconds come back
in the result's ``elapsed_s``) and returns the module's result fields. The collection's errors become
``fail_json`` here, with ``changed`` true when a step was already done, so no feature calls
``exit_json`` or ``fail_json`` itself.

A module may also run another module's feature inside its own call (``run_nested``), so that a
stage that needs two features costs one round trip: the other module's options arrive as one
option of this module and are validated against that module's own ``MODULE_ARGS``, which is
why such a module keeps its ``MODULE_ARGS`` in ``module_utils`` and its module file imports it.
"""

from __future__ import absolute_import, division, print_function

import json
import time
from contextlib import contextmanager

from ansible.module_utils.basic import AnsibleModule, jsonify
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator, ModuleArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.program_runner import ProgramRunner

__metaclass__ = type


class Diff:
    """Before/after texts for ``--diff``; records nothing when diff mode is off."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.entries = []

    def add(self, header, before, after):
        """One difference: ``before``/``after`` are texts (or None for an absent file)."""
        if self.enabled:
            self.entries.append({"before_header": header, "after_header": header,
                                 "before": before or "", "after": after or ""})

    def extend(self, entries):
        """Differences already shaped as Ansible diff dicts."""
        if self.enabled:
            self.entries.extend(entries)


class Run:
    """What one module run knows about itself: check mode, the diff, warnings, whether a step
    has changed the host yet (reported even when a later step fails) and the seconds each long
    step took (``elapsed_s``: a module call shows no progress while it runs, so the result says)."""

    def __init__(self, check_mode=False, diff=False, clock=time.monotonic):
        self.check_mode = check_mode
        self.diff = Diff(diff)
        self.warnings = []
        self.changed = False
        self.elapsed_s = {}
        self._clock = clock

    def warn(self, message):
        self.warnings.append(message)

    @contextmanager
    def timed(self, step):
        """Adds the seconds the block takes (failed or not) to ``elapsed_s[step]`` (None: not timed)."""
        if step is None:
            yield
            return
        start = self._clock()
        try:
            yield
        finally:
            self.elapsed_s[step] = round(self.elapsed_s.get(step, 0) + self._clock() - start, 1)


# the keyword arguments of AnsibleModule that are rules over the options, as ArgumentSpecValidator takes them
VALIDATION_RULES = ("mutually_exclusive", "required_together", "required_one_of", "required_if", "required_by")


def validation_rules(module_args):
    """The rules of ``module_args`` (AnsibleModule's keyword arguments) that a validator of its
    options takes besides the argument spec."""
    return dict((key, module_args[key]) for key in VALIDATION_RULES if module_args.get(key))


def nested_params(option, module_name, module_args, params):
    """``params`` (the value of this module's option ``option``) validated against the
    ``module_args`` of the module ``module_name``: its defaults filled, its choices and its
    mutually exclusive options enforced as when it runs alone. ``root`` is not among them (the
    nested feature runs on this call's host). InputError names the option and the module."""
    spec = dict(module_args["argument_spec"])
    spec.pop("root", None)
    validator = ArgumentSpecValidator(spec, **validation_rules(module_args))
    outcome = validator.validate(dict(params or {}))
    if outcome.error_messages:
        raise InputError("%s: %s (%s takes the options of %s, without root)"
                         % (option, "; ".join(outcome.error_messages), option, module_name))
    return outcome.validated_parameters


def run_nested(option, module_name, module_args, feature, params, host, run):
    """Run the feature of the module ``module_name`` inside this call, on the same host and run
    (check mode, diff, warnings and ``changed`` are shared), with ``params`` validated as
    ``nested_params`` does. Returns the feature's result fields, ``changed`` included."""
    return dict(feature(nested_params(option, module_name, module_args, params), host, run) or {})


def feature_outcome(feature, params, host, run):
    """``(message, fields)`` of one run of ``feature``: ``message`` None and the module's result
    fields, or the collection error's message and its details. ``host`` is a callable that gives
    the bound :class:`Host` (building it from ``root`` can itself be refused). The one place that
    turns a feature's return or error into a module result, for both ways a call runs."""
    try:
        result = feature(params, host(), run) or {}
    except (InputError, StateError) as exc:
        details = dict(getattr(exc, "details", None) or {})
        details["changed"] = run.changed or bool(details.get("changed"))
        if run.elapsed_s:
            details["elapsed_s"] = dict(run.elapsed_s)
        return str(exc), details
    result = dict(result)
    result["changed"] = bool(result.get("changed")) or run.changed
    if run.diff.entries:
        result["diff"] = run.diff.entries
    if run.elapsed_s:
        result["elapsed_s"] = dict(run.elapsed_s)
    return None, result


def run_module(module_args, feature, host=None):
    """Build the AnsibleModule from ``module_args`` (the keyword arguments of AnsibleModule:
    argument_spec, mutually_exclusive, ...), run ``feature`` against ``host`` (built from the
    ``root`` option when none is injected) and exit."""
    kwargs = dict(module_args)
    kwargs.setdefault("supports_check_mode", True)
    module = AnsibleModule(**kwargs)
    run = Run(check_mode=module.check_mode, diff=module._diff)  # pylint: disable=protected-access
    message, fields = feature_outcome(
        feature, module.params, lambda: (host or Host(module.params.get("root") or "/")).bind(module), run)
    for warning in run.warnings:
        module.warn(warning)
    if message is not None:
        module.fail_json(msg=message, **fields)
    module.exit_json(**fields)


def run_here(module_name, module_args, feature, args, check_mode=False, diff=False):
    """The result of the module ``module_name`` with options ``args``, run in this process
    instead of shipped to a host: for a module whose host is a directory on the controller (a
    captured tree, the preview), where a module process would only compile the same code again.
    The options are validated against the module's own ``module_args`` as AnsibleModule validates
    them, the feature runs through :func:`feature_outcome` as in :func:`run_module`, and the
    result passes through JSON as a module's does, so the play sees the same data either way."""
    validation = ModuleArgumentSpecValidator(module_args["argument_spec"], **validation_rules(module_args)).validate(
        json.loads(jsonify(dict(args or {}))))
    if validation.error_messages:
        # worded as AnsibleModule words its first validation error
        message = validation.errors.msg
        if isinstance(validation.errors[0], UnsupportedError):
            message = "Unsupported parameters for (%s) module: %s" % (module_name, message)
        return {"failed": True, "msg": message}
    params = validation.validated_parameters
    run = Run(check_mode=check_mode, diff=diff)
    process = ProgramRunner()
    message, fields = feature_outcome(feature, params, lambda: Host(params.get("root") or "/").bind(process), run)
    fields = json.loads(jsonify(fields))
    if message is not None:
        fields.update(failed=True, msg=message)
    if run.warnings:
        fields["warnings"] = list(run.warnings)
    return fields
