"""limit_malloc_growth: glibc settings for this process and, through the environment, for SDK workers."""

import subprocess
import sys

from conftest import ROOT


def _child(code: str, env: dict) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_children_inherit_the_settings_and_a_users_own_value_wins():
    code = ("import os, subprocess, sys; from beam_pipeline.launcher.memory import limit_malloc_growth; "
            "limit_malloc_growth(); print(subprocess.run([sys.executable, '-c', "
            "'import os; print(os.environ[\"MALLOC_ARENA_MAX\"])'], "
            "capture_output=True, text=True).stdout.strip())")
    assert _child(code, {"PATH": "/usr/bin:/bin"}) == "2"
    assert _child(code, {"PATH": "/usr/bin:/bin", "MALLOC_ARENA_MAX": "4"}) == "4"


def test_the_collector_is_frozen_and_on_for_the_run_and_as_it_was_after_it():
    """frozen_for_the_run: the objects made so far frozen and the collector on inside (after defer_collections
    turned it off), nothing frozen after, so that a process running several jobs collects a finished one's
    objects; the command line turns the collector on again however it ends."""
    code = ("import gc; from beam_pipeline.launcher import memory; memory.defer_collections(); "
            "off = gc.isenabled()\n"
            "with memory.frozen_for_the_run(): inside = (gc.isenabled(), gc.get_freeze_count() > 1000)\n"
            "print(off, inside, gc.isenabled(), gc.get_freeze_count())\n"
            "from beam_pipeline.__main__ import main; gc.disable(); main(['--input', '/nonexistent.csv', "
            "'--output', '/tmp/unused', '--num_classes', '2']); print(gc.isenabled())")
    assert _child(code, {"PATH": "/usr/bin:/bin"}).splitlines()[-2:] == ["False (True, True) True 0", "True"]
