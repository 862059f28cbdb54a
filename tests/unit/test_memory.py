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
