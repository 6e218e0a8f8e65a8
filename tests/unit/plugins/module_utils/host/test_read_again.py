# -*- coding: utf-8 -*-
"""host/read_again.py: the program that makes a gate's kept reads again on a host, run here as the
action runs it on one (the host's Python, the program on stdin), over real trees in a temporary
directory. Run with ``-I -S`` (no site-packages: neither ansible-core nor the collection importable),
it answers the gate's reads with the digests the gate's run recorded, and a changed file with a
changed digest; a record that is no read is refused before any read is made."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import read_again, reads
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host, ModuleCommands
from ansible_collections.gpuvirt.tenancy.plugins.modules import preflight_info

from conftest import LIBVIRT_TEST_URI as URI, module_args, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import lab_host_with_vfs  # pylint: disable=import-error

MODULE_UTILS = os.path.dirname(os.path.dirname(read_again.__file__))
PF = "0000:81:00.0"
GPU = "0000:82:00.0"
GATE = {"firmware_tool": "none", "stage_checks": {"sriov_vfio": {"devices": [GPU], "vfs_of": [PF]}}}


def program(records, root, cwd, tree=None):
    """The program's answer for ``records`` under ``root``, run by this Python without site-packages. With
    ``tree``, the tree's /proc shows the program as this process's child (as a host's shows it below the SSH
    session), before it reads its program from stdin, so before it reads /proc."""
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=str(cwd))
    if tree is not None:
        tree.write("/proc/%d/status" % proc.pid, "Name:\tpython3\nPPid:\t%d\n" % os.getpid())
    out, err = proc.communicate(read_again.script(MODULE_UTILS, records, root).encode())
    assert proc.returncode == 0 and err == b"", err
    return json.loads(out)


@pytest.fixture
def lab(tmp_path):
    return lab_host_with_vfs(tmp_path / "root")


def recorded_gate(tree, kernel):
    """What a gate run over the tree records (the module's own recording, ``record_reads``)."""
    host = Host(tree.root, commands=RecordedCommands(programs=["ip"]), kernel=kernel)
    return run_module(preflight_info.main, dict(GATE, root=tree.root, record_reads=True), check_mode=True,
                      host=host)["host_reads"]


def test_the_program_answers_the_gates_reads_with_the_digests_the_gate_recorded(lab, tmp_path):
    tree, kernel = lab
    recorded = recorded_gate(tree, kernel)
    assert recorded["answerable"] and len(recorded["records"]) > 100
    answer = program(recorded["records"], tree.root, tmp_path, tree)
    assert answer == {"digests": recorded["digests"], "python": list(sys.version_info[:2])}
    tree.write("/sys/bus/pci/devices/%s/sriov_numvfs" % PF, "2")
    changed = [reads.describe(record) for record, now, then in
               zip(recorded["records"], program(recorded["records"], tree.root, tmp_path, tree)["digests"], recorded["digests"])
               if now != then]
    assert changed == ["fs.read('/sys/bus/pci/devices/%s/sriov_numvfs')" % PF]


def test_the_programs_it_runs_answer_as_the_modules_run_command(tmp_path):
    """A program read by the gate through the module's run_command, made again by the program through
    its own runner: the same digests (the environment, the C locale, bytes that are not UTF-8)."""
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho \"$LC_ALL $LANG $1\"\nprintf '\\377\\n' >&2\nexit 3\n")
    script.chmod(0o755)
    from ansible.module_utils.basic import AnsibleModule  # pylint: disable=import-outside-toplevel
    with module_args({}):
        module = AnsibleModule(argument_spec={})
    recorder = reads.Recorder()
    host = reads.record(Host(str(tmp_path), commands=ModuleCommands(module)), recorder)
    assert host.commands.run([str(script), "~/$HOME"], check=False)[0] == 3
    assert host.commands.which("sh") and host.commands.which("no-such-program-here") is None
    assert program(recorder.records, str(tmp_path), tmp_path)["digests"] == recorder.digests


BAD_RECORDS = [
    ("not a pair", ["fs"]),
    ("a part the seam has not", ["kernel", [["write", ["/sys/x", "1"], {}]]]),
    ("a write", ["fs", [["write", ["/sys/bus/pci/drivers_probe", "0000:82:00.0"], {}]]]),
    ("two calls on the filesystem", ["fs", [["read", ["/a"], {}], ["read", ["/b"], {}]]]),
    ("a libvirt call that is no read", ["libvirt", [["open", [URI]], ["define", ["<domain/>"]]]]),
    ("libvirt without its open", ["libvirt", [["domain_names", []]]]),
]


@pytest.mark.parametrize("record", [case[1] for case in BAD_RECORDS], ids=[case[0] for case in BAD_RECORDS])
def test_a_record_that_is_no_read_is_refused_before_any_read(record, tmp_path):
    marker = tmp_path / "ran"
    good = ["commands", [["run", [["touch", str(marker)]], {}]]]
    answer = program([good, record], "/", tmp_path)
    assert answer["failed"] and answer["msg"].startswith("records[1]: ") and "nothing was read" in answer["msg"]
    assert not marker.exists()


def test_a_root_that_is_no_directory_is_refused_naming_it(tmp_path):
    answer = program([["fs", [["read", ["/proc/cmdline"], {}]]]], str(tmp_path / "nowhere"), tmp_path)
    assert answer["failed"] and "is not a directory" in answer["msg"] and "nowhere" in answer["msg"]
