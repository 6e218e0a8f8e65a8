# -*- coding: utf-8 -*-
"""The tenant_guests role run by ansible-runner on this machine: the running guests join the
inventory (group gpuvirt_guests, ProxyJump through the GPU host) and their SSH servers are
waited for. The "guests" are TCP servers that send an OpenSSH banner, or nothing listening, so the
wait and its failure message are real. Their addresses are ones a guest can hold (the tenant record
refuses a loopback address for a guest): documentation addresses (192.0.2.0/24, RFC 5737) on the
loopback device of a network namespace the test makes (``unshare --net``, util-linux; ``ip``,
iproute2), where the banner servers and the play both run. The namespace has no other device, so
nothing leaves it. A namespace that cannot be made fails the test, saying why."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest

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

# The namespace's own loopback device up with the guests' addresses (a /32 each), a line that says so,
# then the command; a step that fails says which and stops before the line.
READY = "network namespace ready"
NAMESPACE_SETUP = ('ip link set lo up || { echo "cannot set lo up in the new network namespace" >&2; exit 1; }; '
                   'for address in $GUEST_ADDRESSES; do ip address add "$address/32" dev lo '
                   '|| { echo "cannot add $address to lo in the new network namespace" >&2; exit 1; }; done; '
                   'echo "%s"; exec "$@"' % READY)


def in_network_namespace(addresses, argv, timeout=300):
    """``argv`` run in a new network namespace whose ``lo`` holds ``addresses``; -> (the finished
    process, its output after the setup's line). As root (how CI runs) ``unshare --net``; otherwise
    also a user namespace (``--user --map-root-user``) where the kernel lets one be made. Fails the
    test, saying why, when the namespace cannot be made."""
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
    env = dict(os.environ, GUEST_ADDRESSES=" ".join(addresses), PYTHONPATH=os.pathsep.join(sys.path))
    try:
        done = subprocess.run(unshare + ["--", "sh", "-c", NAMESPACE_SETUP, "sh"] + list(argv), env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        pytest.fail("the test's network namespace cannot be made: %s (unshare is util-linux's, ip iproute2's: "
                    "scripts/bootstrap.sh installs them)" % exc)
    before, ready, after = done.stdout.partition(READY + "\n")
    if not ready:
        pytest.fail("the test's network namespace cannot be made (%s, exit %d): %s; it needs unshare (util-linux) and ip "
                    "(iproute2), and root or unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone, "
                    "user.max_user_namespaces)" % (" ".join(unshare), done.returncode, (before + done.stderr).strip()[-2000:]))
    return done, after


def banner_server(address):
    """A listener on ``address`` (a port the kernel picks) that answers like an SSH server; -> the socket."""
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


def role_in_namespace(job_path):
    """Inside the namespace: the banner servers of the job (a JSON file: tmp_path, tenants, the
    access, which addresses listen, the tasks whose messages count), the role run by ansible-runner
    with the access's port the servers' (when one listens), and the result written back beside the
    job (rc, the output's tail, the messages, the port)."""
    from fakes.playbook_run import run_with_runner  # pylint: disable=import-error,import-outside-toplevel
    with open(job_path, encoding="utf-8") as handle:
        job = json.load(handle)
    servers = [banner_server(address) for address in job["listen"]]
    port = servers[0].getsockname()[1] if servers else job["access"].get("port")
    tmp_path = job["tmp_path"]
    try:
        with open(os.path.join(tmp_path, "play.yml"), "w", encoding="utf-8") as handle:
            handle.write(PLAY)
        inventory = ("dgx01 ansible_connection=local ansible_host=192.0.2.11 ansible_user=ops ansible_python_interpreter=%s\n"
                     "[gpuvirt_guests]\nstatic-guest ansible_connection=local ansible_python_interpreter=%s\n"
                     % (sys.executable, sys.executable))
        variables = {"gpuvirt_tenants": job["tenants"], "gpuvirt_guest_access": dict(job["access"], port=port),
                     "tenant_guests_wait_timeout": 3}
        rc, out, records = run_with_runner(os.path.join(tmp_path, "runner"), os.path.join(tmp_path, "play.yml"), inventory,
                                           variables)
    finally:
        for server in servers:
            server.close()
    messages = [r["result"].get("msg") for r in records
                if r["status"] in ("ok", "failed") and (r["task"] or "").startswith(tuple(job["tasks"]))]
    with open(job_path + ".result", "w", encoding="utf-8") as handle:
        json.dump({"rc": rc, "out": out[-4000:], "messages": messages, "port": port}, handle)


def run_role(tmp_path, tenants, addresses, listen=(), access=None, tasks=("Test | Say", "Fail naming")):
    """The role on dgx01 (a local connection) in a network namespace whose ``lo`` holds
    ``addresses``, with banner servers on those of ``listen``; -> (rc, output, messages, port)."""
    job = str(tmp_path / "job.json")
    with open(job, "w", encoding="utf-8") as handle:
        json.dump({"tmp_path": str(tmp_path), "tenants": tenants, "access": dict({"user": "gpuvirt"}, **(access or {})),
                   "listen": list(listen), "tasks": list(tasks)}, handle)
    done, _out = in_network_namespace(addresses, [sys.executable, __file__, job])
    assert done.returncode == 0 and os.path.exists(job + ".result"), (done.stdout + done.stderr)[-4000:]
    with open(job + ".result", encoding="utf-8") as handle:
        result = json.load(handle)
    return result["rc"], result["out"], result["messages"], result["port"]


def tenant(name, address, mac, state="running"):
    return {"name": name, "state": state, "vcpus": 2, "memory_mb": 1024, "mac": mac, "image": {"base": "/srv/base.qcow2"},
            "guest": {"address": address + "/24"}}


def test_running_guests_join_the_inventory_once_ssh_answers(tmp_path):
    tenants = [tenant("tenant-a", "192.0.2.21", "52:54:00:00:00:0a"),
               tenant("tenant-c", "192.0.2.23", "52:54:00:00:00:0c", state="defined")]
    rc, out, messages, port = run_role(tmp_path, tenants, ["192.0.2.21", "192.0.2.23"], listen=["192.0.2.21"])
    assert rc == 0, out
    assert sorted(messages) == sorted([
        "static-guest static-guest:",
        "tenant-a 192.0.2.21:%d -o ProxyJump=ops@192.0.2.11 -o StrictHostKeyChecking=accept-new 52:54:00:00:00:0a" % port]), messages


def test_a_guest_that_does_not_answer_fails_naming_its_console_log(tmp_path):
    # 192.0.2.22 is on the namespace's lo, and nothing listens on its port 9
    rc, out, messages, _port = run_role(tmp_path, [tenant("tenant-b", "192.0.2.22", "52:54:00:00:00:0b")], ["192.0.2.22"],
                                        access={"port": 9}, tasks=("Say which guests", "Say how long", "Fail naming"))
    assert rc != 0
    # the wait said before with its bound, and how long it waited after
    start, waited, failure = messages
    assert start == "waiting up to 3 s for the SSH server of each of tenant-b", messages
    assert waited == [["tenant-b", 3]], messages
    assert len(failure) == 1 and failure[0].startswith("tenant tenant-b did not answer SSH on 192.0.2.22:9 within 3s"), failure
    assert failure[0].endswith("read its console log /var/log/libvirt/qemu/tenant-b-console.log on dgx01"), failure


def test_the_namespace_holds_the_guests_addresses_on_lo_and_no_other_device():
    """Nothing the role's run sends leaves its namespace: lo is its only device."""
    done, out = in_network_namespace(["192.0.2.21", "192.0.2.22"], ["ip", "-o", "address", "show"])
    assert done.returncode == 0, done.stderr
    assert set(line.split()[1] for line in out.splitlines()) == {"lo"}, out
    assert "inet 192.0.2.21/32" in out and "inet 192.0.2.22/32" in out, out


if __name__ == "__main__":
    role_in_namespace(sys.argv[1])
