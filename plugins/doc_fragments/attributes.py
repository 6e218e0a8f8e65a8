# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""

    PLATFORM = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # A module or action that changes the host (host_reboot too), or an action whose result is such a module's
    # (stage_call's run of a stage's module, gate_check's relayed check of it): full check mode and diff, on POSIX
    # hosts. A module adds its own ``details`` under ``attributes`` where its check mode or diff says more, and one
    # that shows no diff says ``diff_mode`` ``support: none`` (a module's values win over the fragment's, which
    # fill in the rest).
    CHANGES_HOST = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    support: full
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # An action that runs on the controller only, asks the host nothing and changes nothing (with
    # INFO_MODULE and PLATFORM): its module file holds only its documentation, the note said once here
    CONTROLLER = r"""
options: {}
notes:
  - Runs on the controller; it asks nothing of the host and changes nothing. An action plugin; its module file holds
    only its documentation.
"""
