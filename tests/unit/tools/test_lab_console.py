# -*- coding: utf-8 -*-
"""lab/report.py and lab/lab.py: reboots are counted from the serial console, and a boot the lab
kernel reset by itself after an RCU stall (its image's panic_on_rcu_stall, docs/lab.md) is
counted apart, never as a reboot of the collection's (and so is one after a hung-task panic).

The console lines are the lab's own: the kernel banner and the stall report as captured from the
lab's serial console (a stalled boot under TCG); the panic line is the one Linux prints for
panic_on_rcu_stall (kernel/rcu/tree_stall.h panics with "RCU Stall", printed by panic() as
"Kernel panic - not syncing: ...")."""

from __future__ import annotations

import pytest

BANNER = ("[    0.000000] Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian "
          "12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC "
          "Debian 6.1.192-3 (2026-11-26)\n")
STALL = ("[  390.526010] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n"
         "[  390.528647] rcu: rcu_preempt kthread timer wakeup didn't happen for 5251 jiffies! g-539 f0x0 "
         "RCU_GP_WAIT_FQS(5) ->state=0x402\n")
PANIC = "[  411.530001] Kernel panic - not syncing: RCU Stall\n"
# a boot whose RCU stopped without a stall report: init blocked in synchronize_rcu (captured
# from the lab's console), then hung_task_panic (kernel/hung_task.c panics "hung_task: blocked tasks")
HUNG = ("[  243.542499] INFO: task swapper/0:1 blocked for more than 120 seconds.\n"
        "[  243.550415]  synchronize_rcu+0x71/0xb0\n"
        "[  243.551262]  do_sysctl_args+0x7a/0xb0\n")
HUNG_PANIC = "[  243.561002] Kernel panic - not syncing: hung_task: blocked tasks\n"
BOOT_LINES = "[    1.204000] Run /init as init process\n"


def write_console(tmp_path, *boots):
    (tmp_path / "run" / "console.log").write_text("".join(boots), encoding="utf-8")


@pytest.mark.parametrize("boots, reboots, resets", [
    pytest.param([BANNER + BOOT_LINES], 1, 0, id="first-boot"),
    pytest.param([BANNER, BANNER], 2, 0, id="one-reboot"),
    pytest.param([BANNER + STALL + PANIC, BANNER], 1, 1, id="first-boot-stalled-then-reset"),
    pytest.param([BANNER, BANNER + STALL + PANIC, BANNER], 2, 1, id="reboot-stalled-then-reset"),
    pytest.param([BANNER + STALL, BANNER], 2, 0, id="stall-report-without-panic-is-no-reset"),
    pytest.param([BANNER, BANNER + HUNG + HUNG_PANIC, BANNER], 2, 1, id="reboot-hung-then-reset"),
    pytest.param([BANNER + STALL + PANIC, BANNER + HUNG + HUNG_PANIC, BANNER], 1, 2, id="two-resets"),
    pytest.param([BANNER + HUNG, BANNER], 2, 0, id="hung-report-without-panic-is-no-reset"),
])
def test_reboots_leave_out_stall_resets(report, tmp_path, boots, reboots, resets):
    write_console(tmp_path, *boots)
    assert report.kernel_starts() == reboots
    assert report.stall_resets() == resets
    assert report.lab.console_boots() == {"kernel_starts": len(boots), "stall_resets": resets}


def test_no_console_log_counts_nothing(report):
    assert report.kernel_starts() == 0
    assert report.stall_resets() == 0
