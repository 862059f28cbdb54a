"""The trainer's install files (requirements-trainer.txt, requirements-tpu.txt) against requirements.txt.

The trainer's pins must be the versions the main environment, where the suite runs, has: one pin that drifts
apart would leave the trainer's own install untested. Whether the files resolve, and to no `tensorflow` next
to `tensorflow-tpu`, is pip's to say (docs/training.md gives the dry-run check); here the text is checked.
"""

import re
from pathlib import Path

from conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s#]+)\s*(#.*)?$")


def pins(name: str) -> dict:
    found = {}
    for line in Path(ROOT, name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("-r "):
            continue
        match = PIN.match(line)
        assert match, f"{name}: not an exact pin: {line!r}"
        found[re.sub(r"[-_.]+", "-", match.group(1).split("[")[0]).lower()] = match.group(2)
    return found


def test_the_trainers_pins_are_the_main_environments():
    trainer, main = pins("requirements-trainer.txt"), pins("requirements.txt")
    assert {"keras", "numpy", "h5py", "protobuf"} <= set(trainer)
    assert {name: (version, main.get(name)) for name, version in trainer.items() if main.get(name) != version} == {}


def test_the_trainer_files_name_no_tensorflow_build_and_no_pipeline_package():
    trainer = pins("requirements-trainer.txt")
    assert not {"tensorflow", "tensorflow-cpu", "tensorflow-tpu", "apache-beam", "tensorflow-transform",
                "tfx-bsl"} & set(trainer)


def test_the_tpu_file_adds_the_tpu_build_and_an_exact_libtpu():
    lines = Path(ROOT, "requirements-tpu.txt").read_text().splitlines()
    assert "-r requirements-trainer.txt" in lines
    assert pins("requirements-tpu.txt") == {"tensorflow-tpu": "2.20.0", "libtpu": "0.0.14"}
