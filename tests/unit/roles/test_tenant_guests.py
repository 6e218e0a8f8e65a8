# -*- coding: utf-8 -*-
"""The tenant_guests role run by ansible-runner on this machine: the running guests join the
inventory (group gpuvirt_guests, ProxyJump through the GPU host) and their SSH servers are
waited for. The "guests" are TCP servers on 127.0.0.x that send an OpenSSH banner, or nothing
listening, so the wait and its failure message are real."""

from __future__ import annotations

import socket
import sys
import threading

import pytest

from fakes.playbook_run import run_with_runner  # pylint: disable=import-error

pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")

PLAY = """
- name: Tenants' guests after the tenants stage
  hosts: dgx01
  gather_facts: false
  tasks:
    - name: Test | The role
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.tenant_guests

- name: Test | The guests are in the inventory
  hosts: gpuvirt_guests
  gather_facts: false
  tasks:
    - name: Test | Say how each is reached
      ansible.builtin.debug:
        msg: >-
          {{ (inventory_hostname ~ ' ' ~ ansible_host | default('') ~ ':' ~ ansible_port | default('') ~ ' '
              ~ ansible_ssh_common_args | default('') ~ ' ' ~ gpuvirt_guest_vf_mac | default('')) | trim }}
"""


def banner_server(address):
    """A listener on ``address``:22-like port that answers like an SSH server; -> its port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, 0))
    server.listen(8)

    def serve():
        while True:
            try:
                client = server.accept()[0]
            except OSError:
                return
            client.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
            client.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


def run_role(tmp_path, tenants, extra=None, tasks=("Test | Say", "Fail naming")):
    (tmp_path / "play.yml").write_text(PLAY)
    inventory = ("dgx01 ansible_connection=local ansible_host=192.0.2.11 ansible_user=ops ansible_python_interpreter=%s\n"
                 "[gpuvirt_guests]\nstatic-guest ansible_connection=local ansible_python_interpreter=%s\n"
                 % (sys.executable, sys.executable))
    variables = {"gpuvirt_tenants": tenants, "gpuvirt_guest_access": dict({"user": "gpuvirt"}, **(extra or {})),
                 "tenant_guests_wait_timeout": 3}
    rc, out, records = run_with_runner(tmp_path / "runner", tmp_path / "play.yml", inventory, variables)
    messages = [r["result"].get("msg") for r in records
                if r["status"] in ("ok", "failed") and (r["task"] or "").startswith(tasks)]
    return rc, out, messages


def tenant(name, address, state="running"):
    return {"name": name, "state": state, "mac": "52:54:00:00:00:0a", "image": {"base": "/srv/base.qcow2"},
            "guest": {"address": address + "/24"}}


def test_running_guests_join_the_inventory_once_ssh_answers(tmp_path):
    server = banner_server("127.0.0.1")
    port = server.getsockname()[1]
    tenants = [tenant("tenant-a", "127.0.0.1"), tenant("tenant-c", "127.0.0.3", state="defined")]
    try:
        rc, out, messages = run_role(tmp_path, tenants, {"port": port})
    finally:
        server.close()
    assert rc == 0, out[-4000:]
    assert sorted(messages) == sorted([
        "static-guest static-guest:",
        "tenant-a 127.0.0.1:%d -o ProxyJump=ops@192.0.2.11 -o StrictHostKeyChecking=accept-new 52:54:00:00:00:0a" % port]), messages


def test_a_guest_that_does_not_answer_fails_naming_its_console_log(tmp_path):
    # nothing listens on 127.0.0.2's port 9
    rc, out, messages = run_role(tmp_path, [tenant("tenant-b", "127.0.0.2")], {"port": 9},
                                 tasks=("Say which guests", "Say how long", "Fail naming"))
    assert rc != 0
    # the wait said before with its bound, and how long it waited after
    start, waited, failure = messages
    assert start == "waiting up to 3 s for the SSH server of each of tenant-b", messages
    assert waited == [["tenant-b", 3]], messages
    assert len(failure) == 1 and failure[0].startswith("tenant tenant-b did not answer SSH on 127.0.0.2:9 within 3s")
    assert failure[0].endswith("read its console log /var/log/libvirt/qemu/tenant-b-console.log on dgx01"), failure
