# -*- coding: utf-8 -*-
"""host/program_runner.py: programs run and found as an AnsibleModule runs and finds them, for the
processes that have no AnsibleModule (the controller's run of a captured tree, the program that makes a
gate's reads again). Each case is run both ways, for real: ansible-core's ``AnsibleModule.run_command``
and ``get_bin_path`` against ProgramRunner's."""

from __future__ import annotations

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.program_runner import ProgramRunner
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import C_LOCALE
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError

from conftest import module_args  # pylint: disable=import-error


@pytest.fixture
def module():
    with module_args({}):
        return AnsibleModule(argument_spec={})


RUNS = [
    ("the C locale over the environment", ["sh", "-c", "echo $LC_ALL $LANG $HOME"], {"environ_update": C_LOCALE}),
    ("an exit code and stderr", ["sh", "-c", "echo out; echo err >&2; exit 3"], {}),
    ("bytes that are not UTF-8", ["printf", "\\377\\376a"], {}),
    ("~ and $VAR expanded in the arguments", ["echo", "~/x", "$HOME/y", "'$HOME'"], {}),
    ("a None argument dropped", ["echo", None, "a"], {}),
    ("text on stdin, a newline added", ["cat"], {"data": "a"}),
    ("binary data on stdin as it is", ["cat"], {"data": "a", "binary_data": True}),
    ("empty data: no stdin pipe", ["sh", "-c", "test -t 0 || echo inherited"], {"data": ""}),
    ("AnsiballZ's paths taken out of PYTHONPATH", ["sh", "-c", "echo $PYTHONPATH"],
     {"environ_update": {"PYTHONPATH": "/tmp/x/ansible_modlib.zip:/opt/lib:/tmp/debug_dir"}}),
    ("only AnsiballZ's paths in PYTHONPATH: left as it is", ["sh", "-c", "echo $PYTHONPATH"],
     {"environ_update": {"PYTHONPATH": "/tmp/x/ansible_modlib.zip"}}),
]


@pytest.mark.parametrize("argv, kwargs", [case[1:] for case in RUNS], ids=[case[0] for case in RUNS])
def test_a_program_answers_as_run_command_answers(module, argv, kwargs):
    assert ProgramRunner().run_command(list(argv), **kwargs) == module.run_command(list(argv), **kwargs)


def test_programs_are_found_as_get_bin_path_finds_them(module, tmp_path, monkeypatch):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "tool").mkdir()
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "tool").write_text("not executable")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "tool").chmod(0o755)
    monkeypatch.setenv("PATH", ":".join(["", str(tmp_path / "dir"), str(tmp_path / "plain"), str(tmp_path / "bin"), "/bin"]))
    for name in ("tool", "sh", "ip", "no-such-program-here"):
        assert ProgramRunner().get_bin_path(name) == module.get_bin_path(name), name
    assert ProgramRunner().get_bin_path("tool") == str(tmp_path / "bin" / "tool")


def test_a_program_that_cannot_start_is_an_error_naming_it(tmp_path):
    with pytest.raises(StateError, match=str(tmp_path / "missing")):
        ProgramRunner().run_command([str(tmp_path / "missing")])
