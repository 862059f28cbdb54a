"""The code as a Dataflow or Flink worker gets it: built into an sdist and installed, not the source tree.

``--setup_file ./setup.py`` makes Beam build an sdist of this project and
install it on every worker. This test does the same into a fresh virtualenv
and runs the pipeline from there. The heavy dependencies (TensorFlow, Beam)
come from this environment's site-packages through a path entry, so the test
does not download 3 GB; this project's own editable install is not visible
there, because ``.pth`` files in a plain path entry are not executed.
"""

import os
import subprocess
import sys
import sysconfig

import pytest

from conftest import NUM_CLASSES, ROOT, assert_same_outputs


def _run(args, **kwargs):
    # Without PYTHONPATH: a source tree on it (PYTHONPATH=. while working in a checkout) would be imported
    # instead of the installed package.
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    completed = subprocess.run(args, capture_output=True, text=True, timeout=600, env=environment, **kwargs)
    assert completed.returncode == 0, f"{args}\n{completed.stdout[-2000:]}\n{completed.stderr[-4000:]}"
    return completed


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory):
    folder = tmp_path_factory.mktemp("packaging")
    # What Beam's stager runs for --setup_file.
    _run([sys.executable, "setup.py", "--quiet", "sdist", "--dist-dir", str(folder / "dist")], cwd=ROOT)
    (sdist,) = (folder / "dist").glob("*.tar.gz")
    venv = folder / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    with open(os.path.join(site, "shared_stack.pth"), "w") as handle:
        handle.write(sysconfig.get_paths()["purelib"] + "\n")
    _run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(sdist)],
         cwd=str(folder))
    return python, site, folder


PACKAGES = ("beam_pipeline", "trainer", "native_stderr", "command_console")


def test_sdist_holds_every_module(installed_python):
    python, site, folder = installed_python
    source_modules = {os.path.relpath(os.path.join(d, f), ROOT)
                      for package in PACKAGES
                      for d, _, files in os.walk(os.path.join(ROOT, package)) for f in files if f.endswith(".py")}
    installed = {os.path.relpath(os.path.join(d, f), site)
                 for package in PACKAGES
                 for d, _, files in os.walk(os.path.join(site, package)) for f in files if f.endswith(".py")}
    assert installed == source_modules
    shipped = sorted(os.listdir(os.path.join(ROOT, "beam_pipeline", "core", "masks", "shipped")))
    read = _run([python, "-c", "from beam_pipeline.core.masks import maps; "
                               "print(' '.join(f'{n}:{len(maps.shipped_bytes(n))}' for n in sorted(maps.SHIPPED)))"],
                cwd=str(folder)).stdout.split()
    assert [entry.split(":")[0] + ".csv" for entry in read] == shipped          # the shipped maps are installed
    assert all(int(entry.split(":")[1]) > 0 for entry in read)


def test_installed_package_runs_the_pipeline(installed_python, segmentation_run, corpus_dir, tmp_path):
    python, site, folder = installed_python
    where = _run([python, "-c", "import beam_pipeline, trainer; print(beam_pipeline.__file__, trainer.__file__)"],
                 cwd=str(folder)).stdout.split()
    assert all(path.startswith(site) for path in where), where
    out = tmp_path / "out"
    _run([python, "-m", "beam_pipeline", "--input", str(corpus_dir / "segmentation" / "manifest.csv"),
          "--output", str(out), "--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "4000000"],
         cwd=str(folder))
    expected, _ = segmentation_run
    assert_same_outputs(expected, out)
    assert "--job_dir" in _run([python, "-m", "trainer", "--help"], cwd=str(folder)).stdout
