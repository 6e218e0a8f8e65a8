# -*- coding: utf-8 -*-
"""tests/unit/fakes/standins/nvidia-cuda-mps-control, a STAND-IN for NVIDIA's MPS control tool used
by the tenant bench's guests (playbooks/lab/bench_gpu_standins.yml): -d forks a daemon that keeps
the environment it was started with and listens on the control pipe; "quit" on standard input ends
it; a second daemon on one pipe directory and a client without a daemon fail."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from fakes.paths import STANDINS  # pylint: disable=import-error

STANDIN = os.path.join(STANDINS, "nvidia-cuda-mps-control")


def control(pipe_dir, *args, stdin=""):
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe_dir), CUDA_VISIBLE_DEVICES="3",
               CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25")
    return subprocess.run([sys.executable, STANDIN, *args], input=stdin, env=env, capture_output=True, text=True,
                          check=False, timeout=30)


def wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_the_daemon_keeps_its_environment_and_quits_on_quit(tmp_path):
    pipe_dir = tmp_path / "gpu3"
    assert control(pipe_dir, "-d").returncode == 0
    pid_file = pipe_dir / "standin.pid"
    assert wait_for(pid_file.exists)
    pid = int(pid_file.read_text())
    with open("/proc/%d/environ" % pid, "rb") as handle:
        environ = handle.read().split(b"\0")
    assert b"CUDA_VISIBLE_DEVICES=3" in environ
    assert b"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in environ
    assert (pipe_dir / "control").exists()

    second = control(pipe_dir, "-d")
    assert second.returncode == 1 and "already listens" in second.stderr

    assert control(pipe_dir, stdin="quit\n").returncode == 0
    assert wait_for(lambda: not (pipe_dir / "control").exists())
    assert wait_for(lambda: not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z")
    assert not pid_file.exists()


def test_a_client_without_a_daemon_fails_and_other_arguments_are_refused(tmp_path):
    missing = control(tmp_path / "none", stdin="quit\n")
    assert missing.returncode == 1 and "no control daemon" in missing.stderr
    other = control(tmp_path / "none", "-f")
    assert other.returncode == 2 and other.stderr.startswith("STAND-IN")
