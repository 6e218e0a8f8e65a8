# -*- coding: utf-8 -*-
"""The host seam: root, paths, the kernel writer, the module's command runner."""

from __future__ import annotations

import contextlib

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import CommandError, Host, ModuleCommands, program_path

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import connection
from ansible_collections.gpuvirt.tenancy.plugins.modules import tenant_domain_info
from conftest import LIBVIRT_TEST_URI, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error


def test_root_and_paths(tmp_path):
    host = Host(str(tmp_path))
    assert not host.live and host.path("/etc/default/grub") == str(tmp_path / "etc/default/grub")
    assert Host("/").live and Host("/").path("/etc/default/grub") == "/etc/default/grub"


def test_root_must_be_a_directory(tmp_path):
    with pytest.raises(InputError, match="is not a directory"):
        Host(str(tmp_path / "nowhere"))


def test_program_path_takes_the_option_or_the_path(tmp_path):
    """A module's program: its option when that is an executable file, else the one on PATH; a bad
    option and a missing program are refused, naming the option and how to get the program."""
    program = tmp_path / "tool"
    program.write_text("#!/bin/sh\n")
    host = Host(str(tmp_path), commands=RecordedCommands(["tool"]))
    with pytest.raises(InputError, match="tool_path: %s is not an executable file; point it at tool" % program):
        program_path(host, str(program), "tool_path", "tool", "install it")
    program.chmod(0o755)
    assert program_path(host, str(program), "tool_path", "tool", "install it") == str(program)
    assert program_path(host, None, "tool_path", "tool", "install it") == "/usr/bin/tool"
    with pytest.raises(StateError, match="other was not found on PATH: install it, or set other_path to its path"):
        program_path(host, None, "other_path", "other", "install it")


def test_kernel_writer_writes_under_the_root(tmp_path):
    (tmp_path / "sys").mkdir()
    Host(str(tmp_path)).kernel.write("/sys/nr_hugepages", "4\n")
    assert (tmp_path / "sys/nr_hugepages").read_text() == "4\n"


def test_bind_keeps_injected_commands(tmp_path):
    commands = RecordedCommands()
    assert Host(str(tmp_path), commands=commands).bind(object()).commands is commands


@pytest.fixture
def module():
    """A real AnsibleModule: its get_bin_path and run_command run this machine's programs."""
    from ansible.module_utils.basic import AnsibleModule  # pylint: disable=import-outside-toplevel
    from conftest import module_args  # pylint: disable=import-outside-toplevel,import-error
    with module_args({"_ansible_remote_tmp": "/tmp", "_ansible_keep_remote_files": False}):
        yield AnsibleModule(argument_spec={})


def test_module_commands(module):
    commands = ModuleCommands(module)
    assert commands.which("sh").endswith("/sh") and commands.which("no-such-program-here") is None
    with pytest.raises(StateError, match="no-such-program-here was not found on PATH: install it"):
        commands.which("no-such-program-here", required=True, hint="install it")
    # printenv, not $LC_ALL: run_command expands $VARS in arguments itself, from this process's environment
    # (ansible-test units sets LC_ALL=C.UTF-8 there)
    rc, out, _err = commands.run(["sh", "-c", "printenv LC_ALL; echo done"])
    assert rc == 0 and out.split() == ["C", "done"]


def test_module_commands_check_the_return_code(module):
    commands = ModuleCommands(module)
    with pytest.raises(CommandError) as raised:
        commands.run(["sh", "-c", "echo grub-probe: error >&2; exit 3"])
    assert raised.value.details == {"rc": 3, "cmd": ["sh", "-c", "echo grub-probe: error >&2; exit 3"],
                                    "stdout": "", "stderr": "grub-probe: error\n"}
    assert commands.run(["sh", "-c", "exit 3"], check=False)[0] == 3


def test_a_directory_made_meanwhile_by_another_call_is_the_one_wanted(tmp_path, monkeypatch):
    """Two inventory names of one machine (the lab's stand-in guests) write their NCCL files side by
    side: the other call may make the directory between the check and the makedirs."""
    import os
    files = Host(str(tmp_path)).files
    wanted = str(tmp_path / "etc" / "nccl.conf.d")
    real_mkdir = os.mkdir

    def made_meanwhile(path, mode=0o777, **kwargs):
        real_mkdir(path, mode, **kwargs)
        if path == wanted:
            # the other call made it first: this call's mkdir fails as the slower one's would
            raise FileExistsError(17, "File exists", path)
    monkeypatch.setattr(os, "mkdir", made_meanwhile)
    files.makedirs(wanted)
    assert os.path.isdir(wanted)
    # a parent that is a file still fails
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        files.makedirs(str(tmp_path / "file" / "sub"))


