"""The DirectRunner's engine a run gets when its command line names none, and its files shuffle's buckets
(launcher/runners.py, launcher/launch.py).

A small corpus runs in the launcher's own process, a larger one, or one whose size is unknown, in an SDK
worker process per core; the command line's own engine options win. The input is counted on real files
(listings of each kind, folders) no further than the threshold, through the launcher's own resolution of
the command line, without running a pipeline. The same count, made once, gives the files shuffle a bucket per
2,000 pairs (at least 4) up to 50,000 pairs, and 256 above that or when the input is not counted.
"""

import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import DirectOptions

from beam_pipeline.core.runners import MAX_SHUFFLE_BUCKETS, SHUFFLE_COUNT_LIMIT, SMALL_CORPUS_PAIRS
from beam_pipeline.io import folders, listing
from beam_pipeline.launcher import launch, runners

CORES = __import__("os").cpu_count() or 1


def csv_listing(folder, rows: int, blank_lines: int = 0):
    path = folder / f"listing_{rows}.csv"
    lines = ["image,mask"] + [f"images/{i}.png,masks/{i}.png" for i in range(rows)] + [""] * blank_lines
    path.write_text("\n".join(lines) + "\n")
    return path


def engine_for(tmp_path, *args):
    argv = [*map(str, args), "--output", str(tmp_path / "out")]
    launched = launch.resolve(argv)
    runners.apply_runner_defaults(argv, launched.options, launched.config)
    direct = launched.options.view_as(DirectOptions)
    return direct.direct_running_mode, direct.direct_num_workers


def test_a_small_listing_runs_in_the_launcher_and_says_so(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="beam_pipeline"):
        engine = engine_for(tmp_path, "--input", csv_listing(tmp_path, 20), "--num_classes", 8)
    assert engine == ("in_memory", 1)
    assert any("DirectRunner: about 20 pairs (at most 1,000), so the job runs in this process" in record.getMessage()
               for record in caplog.records), caplog.text


def test_a_listing_over_the_threshold_gets_a_worker_process_per_core(tmp_path):
    listing_file = csv_listing(tmp_path, SMALL_CORPUS_PAIRS + 500)
    assert listing.count_rows(str(listing_file), SMALL_CORPUS_PAIRS) == SMALL_CORPUS_PAIRS + 1
    assert engine_for(tmp_path, "--input", listing_file, "--num_classes", 8) == ("multi_processing", CORES)


def test_the_command_lines_engine_options_win(tmp_path):
    small = csv_listing(tmp_path, 20)
    assert engine_for(tmp_path, "--input", small, "--num_classes", 8,
                      "--direct_running_mode", "multi_threading") == ("multi_threading", CORES)
    assert engine_for(tmp_path, "--input", small, "--num_classes", 8,
                      "--direct_running_mode=multi_processing", "--direct_num_workers", 3) == ("multi_processing", 3)
    assert engine_for(tmp_path, "--input", small, "--num_classes", 8, "--direct_num_workers=2") == (
        "multi_processing", 2)
    assert engine_for(tmp_path, "--input", csv_listing(tmp_path, SMALL_CORPUS_PAIRS + 1), "--num_classes", 8,
                      "--direct_running_mode", "in_memory") == ("in_memory", 1)


def test_blank_lines_are_not_rows_and_every_listing_kind_is_counted(tmp_path):
    assert listing.count_rows(str(csv_listing(tmp_path, 7, blank_lines=3)), 100) == 7
    jsonl = tmp_path / "listing.jsonl"
    jsonl.write_text("".join(json.dumps({"image": f"{i}.png", "mask": f"{i}.png"}) + "\n\n" for i in range(9)))
    assert listing.count_rows(str(jsonl), 100) == 9
    assert listing.count_rows(str(jsonl), 4) == 5
    parquet = tmp_path / "listing.parquet"
    pq.write_table(pa.table({"image": [f"{i}.png" for i in range(30)], "mask": [f"{i}.png" for i in range(30)]}),
                   parquet)
    assert listing.count_rows(str(parquet), 100) == 30
    assert listing.count_rows(str(parquet), 10) == 11


def test_folders_count_their_files_per_pair(tmp_path):
    for name in ("images", "masks"):
        (tmp_path / "paired" / name / "deeper").mkdir(parents=True)
        for i in range(6):
            (tmp_path / "paired" / name / ("deeper" if i % 2 else "") / f"{i}.png").write_bytes(b"x")
    for label in ("cat", "dog"):
        (tmp_path / "classes" / label).mkdir(parents=True)
        for i in range(4):
            (tmp_path / "classes" / label / f"{i}.jpg").write_bytes(b"x")
    assert folders.count_files(str(tmp_path / "paired"), 100) == 12
    assert folders.count_files(str(tmp_path / "paired"), 5) == 6       # stops listing at limit + 1
    paired = launch.resolve(["--input", str(tmp_path / "paired"), "--output", str(tmp_path / "o1"),
                             "--mask_template", "masks/{relstem}.png", "--num_classes", "8"]).config
    assert runners.expected_pairs(paired, 100) == 6
    classes = launch.resolve(["--input", str(tmp_path / "classes"), "--output", str(tmp_path / "o2"),
                              "--task", "classification"]).config
    assert runners.expected_pairs(classes, 100) == 8
    assert engine_for(tmp_path, "--input", tmp_path / "classes", "--task", "classification") == ("in_memory", 1)


