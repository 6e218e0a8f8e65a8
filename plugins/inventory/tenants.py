# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: tenants
version_added: 0.2.0
short_description: The running tenants' guests of each GPU host, reached through their host
description:
  - Lists, in the group C(gpuvirt_guests), the guest of each tenant of each GPU host (the group O(hosts_group)) whose
    libvirt domain is running on that host, that the inventory gives an C(image) and a C(guest.address) (C(gpuvirt_tenants)),
    and that the inventory does not list already. Each guest is the host the role C(tenant_guests) adds after the tenants
    stage (action M(gpuvirt.tenancy.guest_inventory)), so that a later run or job (AWX's guests job) finds the guests without
    running the tenants stage; C(ansible_host) is the tenant's management address, C(ansible_user) and C(ansible_port)
    those of C(gpuvirt_guest_access), C(ansible_ssh_common_args) a C(ProxyJump) through the GPU host (unless
    C(gpuvirt_guest_access.jump) is false), C(gpuvirt_tenant_host) the GPU host's name and C(gpuvirt_guest_vf_mac) the
    MAC of the domain's first VF.
  - Each GPU host's libvirt is read on the controller, read only, at the host's C(gpuvirt_inventory_libvirt_uri), else at
    C(qemu+ssh://[ansible_user@]ansible_host[:ansible_port]/system) (libvirt's SSH transport, as the plays reach the host;
    the controller's user needs an SSH key the host lets in, and the host's user read access to libvirt).
  - The GPU hosts and their variables come from the inventory sources parsed before this one (list this file after them,
    as the last file of an inventory directory), their C(group_vars) and C(host_vars) included (the vars plugins are run);
    variables are taken as written, not templated.
  - Each host's C(gpuvirt_tenants) is read as the tenants stage reads it (the tenant records); a tenant listed with
    C(state) V(defined) or V(absent) is left out although its domain runs, and a tenant entry the record refuses fails
    this source, naming the host, the tenant, the option and the fix, and no guest is added.
  - A GPU host whose libvirt cannot be read fails this source, naming the host, the URI and the fix, and no guest is
    added (Ansible warns and goes on without the source; with C(ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED) it stops).
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
requirements:
  - libvirt-python on the controller (the collection's execution environment holds it)
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description: The name of this plugin; marks the file as its configuration.
    type: str
    required: true
    choices: [gpuvirt.tenancy.tenants]
  hosts_group:
    description: The group of the GPU hosts whose tenants are listed.
    type: str
    default: gpuvirt_hosts
"""

EXAMPLES = r"""
# inventory/zz-tenants.gpuvirt_tenants.yml, the last file of an inventory directory whose hosts.yml
# lists the GPU hosts in gpuvirt_hosts and whose group_vars give their gpuvirt_tenants:
#   ansible-inventory -i inventory/ --graph gpuvirt_guests
plugin: gpuvirt.tenancy.tenants
# Optional: the guests of the hosts of another group only (the default is gpuvirt_hosts), and a
# group of guests per GPU host (tenants_of_dgx01, ...)
hosts_group: rack1
keyed_groups:
  - key: gpuvirt_tenant_host
    prefix: tenants_of
"""

from ansible.inventory.helpers import get_group_vars
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable
from ansible.utils.vars import combine_vars
from ansible.vars.plugins import get_vars_from_inventory_sources

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import tenant_inventory

# What the entries of guest_hosts hold besides the host's name and groups: host variables.
ENTRY_KEYS = ("name", "groups")


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "gpuvirt.tenancy.tenants"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith((".yml", ".yaml"))

    def _host_vars(self, host, sources):
        """A GPU host's variables as the plays see them: its groups' and its own, from the inventory and the vars plugins."""
        groups = host.get_groups()
        found = combine_vars(get_group_vars(groups), get_vars_from_inventory_sources(self.loader, sources, groups, "all"))
        found = combine_vars(found, host.get_vars())
        return combine_vars(found, get_vars_from_inventory_sources(self.loader, sources, [host], "all"))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache=cache)
        self._read_config_data(path)
        group = self.get_option("hosts_group")
        sources = getattr(inventory, "processed_sources", [])
        gpu_hosts = inventory.groups[group].get_hosts() if group in inventory.groups else []
        # Everything is read and checked first: a host that fails adds no guest of any host.
        entries = []
        for host in sorted(gpu_hosts, key=lambda h: h.name):
            hostvars = self._host_vars(host, sources)
            running = tenant_inventory.running_domains(host.name, tenant_inventory.libvirt_uri(host.name, hostvars))
            entries += tenant_inventory.guest_entries(host.name, hostvars, running, list(inventory.hosts))
        strict = self.get_option("strict")
        for entry in entries:
            for name in entry["groups"]:
                inventory.add_group(name)
            inventory.add_host(entry["name"], group=entry["groups"][0])
            for key, value in entry.items():
                if key not in ENTRY_KEYS:
                    inventory.set_variable(entry["name"], key, value)
            variables = inventory.get_host(entry["name"]).get_vars()
            self._set_composite_vars(self.get_option("compose"), variables, entry["name"], strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), variables, entry["name"], strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, entry["name"], strict=strict)
