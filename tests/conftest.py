"""Shared fixtures: one seeded sample corpus and one pipeline run per test session."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NUM_CLASSES = 8


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    from beam_pipeline.sample_corpus import write_corpus
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(str(out), seed=0)
    return out


def run_cli(*args, check=True):
    """Run ``python -m beam_pipeline`` as a user would; returns the CompletedProcess."""
    completed = subprocess.run([sys.executable, "-m", "beam_pipeline", *map(str, args)],
                               cwd=ROOT, capture_output=True, text=True, timeout=900)
    if check and completed.returncode != 0:
        raise AssertionError(f"exit {completed.returncode}\n{completed.stdout[-3000:]}\n{completed.stderr[-5000:]}")
    return completed


@pytest.fixture(scope="session")
def segmentation_run(corpus_dir, tmp_path_factory):
    """The sample corpus's manifest through the command line, with small shards."""
    out = tmp_path_factory.mktemp("seg_out")
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
                        "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000)
    return out, completed