@pytest.mark.parametrize("limit", [0, 1])
def test_an_empty_folder_is_a_small_corpus(tmp_path, limit):
    (tmp_path / "empty").mkdir()
    assert folders.count_files(str(tmp_path / "empty"), limit) == 0


def test_a_coco_annotation_file_is_not_counted_and_gets_worker_processes(tmp_path):
    """A COCO file names its images inside one JSON document: the launcher does not read it twice to count
    them (a listing's row count would see one line), so its size is unknown."""
    from coco_corpora import write_instances
    write_instances(tmp_path / "coco", 3)
    annotations = tmp_path / "coco" / "annotations" / "instances_train2017.json"
    assert engine_for(tmp_path, "--input", annotations) == ("multi_processing", CORES)
    assert engine_for(tmp_path, "--input", tmp_path / "coco", "--layout", "coco") == ("multi_processing", CORES)


def shuffle_for(tmp_path, *args):
    """(the run's ShuffleSpec, the InputCount) as pipeline.run makes them, without running a pipeline."""
    argv = [*map(str, args), "--output", str(tmp_path / "out")]
    launched = launch.resolve(argv)
    counted = launch.input_count(launched.options, launched.config)
    runners.apply_runner_defaults(argv, launched.options, launched.config, counted)
    spec, _ = launch.shuffle_spec(launched.options, launched.config, str(tmp_path / "out" / "v"), counted)
    return spec, counted


def test_the_files_shuffle_gets_a_bucket_per_2000_counted_pairs(tmp_path):
    small, _ = shuffle_for(tmp_path, "--input", csv_listing(tmp_path, 20), "--num_classes", 8)
    assert (small.folder is not None, small.buckets) == (True, 4)
    larger, _ = shuffle_for(tmp_path, "--input", csv_listing(tmp_path, 12_345), "--num_classes", 8)
    assert larger.buckets == 7
    past, _ = shuffle_for(tmp_path, "--input", csv_listing(tmp_path, SHUFFLE_COUNT_LIMIT + 1), "--num_classes", 8)
    assert past.buckets == MAX_SHUFFLE_BUCKETS


def test_a_folder_and_a_coco_file_get_their_buckets_from_the_same_count(tmp_path):
    for i in range(6):
        for name in ("images", "masks"):
            (tmp_path / "paired" / name).mkdir(parents=True, exist_ok=True)
            (tmp_path / "paired" / name / f"{i}.png").write_bytes(b"x")
    folder, _ = shuffle_for(tmp_path, "--input", tmp_path / "paired", "--mask_template", "masks/{relstem}.png",
                            "--num_classes", 8)
    assert folder.buckets == 4
    from coco_corpora import write_instances
    write_instances(tmp_path / "coco", 3)
    coco, _ = shuffle_for(tmp_path, "--input", tmp_path / "coco" / "annotations" / "instances_train2017.json")
    assert coco.buckets == MAX_SHUFFLE_BUCKETS              # not counted: as many buckets as a large corpus


def test_the_input_is_counted_once_for_every_question(tmp_path):
    """The engine, the buckets and the components' rounds ask the same count: rows added after it was made are
    not seen by a later question within its limit (they would be, were the listing read again)."""
    path = csv_listing(tmp_path, 3_000)
    spec, counted = shuffle_for(tmp_path, "--input", path, "--num_classes", 8)
    assert (counted.at_most(SMALL_CORPUS_PAIRS), spec.buckets) == (3_000, 4)
    path.write_text(path.read_text() + "".join(f"images/x{i}.png,masks/x{i}.png\n" for i in range(7_000)))
    config = launch.resolve(["--input", str(path), "--output", str(tmp_path / "out"), "--num_classes", "8"]).config
    assert runners.component_rounds(config, counted) == 0 and counted.at_most(SHUFFLE_COUNT_LIMIT) == 3_000
    assert runners.InputCount(config).at_most(SHUFFLE_COUNT_LIMIT) == 10_000     # a new count reads it again


def test_a_count_past_its_limit_is_made_again_for_a_larger_question(tmp_path):
    counted = runners.InputCount(launch.resolve([
        "--input", str(csv_listing(tmp_path, 2_500)), "--output", str(tmp_path / "out"), "--num_classes", "8"]).config)
    assert counted.at_most(1_000) == 1_001                  # "more than 1,000": counted no further
    assert counted.at_most(2_000) == 2_001
    assert counted.at_most(SHUFFLE_COUNT_LIMIT) == 2_500


def test_the_beam_shuffle_has_no_buckets_to_count_for(tmp_path):
    spec, counted = shuffle_for(tmp_path, "--input", csv_listing(tmp_path, 3_000), "--num_classes", 8,
                                "--shuffle", "beam")
    assert spec.folder is None
    assert counted.at_most(SMALL_CORPUS_PAIRS) == SMALL_CORPUS_PAIRS + 1      # counted only as far as the engine asked
