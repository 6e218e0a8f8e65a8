# -*- coding: utf-8 -*-
"""The preflight_info action: on a local connection with a captured tree as ``root`` (a preview)
the gate runs in the controller's process and answers what the module answers for the same
options, refusals included; anywhere else the module is shipped to the host as usual."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from unittest import mock

import pytest

from ansible.plugins.action.normal import ActionModule as ModuleAction
from ansible.plugins.loader import shell_loader

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
    task.check_mode, task.diff, task.async_val, task.delegate_to = check_mode, diff, async_val, None
    connection = mock.MagicMock()
    connection.transport = transport
    connection._shell = shell_loader.get("sh")  # pylint: disable=protected-access
    play_context = mock.MagicMock()
    play_context.become, play_context.become_user = become, "root"
    templar = mock.MagicMock()
    templar.template.side_effect = lambda value: value
    plugin = action.ActionModule(task, connection, play_context, mock.MagicMock(), templar, mock.MagicMock())
    task_vars = {"inventory_hostname": "gpu-node-1"}
    if interpreter is not None:
        task_vars["ansible_python_interpreter"] = interpreter
    return plugin.run(task_vars=task_vars)


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
def test_anywhere_else_the_module_is_shipped(context, args, monkeypatch):
    monkeypatch.setenv(action.CACHE_VARIABLE, "off")
    with mock.patch.object(ModuleAction, "run", return_value={"shipped": True}) as shipped:
        assert run(args, **context) == {"shipped": True}
    assert shipped.call_count == 1


# ---------------------------------------------------------------------------- the gate's reads, kept
PF = "0000:81:00.0"
GPU = "0000:82:00.0"
GATE = {"firmware_tool": "none", "stage_checks": {"sriov_vfio": {"devices": [GPU], "vfs_of": [PF]}}}


class ShippedTo:
    """The host of the kept reads' tests, one tree: the gate's module call (``_execute_module``) run here
    against it with a fresh Host, as each call on a host has its own process; and the commands the action
    runs itself (``_low_level_execute_command``: the program that makes the reads again) run for real, the
    program on stdin, as SSH runs them on a host."""

    def __init__(self, tree, kernel):
        self.tree, self.kernel, self.calls, self.programs = tree, kernel, [], []

    def __call__(self, plugin, module_name=None, module_args=None, task_vars=None, **_kwargs):
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host  # pylint: disable=import-outside-toplevel
        from fakes.commands import RecordedCommands  # pylint: disable=import-error,import-outside-toplevel
        del task_vars
        assert module_name == "gpuvirt.tenancy.preflight_info"
        self.calls.append("preflight_info")
        plugin._used_interpreter = "#!" + sys.executable  # pylint: disable=protected-access
        host = Host(module_args.get("root") or "/", commands=RecordedCommands(), kernel=self.kernel)
        return run_module(module.main, module_args, check_mode=True, host=host)

    def command(self, plugin, cmd, sudoable=True, in_data=None, **_kwargs):
        del plugin, sudoable
        self.calls.append("read_again")
        self.programs.append(in_data.decode("utf-8"))
        try:
            proc = subprocess.Popen(shlex.split(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=self.tree.root)
        except OSError as exc:
            # as sh answers a command it cannot find
            return {"rc": 127, "stdout": "", "stderr": "/bin/sh: 1: %s: not found" % exc.filename}
        # the tree's /proc shows the program as this process's child, as a host's shows it below the SSH
        # session (before it reads its program from stdin, so before it reads /proc)
        self.tree.write("/proc/%d/status" % proc.pid, "Name:\tpython3\nPPid:\t%d\n" % os.getpid())
        out, err = proc.communicate(in_data)
        return {"rc": proc.returncode, "stdout": out.decode("utf-8"), "stderr": err.decode("utf-8")}


def run_on(shipped, args, become=False, pipelining=True):
    with mock.patch.object(action.ActionModule, "_execute_module", autospec=True, side_effect=shipped), \
            mock.patch.object(action.ActionModule, "_low_level_execute_command", autospec=True, side_effect=shipped.command), \
            mock.patch.object(action.ActionModule, "_is_pipelining_enabled", return_value=pipelining), \
            mock.patch.object(action.ActionModule, "_compute_environment_string", return_value=""), \
            mock.patch.object(action.ActionModule, "_remove_tmp_path"), \
            mock.patch.object(ModuleAction, "run", side_effect=AssertionError("shipped without the kept reads")):
        return run(args, transport="ssh", become=become, check_mode=False, diff=False)


@pytest.fixture
def lab(tmp_path, monkeypatch):
    from fakes.kernel import lab_host_with_vfs  # pylint: disable=import-error,import-outside-toplevel
    monkeypatch.setenv(action.CACHE_VARIABLE, str(tmp_path / "cache"))
    tree, kernel = lab_host_with_vfs(tmp_path / "root")
    return ShippedTo(tree, kernel)


def gate(lab, **options):
    """The gate's options for the tests' host: its tree as the gate's root, as a captured tree on a host
    reached over SSH is given (the reads are made again under that root)."""
    return dict(GATE, root=lab.tree.root, **options)


def test_a_second_run_is_answered_from_the_first_runs_reads_made_again(lab):
    first = run_on(lab, gate(lab))
    assert lab.calls == ["preflight_info"]
    assert first["host_reads"]["answered_from"] == "module" and first["host_reads"]["not_answerable"] == []
    assert first["host_reads"]["reads"] > 100 and first["stage_checks"]["sriov_vfio"]["error"] is None
    kept = action.GateReads(os.environ[action.CACHE_VARIABLE], "gpu-node-1", "").path
    assert os.stat(kept).st_mode & 0o777 == 0o600 and os.stat(os.path.dirname(kept)).st_mode & 0o777 == 0o700
    second = run_on(lab, gate(lab))
    assert second["host_reads"]["changed"] == []
    assert lab.calls == ["preflight_info", "read_again"]
    assert second["host_reads"] == {"answered_from": "reads", "reads": first["host_reads"]["reads"], "changed": [],
                                    "not_answerable": []}
    assert dict(second, host_reads=None) == dict(first, host_reads=None)


def test_the_program_that_reads_again_carries_the_reads_the_root_and_the_seam_only(lab):
    run_on(lab, gate(lab))
    run_on(lab, gate(lab))
    [program] = lab.programs
    payload = json.loads(ast.literal_eval(program.rstrip().rsplit("\n", 1)[-1][len("run("):-1]))
    assert payload["root"] == lab.tree.root and len(payload["records"]) > 100
    assert sorted(name.rsplit(".", 2)[-2] for name in payload["sources"]) == ["host"] * 5 + ["vocabulary"]


def test_a_read_that_answers_otherwise_runs_the_gate_again_and_says_which(lab):
    first = run_on(lab, gate(lab))
    lab.tree.write("/sys/bus/pci/devices/%s/sriov_numvfs" % PF, "2")
    second = run_on(lab, gate(lab))
    assert lab.calls == ["preflight_info", "read_again", "preflight_info"]
    assert second["host_reads"]["answered_from"] == "module"
    assert second["host_reads"]["changed"] == ["fs.read('/sys/bus/pci/devices/%s/sriov_numvfs')" % PF]
    assert second["topology"] != first["topology"]
    # the new run's reads are kept: the third run is answered from them
    assert run_on(lab, gate(lab))["host_reads"]["answered_from"] == "reads"


@pytest.mark.parametrize("other", [dict(firmware_tool="auto"), dict(stage_checks={})],
                         ids=["another option", "no stage checks"])
def test_other_options_are_another_gate(lab, other):
    run_on(lab, gate(lab))
    assert run_on(lab, gate(lab, **other))["host_reads"]["answered_from"] == "module"
    assert run_on(lab, gate(lab), become=True)["host_reads"]["answered_from"] == "module"
    assert lab.calls == ["preflight_info"] * 3


def test_without_pipelining_the_gate_runs_and_says_why(lab):
    run_on(lab, gate(lab))
    again = run_on(lab, gate(lab), pipelining=False)
    assert lab.calls == ["preflight_info", "preflight_info"]
    assert again["host_reads"]["answered_from"] == "module"
    assert again["host_reads"]["changed"] == ["modules are not pipelined on this connection: the kept reads are not made again"]


def test_a_run_whose_reads_cannot_answer_for_it_is_not_kept(lab, monkeypatch):
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import reads  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(reads.Recorder, "result", lambda self: {"records": [], "digests": [], "answerable": False,
                                                                "reasons": ["open(/etc/x) past the seam"], "python": [3, 11]})
    first = run_on(lab, gate(lab))
    assert first["host_reads"]["not_answerable"] == ["open(/etc/x) past the seam"]
    run_on(lab, gate(lab))
    assert lab.calls == ["preflight_info", "preflight_info"]


def edit_kept(change):
    """``change`` made to the run kept for the tests' one host, in its file (a cache written by
    another version, or by hand)."""
    path = action.GateReads(os.environ[action.CACHE_VARIABLE], "gpu-node-1", "").path
    with open(path, encoding="utf-8") as handle:
        entry = json.load(handle)
    change(entry)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(entry, handle)


def test_a_failed_read_again_runs_the_gate(lab):
    run_on(lab, gate(lab))
    edit_kept(lambda entry: entry.update(records=[["kernel", [["write", ["/sys/x", "1"], {}]]]] + entry["records"][1:]))
    again = run_on(lab, gate(lab))
    assert lab.calls == ["preflight_info", "read_again", "preflight_info"]
    assert again["host_reads"]["answered_from"] == "module" and again["host_reads"]["changed"][0].startswith("records[0]: ")


def test_a_python_that_does_not_answer_runs_the_gate(lab, tmp_path):
    answers_otherwise = tmp_path / "answers-otherwise"
    answers_otherwise.write_text("#!/bin/sh\ncat >/dev/null\necho '{\"python\": [3, 11]}'\n")
    answers_otherwise.chmod(0o755)
    for interpreter, message in (("/no/such/python", "the reads made again answered no JSON (rc 127): /bin/sh: 1: "),
                                 (str(answers_otherwise), "the reads made again answered no digests")):
        run_on(lab, gate(lab))
        edit_kept(lambda entry, interpreter=interpreter: entry.update(interpreter="#!" + interpreter))
        lab.calls[:] = []
        again = run_on(lab, gate(lab))
        assert lab.calls == ["read_again", "preflight_info"]
        assert again["host_reads"]["changed"][0].startswith(message)


def test_another_python_runs_the_gate_and_says_so(lab):
    run_on(lab, gate(lab))
    edit_kept(lambda entry: entry.update(python=[2, 7]))
    again = run_on(lab, gate(lab))
    assert lab.calls == ["preflight_info", "read_again", "preflight_info"]
    assert again["host_reads"]["changed"] == ["the Python that reads is %s, not [2, 7]" % list(sys.version_info[:2])]


def test_a_kept_run_without_its_python_is_not_used(lab):
    run_on(lab, gate(lab))
    edit_kept(lambda entry: entry.pop("interpreter"))
    again = run_on(lab, gate(lab))
    assert again["host_reads"]["answered_from"] == "module" and again["host_reads"]["changed"] == []
    assert lab.calls == ["preflight_info", "preflight_info"]
