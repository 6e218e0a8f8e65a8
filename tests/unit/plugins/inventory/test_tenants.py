# -*- coding: utf-8 -*-
"""The inventory plugin gpuvirt.tenancy.tenants, from the command line (ansible-inventory) and from
the installed collection alone: an inventory directory whose hosts.yml lists a GPU host, whose
group_vars give its tenants (as the example inventory does) and whose last file configures the
plugin; the host's libvirt is libvirt's test driver on a node whose domains are the tenants'
(tenant-a running with a VF, tenant-b shut off, tenant-c running without a guest image) and one
domain that is no tenant. Only tenant-a's guest is listed, reached at its management address
through the GPU host; a host whose libvirt does not answer fails the inventory naming the fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

import built_collection  # pylint: disable=import-error

# libvirt's test driver node (its format: libvirt's examples/xml/test/testnode.xml; runstate 5 is
# VIR_DOMAIN_SHUTOFF, the test driver's <test:runstate>)
NODE = """<node>
  <domain type="test">
    <name>tenant-a</name>
    <memory>1048576</memory>
    <os><type>hvm</type></os>
    <devices>
      <interface type="network"><mac address="52:54:00:10:00:01"/><source network="default"/></interface>
      <interface type="hostdev" managed="no"><mac address="02:AB:CD:00:00:01"/>
        <source><address type="pci" domain="0x0000" bus="0x19" slot="0x00" function="0x1"/></source></interface>
    </devices>
  </domain>
  <domain type="test" xmlns:test="http://libvirt.org/schemas/domain/test/1.0">
    <name>tenant-b</name>
    <memory>1048576</memory>
    <os><type>hvm</type></os>
    <test:runstate>5</test:runstate>
  </domain>
  <domain type="test"><name>tenant-c</name><memory>1048576</memory><os><type>hvm</type></os></domain>
  <domain type="test"><name>not-a-tenant</name><memory>1048576</memory><os><type>hvm</type></os></domain>
</node>
"""
TENANTS = [
    {"name": "tenant-a", "vcpus": 4, "memory_mb": 8192, "gpus": 1, "vfs": 1, "image": {"base": "/srv/debian-12.qcow2"},
     "guest": {"address": "192.168.150.11/24"}},
    {"name": "tenant-b", "vcpus": 4, "memory_mb": 8192, "image": {"base": "/srv/debian-12.qcow2"}, "guest": {"address": "192.168.150.12/24"}},
    {"name": "tenant-c", "vcpus": 4, "memory_mb": 8192},
]


def inventory_dir(where, uri, jump=True):
    """An inventory directory ``where`` (the node's file beside it, not in it: every file of the directory is a source)."""
    where.mkdir()
    (where.parent / "node.xml").write_text(NODE)
    (where / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"gpuvirt_hosts": {"hosts": {"dgx01": {
        "ansible_host": "dgx01.example.com", "ansible_user": "ops", "gpuvirt_inventory_libvirt_uri": uri}}}}}}))
    (where / "group_vars").mkdir()
    (where / "group_vars" / "gpuvirt_hosts.yml").write_text(yaml.safe_dump({
        "gpuvirt_tenants": TENANTS, "gpuvirt_guest_access": {"user": "debian", "jump": jump}}))
    (where / "zz-tenants.gpuvirt_tenants.yml").write_text("plugin: gpuvirt.tenancy.tenants\n")
    return where


def plain(value):
    """A value of ansible-inventory's JSON without the mark of a value not to be templated
    ({"__ansible_unsafe": text}: what an inventory plugin sets is data, never a template)."""
    if isinstance(value, dict):
        return value["__ansible_unsafe"] if set(value) == {"__ansible_unsafe"} else dict((k, plain(v)) for k, v in value.items())
    return [plain(v) for v in value] if isinstance(value, list) else value