def test_read_once_asks_once_checks_like_run_and_forgets(tmp_path):
    commands = RecordedCommands(replies=[(["mlxconfig", "-d", "x", "-e", "q"], 0, "params\n", ""),
                                         (["ip", "link", "show", "dev", "eth9"], 1, "", "Device \"eth9\" does not exist.\n")])
    host = Host(str(tmp_path), commands=commands)
    assert host.read_once(["mlxconfig", "-d", "x", "-e", "q"]) == (0, "params\n", "")
    assert host.read_once(["mlxconfig", "-d", "x", "-e", "q"]) == (0, "params\n", "")
    assert len(commands.ran("mlxconfig")) == 1
    # a failed read raises as commands.run does, each time it is asked, from the one answer
    for _attempt in range(2):
        with pytest.raises(CommandError) as raised:
            host.read_once(["ip", "link", "show", "dev", "eth9"])
        assert raised.value.details["rc"] == 1 and "does not exist" in raised.value.details["stderr"]
    assert host.read_once(["ip", "link", "show", "dev", "eth9"], check=False)[0] == 1
    assert len(commands.ran("ip")) == 1
    host.forget_reads()
    host.read_once(["mlxconfig", "-d", "x", "-e", "q"])
    assert len(commands.ran("mlxconfig")) == 2


def _outside(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "etc").mkdir(parents=True)
    outside.mkdir()
    (outside / "nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    return root, outside


@pytest.mark.parametrize("host_path", ["/etc/../../outside/nccl.conf", "/../outside/nccl.conf", "/.."])
def test_a_path_that_leaves_the_root_by_dotdot_is_refused_naming_the_option(tmp_path, host_path):
    root, _outside_dir = _outside(tmp_path)
    with pytest.raises(InputError, match=r"^path: .* outside the root"):
        Host(str(root)).path(host_path, "path")


def test_dotdot_that_stays_inside_the_root_is_a_path_under_it(tmp_path):
    root, _outside_dir = _outside(tmp_path)
    assert Host(str(root)).path("/etc/../etc/nccl.conf") == str(root / "etc/../etc/nccl.conf")


@pytest.mark.parametrize("relative", [True, False])
def test_a_symlink_in_the_tree_that_leads_out_is_refused_for_a_file_and_a_directory(tmp_path, relative):
    root, outside = _outside(tmp_path)
    target = "../../outside/nccl.conf" if relative else str(outside / "nccl.conf")
    (root / "etc" / "nccl.conf").symlink_to(target)
    (root / "etc" / "systemd").symlink_to("../../outside" if relative else str(outside))
    host = Host(str(root))
    with pytest.raises(InputError, match="^path: /etc/nccl.conf resolves to .*outside/nccl.conf, outside the root"):
        host.path("/etc/nccl.conf", "path")
    with pytest.raises(InputError, match="persist_unit: .* outside the root"):
        host.path("/etc/systemd/x.service", "persist_unit")
    # the link itself (made or removed, not written through) is inside
    assert host.path("/etc/nccl.conf", follow=False) == str(root / "etc/nccl.conf")


def test_a_symlink_that_stays_inside_is_followed(tmp_path):
    root, _outside_dir = _outside(tmp_path)
    (root / "etc" / "real.conf").write_text("x\n")
    (root / "etc" / "nccl.conf").symlink_to("real.conf")
    assert Host(str(root)).path("/etc/nccl.conf") == str(root / "etc/nccl.conf")


def test_the_live_root_is_not_checked():
    assert Host("/").path("/etc/../../etc/hosts", "path") == "/etc/../../etc/hosts"


def test_kernel_writer_refuses_an_attribute_outside_the_root(tmp_path):
    root, outside = _outside(tmp_path)
    (root / "sys").mkdir()
    (root / "sys" / "devices").symlink_to(str(outside))
    with pytest.raises(InputError, match="outside the root"):
        Host(str(root)).kernel.write("/sys/devices/nccl.conf", "4\n")
    assert (outside / "nccl.conf").read_text() == "NCCL_DEBUG=INFO\n"


def test_libvirt_calls_go_through_the_seam(tmp_path):
    # a feature opens libvirt through its Host: an injected opener is what the module talks to
    # (here it hands out libvirt's built-in test driver, whose stock domain is named "test")
    opened = []

    @contextlib.contextmanager
    def opener(uri):
        opened.append(uri)
        with connection(LIBVIRT_TEST_URI) as conn:
            yield conn

    host = Host(str(tmp_path), libvirt_open=opener)
    result = run_module(tenant_domain_info.main, {"names": ["test", "nope"], "uri": "qemu+ssh://nowhere/system"}, host=host)
    assert opened == ["qemu+ssh://nowhere/system"]
    assert list(result["domains"]) == ["test"], result
