# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet filters: ``gpuvirt.tenancy.deferred_hosts``, the hosts the rolling bring-up's reboot budget
deferred (role host_stages, tasks_from boot, shares it with the action reboot_share; docs/fleet.md),
``gpuvirt.tenancy.fleet_hosts`` and ``gpuvirt.tenancy.fleet_libvirt_uri``, the hosts and the libvirt
a run on hosts or a preview takes, and ``gpuvirt.tenancy.fleet_host_refusal``, why a host of the
run's pattern must not be touched."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import play_true

__metaclass__ = type


def deferred_hosts(hostvars, hosts):
    """The hosts whose boot stage was deferred by the reboot budget in this run."""
    return [host for host in hosts if bool((hostvars.get(host) or {}).get("gpuvirt_reboot_deferred"))]


def fleet_hosts(capture_root="", hosts_limit=""):
    """The run's host pattern: ``hosts_limit`` (``gpuvirt_hosts_limit``) where given, else the
    group ``gpuvirt_preview`` for a run on a capture (``gpuvirt_host_root``), else ``gpuvirt_hosts``."""
    if hosts_limit:
        return hosts_limit
    return "gpuvirt_preview" if capture_root else "gpuvirt_hosts"


def fleet_libvirt_uri(capture_root="", uri="", preview_uri="", playbook_dir=""):
    """The libvirt the tenants stage talks to: the host's (``uri``, default ``qemu:///system``),
    or for a run on a capture the preview's (``preview_uri``, default libvirt's test driver on
    the node without domains that ships beside the playbooks: test:///default holds one)."""
    if not capture_root:
        return uri or "qemu:///system"
    if preview_uri:
        return preview_uri
    if not playbook_dir:
        raise AnsibleFilterError("gpuvirt.tenancy.fleet_libvirt_uri: a preview needs playbook_dir (the preview's libvirt node "
                                 "files/preview-libvirt-node.xml lies beside the playbooks) or gpuvirt_preview_libvirt_uri")
    return "test://%s/files/preview-libvirt-node.xml" % playbook_dir.rstrip("/")


def fleet_host_refusal(host, groups, capture_root="", hosts_limit="", connection="", check_mode=None):
    """Why this run must not touch ``host`` (site.yml, preflight.yml), or "" when it may.

    A run on hosts (no ``capture_root``) takes only hosts of ``gpuvirt_hosts``: a wider
    ``gpuvirt_hosts_limit`` is refused. A run on a capture (``gpuvirt_host_root``) reads the capture
    on this controller, so it takes only hosts of ``gpuvirt_preview`` with a local connection, and,
    where ``check_mode`` is given (a preview of the stages, not the read-only preflight), only in
    check mode."""
    groups = groups or {}
    if not capture_root:
        if host in (groups.get("gpuvirt_hosts") or []):
            return ""
        return "%s is not in the group gpuvirt_hosts: fix gpuvirt_hosts_limit (%s)" % (host, hosts_limit or "")
    local = connection == "local" and host in (groups.get("gpuvirt_preview") or [])
    if check_mode is None:
        if local:
            return ""
        return ("The preflight of a capture (gpuvirt_host_root=%s) runs only on hosts of the group gpuvirt_preview with "
                "ansible_connection local; %s is not one. See docs/preview.md." % (capture_root, host))
    if local and play_true(check_mode):
        return ""
    return ("A preview (gpuvirt_host_root=%s) runs only with --check, on hosts of the group gpuvirt_preview with "
            "ansible_connection local; %s (connection %s, check mode %s) is not one. See docs/preview.md."
            % (capture_root, host, connection or "not set", play_true(check_mode)))


def guest_stage_refusal(groups, tenants_stage=False, run_tags=None, skip_tags=None):
    """Why the guest stages of this run (rdma, gpu_sharing) would do nothing, or "" when they may run.

    They run on the group ``gpuvirt_guests``. A playbook with the tenants stage (``tenants_stage``:
    site.yml) whose run selects it (``run_tags`` 'all' or 'tenants', and 'tenants' not in
    ``skip_tags``) adds the running tenants' guests there itself, so an empty group only means no
    tenant has a guest. A run of the guest stages alone (AWX's guests job: site.yml with tags rdma,
    gpu_sharing; rdma.yml, gpu_sharing.yml) takes the guests from the inventory: with none listed it
    would be a green job that did nothing."""
    run_tags = list(run_tags or ["all"])
    skip_tags = list(skip_tags or [])
    if play_true(tenants_stage) and "tenants" not in skip_tags and ("all" in run_tags or "tenants" in run_tags):
        return ""
    if (groups or {}).get("gpuvirt_guests"):
        return ""
    return ("The guest stages (rdma, gpu_sharing) match no guest: the inventory lists no host in the group gpuvirt_guests, "
            "and this run does not run the tenants stage, which adds the running tenants' guests. List them with the "
            "collection's inventory plugin (a file with 'plugin: gpuvirt.tenancy.tenants' as the last source of the "
            "inventory; AWX: the project's inventory directory, docs/fleet.md), or under gpuvirt_guests by hand, or run the "
            "tenants stage in the same run (tags preflight,tenants,rdma).")


class FilterModule:
    """Fleet filters."""

    def filters(self):
        return {"deferred_hosts": deferred_hosts, "fleet_hosts": fleet_hosts,
                "fleet_libvirt_uri": fleet_libvirt_uri, "fleet_host_refusal": fleet_host_refusal,
                "guest_stage_refusal": guest_stage_refusal}
