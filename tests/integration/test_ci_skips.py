"""A suite that cannot pass by skipping: under CI=true, an integration test that skips fails.

The hook in tests/conftest.py runs on a copy of itself next to three tiny tests, in a pytest of its own.
"""

import os
import shutil
import subprocess
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # tests/, where conftest.py is
SKIPPING_TESTS = '''
import pytest

@pytest.mark.integration
def test_integration_that_skips():
    pytest.skip("no JDK here")

@pytest.mark.flink
def test_flink_that_skips():
    pytest.skip("no mvn here")

def test_unit_that_skips():
    pytest.skip("not on this platform")
'''


def run_suite(folder, ci):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.path.dirname(TESTS)           # the copy's imports (tools.objstore) from this checkout
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(folder)],
                          cwd=folder, capture_output=True, text=True, env=env, timeout=300)


def test_integration_skips_fail_under_ci_and_only_there(tmp_path):
    for name in ("conftest.py", "objstore_fixtures.py", "shared_outputs.py"):    # and what conftest imports
        shutil.copy(os.path.join(TESTS, name), tmp_path / name)
    shutil.copy(os.path.join(TESTS, "..", "pytest.ini"), tmp_path / "pytest.ini")
    (tmp_path / "test_skips.py").write_text(SKIPPING_TESTS)
    local = run_suite(tmp_path, ci=False)
    assert local.returncode == 0, local.stdout
    assert "3 skipped" in local.stdout
    ci = run_suite(tmp_path, ci=True)
    assert ci.returncode == 1
    assert "2 failed, 1 skipped" in ci.stdout, ci.stdout
    assert "test_integration_that_skips skipped under CI=true, where integration tests must run" in ci.stdout
    assert "no mvn here" in ci.stdout
