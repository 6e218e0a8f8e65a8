# -*- coding: utf-8 -*-
"""The anatomy every controller-only action shares (plugin_utils/controller_action.py): its decision is
the result, never changed; a refusal fails with the action's prefix and changes nothing; an error that
is not a refusal is not swallowed; a decision may fail on its own (rdma_verbs does); and the
collection's controller-only actions are built on it."""

from __future__ import annotations

import types

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import (
    guest_inventory, mig_layout, mps_plan, preflight_report, rdma_calls, rdma_fleet, rdma_netdev, rdma_verbs, reboot_share,
    stage_options)
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction
from fakes.actions import run_action  # pylint: disable=import-error


class Refused(ValueError):
    pass


def plugin(decide, prefix="probe", refusals=(Refused,)):
    """A module holding an ActionModule that decides with ``decide``."""
    class ActionModule(ControllerAction):
        _VALID_ARGS = frozenset(("value",))
        REFUSALS = refusals
        PREFIX = prefix

        def decide(self, args, task_vars):
            return decide(args, task_vars)
    return types.SimpleNamespace(ActionModule=ActionModule)


def refuse(args, task_vars):
    raise Refused("value: %r is not a number; give a number" % (args.get("value"),))


@pytest.mark.parametrize("decide, args, task_vars, expected", [
    (lambda args, task_vars: {"double": args["value"] * 2}, {"value": 2}, {}, {"double": 4, "changed": False}),
    (lambda args, task_vars: {"host": task_vars["inventory_hostname"]}, {}, {"inventory_hostname": "h1"},
     {"host": "h1", "changed": False}),
    # a decision that says changed is still not changed: these actions change nothing
    (lambda args, task_vars: {"changed": True}, {}, {}, {"changed": False}),
    (lambda args, task_vars: {"failed": True, "msg": "h1: no device"}, {}, {}, {"failed": True, "msg": "h1: no device", "changed": False}),
])
def test_the_decision_is_the_result_and_never_changed(decide, args, task_vars, expected):
    result = run_action(plugin(decide), "probe", args, task_vars=task_vars)
    assert {key: result[key] for key in expected} == expected


@pytest.mark.parametrize("prefix, msg", [("probe", "probe: value: 'x' is not a number; give a number"),
                                         (None, "value: 'x' is not a number; give a number")])
def test_a_refusal_fails_naming_the_input_with_the_actions_prefix(prefix, msg):
    result = run_action(plugin(refuse, prefix), "probe", {"value": "x"})
    assert result["failed"] is True and result["changed"] is False and result["msg"] == msg


def test_an_error_that_is_not_a_refusal_is_not_swallowed():
    def broken(args, task_vars):
        raise KeyError("value")
    with pytest.raises(KeyError):
        run_action(plugin(broken), "probe", {})
    # a refusal class other than the raised one does not catch it either
    with pytest.raises(Refused):
        run_action(plugin(refuse, refusals=(TypeError,)), "probe", {"value": "x"})


@pytest.mark.parametrize("module", [guest_inventory, mig_layout, mps_plan, preflight_report, rdma_calls, rdma_fleet, rdma_netdev,
                                    rdma_verbs, reboot_share, stage_options])
def test_the_controller_only_actions_share_the_anatomy(module):
    action = module.ActionModule
    assert issubclass(action, ControllerAction) and "run" not in vars(action)
    assert action.TRANSFERS_FILES is False and action._requires_connection is False  # pylint: disable=protected-access


@pytest.mark.parametrize("args, msg", [
    ({"waited": [], "tenants": [], "add": True}, "add, tenants: give either the hosts or the wait, not both"),
    ({"waited": [], "plan": {}}, "plan: give either the hosts or the wait, not both"),
    ({"waited": []}, None),
    ({}, None),
])
def test_an_action_of_two_forms_refuses_the_other_forms_arguments_by_name(args, msg):
    if msg is None:
        assert ControllerAction.refuse_mixed(args, ("tenants", "plan", "add"), Refused, "the hosts or the wait") is None
        return
    with pytest.raises(Refused) as refused:
        ControllerAction.refuse_mixed(args, ("tenants", "plan", "add"), Refused, "the hosts or the wait")
    assert str(refused.value) == msg
