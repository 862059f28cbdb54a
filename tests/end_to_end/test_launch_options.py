"""Launch-time refusals before anything runs: unknown options, and remote workers that could not reach what
the run stages for them (beam_pipeline.launcher.launch). Messages are written out by hand."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline.launcher.options import CorpusOptionsError, check_known_options
from conftest import NUM_CLASSES, run_cli

BASE = ["--input", "gs://bucket/corpus/manifest.csv", "--output", "gs://bucket/shards", "--num_classes", "8"]


def _check(*args):
    argv = [*BASE, *args]
    check_known_options(argv, PipelineOptions(argv))


@pytest.mark.parametrize("args,message", [
    (["--max_num_worker", "64"],
     "unknown option(s) --max_num_worker (did you mean --max_num_workers?): DirectRunner would run without them "
     "(Beam ignores options it does not know, with only a warning); see --help"),
    (["--runner", "DataflowRunner", "--max_num_worker=64"],
     "unknown option(s) --max_num_worker (did you mean --max_num_workers?): DataflowRunner would run without them "
     "(Beam ignores options it does not know, with only a warning); see --help"),
    (["--num_class", "8"],           # Beam's parser takes no abbreviations, so neither does this check
     "unknown option(s) --num_class (did you mean --num_classes?): DirectRunner would run without them "
     "(Beam ignores options it does not know, with only a warning); see --help"),
    (["stray", "--zzzz"],
     "unknown option(s) --zzzz; unexpected argument(s) 'stray': DirectRunner would run without them "
     "(Beam ignores options it does not know, with only a warning); see --help"),
    (["--num_classes", "eight"], "argument --num_classes: invalid int value: 'eight'"),
    (["--runner", "FlinkRuner"],
     "--runner FlinkRuner: Unexpected pipeline runner: FlinkRuner. Valid values are DataflowRunner, "
     "BundleBasedDirectRunner, DirectRunner, SwitchingDirectRunner, InteractiveRunner, FlinkRunner, FnApiRunner, "
     "PortableRunner, PrismRunner, SparkRunner, TestDirectRunner, TestDataflowRunner or the fully qualified name "
     "of a PipelineRunner subclass."),
])
def test_unknown_options_and_bad_values_are_refused(args, message):
    with pytest.raises(CorpusOptionsError) as raised:
        _check(*args)
    assert str(raised.value) == message


@pytest.mark.parametrize("args", [
    # This tool's options and Beam's, from several PipelineOptions classes, in both spellings.
    ["--task=segmentation", "--ignore_label", "255", "--plan", "--overwrite", "--direct_num_workers", "2",
     "--direct_running_mode=multi_threading", "--experiments", "a", "--experiments=b", "--no_use_public_ips",
     "--max_num_workers", "64", "--sdk_container_image", "image:1", "--artifacts_dir", "gs://bucket/a",
     "--environment_type", "EXTERNAL", "--environment_config=localhost:50000", "--save_main_session"],
    ["--runner", "DataflowRunner", "--project", "p", "--region", "us-central1", "--temp_location", "gs://b/t",
     "--dataflow_service_options=enable_prime", "--service_account_email", "w@p.iam.gserviceaccount.com"],
    # A portable runner's job server adds its own options at submission (Flink's, from Java): passed on.
    ["--runner", "FlinkRunner", "--flink_master", "[local]", "--checkpointing_interval", "1000"],
    ["--runner", "PortableRunner", "--job_endpoint", "localhost:8099", "--some_job_server_option=1"],
])
def test_known_options_and_portable_runner_options_pass(args):
    _check(*args)


def test_a_runner_module_s_own_options_are_known(corpus_dir):
    # RenderRunner defines --render_output in its own module, which nothing imports before the check does.
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", "build/never",
                        "--num_classes", NUM_CLASSES, "--plan", "--plan_sample", 4,
                        "--runner", "apache_beam.runners.render.RenderRunner", "--render_output", "x.svg")
    assert "measured 4 sampled pairs" in completed.stdout


@pytest.mark.parametrize("args,message", [
    (["--runner", "FlinkRunner", "--flink_master", "flink.example.com:8081", "--temp_location", "gs://b/tmp",
      "--allow_local_paths"],
     "error: FlinkRunner: the Flink master flink.example.com:8081 is another machine, whose TaskManagers cannot "
     "read the job server's local temporary folder: give --artifacts_dir gs://BUCKET/beam-artifacts (or "
     "--flink_submit_uber_jar)"),
    (["--runner", "FlinkRunner", "--flink_master", "flink.example.com:8081", "--temp_location", "gs://b/tmp",
      "--allow_local_paths", "--artifacts_dir", "s3://b/artifacts"],
     "error: FlinkRunner: --artifacts_dir s3://b/artifacts: the job server jar of tools/flink reads only gs:// "
     "besides local paths (it carries no s3:// filesystem); use gs://, or --flink_submit_uber_jar"),
    (["--runner", "PortableRunner", "--job_endpoint", "localhost:8099", "--environment_type", "EXTERNAL",
      "--environment_config", "10.1.2.3:50000"],
     "error: --temp_location is required with PortableRunner: the SDK workers run in the EXTERNAL worker pool at "
     "10.1.2.3:50000, another machine, so Beam and tf.Transform need a temporary folder they can all reach, "
     "e.g. gs://BUCKET/tmp"),
    (["--runner", "DirectRunner", "--max_num_worker", "64"],
     "error: unknown option(s) --max_num_worker (did you mean --max_num_workers?): DirectRunner would run "
     "without them (Beam ignores options it does not know, with only a warning); see --help"),
])
def test_the_command_line_refuses_with_one_line(corpus_dir, tmp_path, args, message):
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path / "o",
                        "--num_classes", NUM_CLASSES, *args, check=False)
    assert (completed.returncode, completed.stderr.strip()) == (2, message)
    assert not (tmp_path / "o").exists()
