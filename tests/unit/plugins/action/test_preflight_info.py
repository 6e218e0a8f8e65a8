# -*- coding: utf-8 -*-
"""The preflight_info action: on a local connection with a captured tree as ``root`` (a preview)
the gate runs in the controller's process and answers what the module answers for the same
options, refusals included; anywhere else the module is shipped to the host as usual."""

from __future__ import annotations

import sys
from unittest import mock

import pytest

from ansible.plugins.action.normal import ActionModule as ModuleAction

from ansible_collections.gpuvirt.tenancy.plugins.action import preflight_info as action
from ansible_collections.gpuvirt.tenancy.plugins.modules import preflight_info as module

from conftest import run_module  # pylint: disable=import-error
from fakes.captured_trees import lab_capture  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host  # pylint: disable=import-error
from fakes.rdma import BOOLEAN, firmware_tool_on_path  # pylint: disable=import-error

BARE = lab_capture("bare")


def run(args, transport="local", become=False, async_val=0, check_mode=True, diff=True, interpreter=sys.executable):
    task = mock.MagicMock()
    task.args = dict(args)
    task.action = "gpuvirt.tenancy.preflight_info"
    task.check_mode, task.diff, task.async_val = check_mode, diff, async_val
    connection = mock.MagicMock()
    connection.transport = transport
    play_context = mock.MagicMock()
    play_context.become = become
    templar = mock.MagicMock()
    templar.template.side_effect = lambda value: value
    plugin = action.ActionModule(task, connection, play_context, mock.MagicMock(), templar, mock.MagicMock())
    return plugin.run(task_vars={} if interpreter is None else {"ansible_python_interpreter": interpreter})


def without_invocation(result):
    result = dict((key, value) for key, value in result.items() if key != "invocation")
    # AnsibleModule names a module after the file Python runs: preflight_info on a host, basic.py
    # in this test process
    if "msg" in result:
        result["msg"] = result["msg"].replace("(basic.py) module", "(preflight_info) module")
    return result


# options of the gate -> the same answer here as from the module: results, refusals and the
# wording of AnsibleModule's own validation
CASES = [
    ("the bare lab capture", {"gpu_ids": ["1234:11e8"], "nic_ids": ["1b36:0010"]}),
    ("no firmware query, empty libvirt and stage checks", {"firmware_tool": "none", "libvirt": {}, "stage_checks": {}}),
    ("a bad id, refused by the gate", {"gpu_ids": ["zzzz:1"]}),
    ("bad libvirt options, refused naming the option", {"libvirt": {"foreign": True}}),
    ("a value not among the choices", {"firmware_tool": "mft"}),
    ("an option the module does not take", {"gpu_id": ["10de:20b0"]}),
    ("a stage the gate does not know", {"stage_checks": {"nonsense": {}}}),
]


@pytest.mark.parametrize("args", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_a_capture_on_a_local_connection_is_answered_here_as_the_module_answers(args):
    args = dict(args, root=BARE)
    with mock.patch.object(ModuleAction, "run", side_effect=AssertionError("the module was shipped")):
        here = run(args)
    assert without_invocation(here) == without_invocation(run_module(module.main, args, check_mode=True, diff=True))


def test_the_firmware_tool_runs_from_the_controllers_path_as_from_the_modules(tmp_path, monkeypatch):
    host, _kernel = cx4lx_no_acs_host(tmp_path / "root")
    firmware_tool_on_path(tmp_path, monkeypatch, dict((pf, {"device_type": "ConnectX4LX", "params": [
        ["SRIOV_EN", {"default": "False(0)", "current": "True(1)", "next": "True(1)", "choices": BOOLEAN}],
        ["NUM_OF_VFS", {"default": "0", "current": "8", "next": "8"}]]}) for pf in ("0000:01:00.0", "0000:01:00.1")), name="mstconfig")
    args = {"root": host.root}
    here = run(args)
    assert here["firmware"]["0000:01:00.0"]["status"] == "ok"
    assert here["firmware"]["0000:01:00.0"]["params"]["NUM_OF_VFS"]["current"] == "8"
    assert without_invocation(here) == without_invocation(run_module(module.main, args, check_mode=True, diff=True))


# the calls that are shipped: another connection, become, async, another Python, the host's own root
SHIPPED = [
    ("another Python", dict(interpreter="/usr/bin/python3-not-this-one"), {"root": BARE}),
    ("interpreter discovery", dict(interpreter=None), {"root": BARE}),
    ("ssh", dict(transport="ssh"), {"root": BARE}),
    ("become", dict(become=True), {"root": BARE}),
    ("async", dict(async_val=30), {"root": BARE}),
    ("root /", {}, {"root": "/"}),
    ("no root", {}, {}),
]


@pytest.mark.parametrize("context, args", [c[1:] for c in SHIPPED], ids=[c[0] for c in SHIPPED])
def test_anywhere_else_the_module_is_shipped(context, args):
    with mock.patch.object(ModuleAction, "run", return_value={"shipped": True}) as shipped:
        assert run(args, **context) == {"shipped": True}
    assert shipped.call_count == 1
