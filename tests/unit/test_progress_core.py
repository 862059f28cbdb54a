"""The progress figures, lines and remote-runner hints (beam_pipeline/core/progress.py) on hand-made counters."""

import pytest

from beam_pipeline.core.progress import (ANALYSING, FINISHING, LISTING, STARTING, VALIDATING, WRITING, PhaseClock,
                                         Progress, RunnerPlace, duration, progress_line, progress_of, watch_hint,
                                         watch_url)
from beam_pipeline.core.tasks import units


def counts(**named):
    """{"Namespace:name": n} from keyword names such as ReadCorpus__discovered=3."""
    return {name.replace("__", ":"): value for name, value in named.items()}


# 100 inputs: 4 rejected while listing, 6 filtered, 90 selected; 80 valid, 10 rejected; 5 duplicates.
LISTED = dict(ReadCorpus__discovered=100, ReadCorpus__rejected_orphan_mask=4, SelectSubset__filtered_include_glob=6,
              SelectSubset__selected=90)
VALIDATED = dict(LISTED, ValidatePairs__valid=80, ValidatePairs__rejected_truncated=7,
                 ValidatePairs__rejected_size_mismatch=3)


@pytest.mark.parametrize("named, phase, figures", [
    ({}, STARTING, (0, None)),
    (dict(ReadCorpus__discovered=40), LISTING, (40, None)),
    (LISTED, LISTING, (100, None)),
    # 10 settled while listing (4 rejected, 6 filtered) + 30 of the 90 selected checked
    (dict(LISTED, ValidatePairs__valid=28, ValidatePairs__rejected_truncated=2), VALIDATING, (40, 100)),
    (VALIDATED, ANALYSING, (100, 100)),
    (dict(VALIDATED, DeduplicatePairs__duplicates=5, WriteShards__pairs_written=30,
          WriteShards__records_written=41), WRITING, (30, 75)),
    (dict(VALIDATED, DeduplicatePairs__duplicates=5, WriteShards__pairs_written=74,
          WriteShards__rejected_changed_since_validation=1), FINISHING, (75, 75)),
])
def test_phase_and_figures(named, phase, figures):
    progress = progress_of(counts(**named))
    assert progress.phase == phase
    shown = VALIDATING if phase == ANALYSING else (WRITING if phase == FINISHING else phase)
    assert progress.figures(shown) == figures


def test_rejects_are_summed_over_every_stage():
    progress = progress_of(counts(**VALIDATED, WriteShards__rejected_changed_since_validation=2,
                                  SelectSubset__rejected_filter_error=1))
    assert progress.rejected == 4 + 7 + 3 + 2 + 1


def test_nothing_selected_stays_listing():
    assert progress_of(counts(ReadCorpus__discovered=5, SelectSubset__filtered_sample_fraction=5)).phase == LISTING


def test_clock_measures_the_current_phase_only():
    clock = PhaseClock()
    first = Progress(VALIDATING, discovered=100, validated=10, to_write=0, written=0, rejected=0)
    assert clock.observe(0.0, first) == (None, None)
    rate, eta = clock.observe(2.0, Progress(VALIDATING, 100, 30, 0, 0, 0))
    assert rate == pytest.approx(10.0) and eta == pytest.approx(7.0)
    # a new phase starts a new measurement
    assert clock.observe(3.0, Progress(WRITING, 100, 100, 50, 5, 0)) == (None, None)
    rate, eta = clock.observe(5.0, Progress(WRITING, 100, 100, 50, 15, 0))
    assert rate == pytest.approx(5.0) and eta == pytest.approx(7.0)


@pytest.mark.parametrize("seconds, text", [(None, "?"), (0.4, "0:00"), (59.6, "1:00"), (61, "1:01"),
                                           (3600 + 62, "1:01:02")])
def test_duration(seconds, text):
    assert duration(seconds) == text


def test_lines():
    progress = Progress(VALIDATING, discovered=5000, validated=1234, to_write=0, written=0, rejected=12)
    assert progress_line(VALIDATING, progress, 52.3, 72) == \
        "validating  1,234/5,000 pairs   24.7%  52.3 pairs/s  ETA 1:12  rejected 12"
    assert progress_line(VALIDATING, progress, share=False) == "validating  1,234/5,000 pairs  rejected 12"
    done = Progress(FINISHING, 5000, 5000, 4900, 4900, 12)
    assert progress_line(WRITING, done, 40.0, 0.0) == "writing     4,900/4,900 pairs  100.0%  40.0 pairs/s  rejected 12"
    # classification counts images (core/tasks.py)
    assert progress_line(WRITING, done, 40.0, 0.0, unit=units("classification")) == \
        "writing     4,900/4,900 images  100.0%  40.0 images/s  rejected 12"
    assert units("segmentation") == "pairs"


def test_dataflow_hint_names_the_console_page_and_the_counters():
    lines = watch_hint(RunnerPlace("DataflowRunner", job_id="2026-01-31_01_02_03-123", project="proj",
                                   region="europe-west4"))
    assert ("https://console.cloud.google.com/dataflow/jobs/europe-west4/2026-01-31_01_02_03-123?project=proj"
            in lines[0])
    named = "\n".join(lines[1:])
    for counter in ("ReadCorpus:discovered", "SelectSubset:selected", "ValidatePairs:valid",
                    "ValidatePairs:rejected_<reason>", "DeduplicatePairs:duplicates", "WriteShards:pairs_written",
                    "WriteShards:records_written"):
        assert counter in named


@pytest.mark.parametrize("place, expected", [
    (RunnerPlace("FlinkRunner", flink_master="flink-jm.example.com:8081"), "http://flink-jm.example.com:8081"),
    (RunnerPlace("FlinkRunner", flink_master="https://flink.example.com"), "https://flink.example.com"),
    (RunnerPlace("FlinkRunner", flink_master="[local]"), "no web UI"),
    (RunnerPlace("SparkRunner", spark_master_url="spark://spark-master:7077"), "http://spark-master:8080"),
    (RunnerPlace("PortableRunner", job_endpoint="localhost:8099"), "localhost:8099"),
])
def test_runner_ui_addresses(place, expected):
    assert expected in watch_url(place)