def inventory_list(path, **env):
    collections = built_collection.installed()
    proc = subprocess.run([os.path.join(built_collection.bindir(), "ansible-inventory"), "-i", str(path), "--list"],
                          env=dict(built_collection.clean_env(collections), ANSIBLE_NOCOLOR="1", **env),
                          capture_output=True, text=True, check=False, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def test_running_tenants_guests_are_listed_through_their_host(tmp_path):
    path = inventory_dir(tmp_path / "inv", "test://%s" % (tmp_path / "node.xml"))
    rc, out, err = inventory_list(path)
    assert rc == 0, err
    listed = json.loads(out)
    assert listed["gpuvirt_guests"]["hosts"] == ["tenant-a"]
    guest = plain(listed["_meta"]["hostvars"]["tenant-a"])
    assert guest["ansible_host"] == "192.168.150.11" and guest["ansible_user"] == "debian"
    assert guest["ansible_ssh_common_args"] == "-o ProxyJump=ops@dgx01.example.com -o StrictHostKeyChecking=accept-new"
    assert guest["gpuvirt_tenant_host"] == "dgx01" and guest["gpuvirt_guest_vf_mac"] == "02:ab:cd:00:00:01"
    assert "[WARNING]" not in err, err


def test_no_jump_when_the_access_says_so(tmp_path):
    path = inventory_dir(tmp_path / "inv", "test://%s" % (tmp_path / "node.xml"), jump=False)
    rc, out, err = inventory_list(path)
    assert rc == 0, err
    assert "ansible_ssh_common_args" not in json.loads(out)["_meta"]["hostvars"]["tenant-a"]


def test_a_host_whose_libvirt_does_not_answer_fails_naming_it(tmp_path):
    path = inventory_dir(tmp_path / "inv", "test://%s" % (tmp_path / "no-such-node.xml"))
    rc, out, err = inventory_list(path)
    # ansible-inventory warns about a source that fails, and lists no guest
    assert rc == 0 and "gpuvirt_guests" not in json.loads(out)
    # with ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED it fails
    rc, out, err = inventory_list(path, ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="true")
    assert rc != 0
    # ansible-inventory wraps its warnings at 79 columns (textwrap, which also breaks after a
    # hyphen inside a path): compared with every blank taken out
    said = "".join(err.split())
    expected = "gpuvirt.tenancy.tenants: host dgx01: cannot read its libvirt at test://%s" % (tmp_path / "no-such-node.xml")
    assert "".join(expected.split()) in said, err
    assert "gpuvirt_inventory_libvirt_uri" in said and "noguestwasadded" in said


@pytest.mark.parametrize("hostvars, uri", [
    ({"ansible_host": "192.0.2.11", "ansible_user": "ops"}, "qemu+ssh://ops@192.0.2.11/system"),
    ({"ansible_host": "2001:db8::11", "ansible_port": 2222}, "qemu+ssh://[2001:db8::11]:2222/system"),
    ({}, "qemu+ssh://dgx01/system"),
    ({"gpuvirt_inventory_libvirt_uri": "qemu+tls://dgx01/system"}, "qemu+tls://dgx01/system"),
])
def test_each_hosts_libvirt_as_the_controller_reaches_it(hostvars, uri):
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.tenant_inventory import libvirt_uri  # pylint: disable=import-outside-toplevel
    assert libvirt_uri("dgx01", hostvars) == uri


# The example inventory's dgx01 running its tenants a-c (tenant-d defined, shut off), as libvirt's
# test driver node (the format above)
EXAMPLE_NODE = "<node>\n%s</node>\n" % "".join(
    '  <domain type="test" xmlns:test="http://libvirt.org/schemas/domain/test/1.0"><name>%s</name><memory>1048576</memory>'
    '<os><type>hvm</type></os>%s</domain>\n' % (name, "<test:runstate>5</test:runstate>" if name == "tenant-d" else "")
    for name in ("tenant-a", "tenant-b", "tenant-c", "tenant-d"))


def test_the_example_inventory_with_the_source_lists_the_guests_and_previews_without_them(tmp_path):
    """The installed example inventory with the plugin's file as its last source (as the AWX project
    has it), dgx01's libvirt running tenants a-c: its guests are listed, reached through dgx01; the
    preview of that inventory on the DGX A100-class capture (the docs' command) exits 0, warns of
    nothing but the tenants module's own, and asks no guest anything (the guest stages run inside
    tenants that exist: a preview has none)."""
    from fakes.captured_trees import load_dgx_tree  # pylint: disable=import-error,import-outside-toplevel
    collection = os.path.join(built_collection.installed(), "ansible_collections", "gpuvirt", "tenancy")
    mine = tmp_path / "mine"
    shutil.copytree(os.path.join(collection, "inventories", "example"), str(mine))
    (tmp_path / "node.xml").write_text(EXAMPLE_NODE)
    (mine / "host_vars").mkdir()
    (mine / "host_vars" / "dgx01.yml").write_text(yaml.safe_dump({"gpuvirt_inventory_libvirt_uri": "test://%s" % (tmp_path / "node.xml")}))
    (mine / "zz-tenants.gpuvirt_tenants.yml").write_text("plugin: gpuvirt.tenancy.tenants\n")
    rc, out, err = inventory_list(mine)
    assert rc == 0 and "[WARNING]" not in err, err
    listed = json.loads(out)
    assert sorted(listed["gpuvirt_guests"]["hosts"]) == ["tenant-a", "tenant-b", "tenant-c"]
    guest = plain(listed["_meta"]["hostvars"]["tenant-c"])
    assert guest["ansible_host"] == "192.168.150.13" and guest["gpuvirt_tenant_host"] == "dgx01"
    assert "ProxyJump=" in guest["ansible_ssh_common_args"] and "192.0.2.11" in guest["ansible_ssh_common_args"]

    load_dgx_tree().write_tree(str(tmp_path / "dgx01"))
    done = subprocess.run(["ansible-playbook", "-i", "mine", "gpuvirt.tenancy.site", "--check", "--diff",
                           "-e", "gpuvirt_host_root=%s" % (tmp_path / "dgx01")], cwd=str(tmp_path), env=built_collection.user_env(),
                          capture_output=True, text=True, check=False, timeout=900)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    warnings = built_collection.other_warnings(said)
    assert warnings == [], warnings
    # no task ran on a guest: each one is skipped, none reached
    touched = [line for line in said.splitlines() if line.startswith(("ok: [tenant-", "changed: [tenant-", "fatal: [tenant-"))]
    assert touched == [], touched
    recap = dict((line.split()[0], line) for line in said.splitlines() if re.match(r"tenant-[a-z] +: ok=", line))
    assert sorted(recap) == ["tenant-a", "tenant-b", "tenant-c"] and all("unreachable=0" in line and "ok=0" in line for line in recap.values()), recap


def test_a_tenant_the_guest_inventory_refuses_fails_the_host_naming_it():
    """The guests' entries are the guest_inventory action's (plugin_utils guest_inventory): a tenant whose name
    the inventory keeps for the controller fails the source naming the host and the tenant; no guest is added."""
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import tenant_inventory  # pylint: disable=import-outside-toplevel
    hostvars = {"gpuvirt_tenants": [dict(TENANTS[0], name="localhost")], "gpuvirt_guest_access": {"user": "debian"}}
    with pytest.raises(tenant_inventory.TenantInventoryError) as caught:
        tenant_inventory.guest_entries("dgx01", hostvars, {"localhost": "<domain/>"}, ["dgx01"])
    message = str(caught.value)
    assert message.startswith("gpuvirt.tenancy.tenants: host dgx01: tenant localhost: a name Ansible keeps for the controller")
    assert message.endswith("no guest was added"), message


def test_a_tenant_entry_the_record_refuses_fails_the_host_with_the_records_message():
    """gpuvirt_tenants is read as the tenant records: a bad entry (here a guest address no host can
    hold), even one whose domain does not run, fails the source naming the host, the tenant and the
    fix; no guest is added."""
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import tenant_inventory  # pylint: disable=import-outside-toplevel
    hostvars = {"gpuvirt_tenants": TENANTS[:2] + [dict(TENANTS[2], guest={"address": "127.0.0.3/24"})],
                "gpuvirt_guest_access": {"user": "debian"}}
    with pytest.raises(tenant_inventory.TenantInventoryError) as caught:
        tenant_inventory.guest_entries("dgx01", hostvars, {"tenant-a": "<domain/>"}, ["dgx01"])
    message = str(caught.value)
    assert message.startswith("gpuvirt.tenancy.tenants: host dgx01: tenants[2] (tenant-c): guest.address: 127.0.0.3/24 is a "
                              "loopback address, which no host can hold; give a host address"), message
    assert message.endswith("no guest was added"), message
    # a tenant listed as defined is left out although its domain runs; the default state is listed
    hostvars["gpuvirt_tenants"] = [dict(TENANTS[0], state="defined"), dict(TENANTS[1])]
    entries = tenant_inventory.guest_entries("dgx01", hostvars, {"tenant-a": "<domain/>", "tenant-b": "<domain/>"}, ["dgx01"])
    assert [entry["name"] for entry in entries] == ["tenant-b"]
