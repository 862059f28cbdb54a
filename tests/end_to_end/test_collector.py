"""The command line's cyclic garbage collector (launcher/memory.py): off while Beam, TensorFlow and tf.Transform
import and the pipeline is built, then what exists frozen (never scanned again) and the collector on for the run;
the published version is the same bytes."""

import os
import subprocess
import sys

from conftest import NUM_CLASSES, ROOT, assert_same_outputs

# Imported by every Python process started with this folder on PYTHONPATH: the launcher (``-m beam_pipeline``)
# notes each collection it makes, its generation, how many objects were frozen then and whether Beam was imported
# yet, in COLLECTIONS/<pid>.
WATCH_COLLECTIONS = """
import gc, os, sys
_command = open("/proc/self/cmdline", "rb").read().split(b"\\0")
if b"beam_pipeline" in _command and "COLLECTIONS" in os.environ:
    _path = os.path.join(os.environ["COLLECTIONS"], str(os.getpid()))

    def _note(phase, info):
        if phase == "stop":
            with open(_path, "a") as notes:
                notes.write(f"{info['generation']} {gc.get_freeze_count()} {int('apache_beam' in sys.modules)}\\n")

    gc.callbacks.append(_note)
"""


def test_no_collection_scans_the_imports_or_the_build_and_the_run_still_collects(segmentation_run, corpus_dir,
                                                                                 tmp_path):
    """Before the pipeline is built no collection runs at all (README's first run made 8 full ones, 1.1 s, while
    it imported and built); once it runs, the collector is on, with the imports and the pipeline frozen; and the
    version is byte for byte the one the same command publishes without the watch."""
    expected_dir, _ = segmentation_run
    watch, notes = tmp_path / "watch", tmp_path / "collections"
    watch.mkdir()
    notes.mkdir()
    (watch / "sitecustomize.py").write_text(WATCH_COLLECTIONS)
    python_path = os.pathsep.join(filter(None, [str(watch), os.environ.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, "-m", "beam_pipeline", "--input", str(corpus_dir / "segmentation" / "manifest.csv"),
         "--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "4000000", "--output", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, PYTHONPATH=python_path, COLLECTIONS=str(notes)))
    assert completed.returncode == 0, completed.stderr[-3000:]
    launchers = list(notes.iterdir())
    assert len(launchers) == 1, launchers
    collections = [tuple(int(field) for field in line.split()) for line in launchers[0].read_text().splitlines()]
    started = [frozen for _, frozen, beam in collections if beam]          # from the first import of Beam on
    assert started, "the run made no collection: the collector stayed off"
    assert started[0] > 100_000, f"a collection came before the freeze: {collections[:20]}"
    assert_same_outputs(expected_dir, tmp_path / "out")
