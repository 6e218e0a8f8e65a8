# -*- coding: utf-8 -*-
"""A :class:`Host` over a test tree that says it is the running machine (``live``), so the
steps a module takes only there (``systemctl enable``, daemon reloads) run, against
recorded commands, instead of being planned as file changes under the root."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host


class LiveHost(Host):
    @property
    def live(self):
        return True
