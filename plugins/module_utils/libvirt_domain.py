# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The libvirt module features: ``numa_pin`` (numa_pin_domain), ``tenant_domain`` (tenant_domain_one:
one domain; tenant_domain_call: the call, its list and its argument spec) and ``tenant_domain_info``
(domain_info), with what they share in libvirt_common. Each opens one connection
(``libvirt_connection``, from the module's ``uri``), decides from the domain's persistent
definition (``domain_xml``, pure) and its running state, and only then acts.

This module keeps every name importable from here, as the modules and other features import them."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_common import (  # noqa: F401 pylint: disable=unused-import
    LIBVIRT_OPTIONS, PIN_OPTIONS, _definition_diff, _live_xml, _persistent_xml, _running_diff, _stored_xml,
    apply_live_pins, decide_then_act, domain_holdings, host_model, hostdev_macs, live_pin_changes, mmio_window,
    pin_diff_lines, pin_restart_reasons)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.numa_pin_domain import (  # noqa: F401 pylint: disable=unused-import
    NumaPin, numa_pin)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_domain_one import (  # noqa: F401 pylint: disable=unused-import
    DomainRequest, TENANT_DOMAIN_FLAGS, TENANT_DOMAIN_OPTIONS, TENANT_DOMAIN_REQUIRED_IF, TenantDomain, _on_off)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenant_domain_call import (  # noqa: F401 pylint: disable=unused-import
    PreparedDomains, TENANT_DOMAIN_ARGS, TENANT_STAGE_OPTIONS, TENANT_STAGE_SETTINGS, act_on_domains,
    apply_vf_settings, batch_result, check_assignments, check_vf_security, domain_options, host_limits,
    make_guest_files, prepare_domains, remove_guest_files, tenant_domain, vf_settings_addresses, vf_settings_options)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.domain_info import (  # noqa: F401 pylint: disable=unused-import
    TENANT_DOMAIN_INFO_ARGS, domain_assignments, foreign_domains, tenant_domain_info)

__metaclass__ = type
