"""Every command in README.md and docs/*.md, checked by the project's own parsers and launch checks: nothing
runs, no I/O. An error names the file and line (``docs/runners.md:42: ...``).

Each ```sh block is split into commands as a shell would (line continuations, comments, ``NAME=value``
prefixes, quoting), placeholders such as BUCKET and PROJECT are given values of the right shape, and:

- ``python -m beam_pipeline ...`` (also ``.venv/bin/python``, and the pipeline part of
  ``python -m tools.flink.cluster run -- ...`` with the Flink options that tool adds) goes through Beam's
  option parser (an option Beam does not know fails here: at run time Beam drops it with a warning), the
  pipeline's own checks (``to_config``, the runner and worker-path checks) and Beam's own validation of the
  options for that runner, which ``beam.Pipeline`` runs before anything is submitted;
- ``python -m trainer ...`` goes through the trainer's parser, and its TF_CONFIG prefix through the
  trainer's cluster rules;
- each ```yaml block is a Vertex AI CustomJobSpec (``gcloud ai custom-jobs create --config``): its field
  names are checked against the API's, every pool must run the trainer with the same ``args``, parsed by
  the trainer's parser after YAML parsing, and the TF_CONFIG Vertex AI derives from the pools must be a
  cluster the trainer runs in;
- every other program (make, docker, gcloud) is skipped by name, with the reason in SKIPPED; a program
  that is neither checked nor skipped fails.

The names of beam_pipeline's modules appear in one function, :func:`pipeline_launch_checks`.
"""

import argparse
import contextlib
import dataclasses
import io
import json
import re
import shlex
import textwrap
import types
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple
from unittest import mock

import pytest
import yaml

from conftest import ROOT

README = Path(ROOT) / "README.md"
# README.md and every docs/*.md file (not docs/images/): the documents whose commands are checked.
DOCUMENTS = [README, *sorted((Path(ROOT) / "docs").glob("*.md"))]
SHELL_LANGUAGES = ("sh", "bash", "shell")
YAML_LANGUAGES = ("yaml", "yml")
PYTHONS = ("python", "python3", ".venv/bin/python")
# Placeholders the documents may use, each replaced by a value of the shape the option needs (Beam checks that a
# project id and a bucket name are well formed). A misspelt placeholder stays, and then usually fails.
PLACEHOLDERS = {
    "BUCKET": "example-bucket",
    "PROJECT": "example-project",
    "SUBNET": "example-subnet",
    "REGION": "us-central1",
    "ZONE": "us-central1-a",
    "NAME": "example-tpu",
}
SKIPPED = {
    "make": "a Makefile target; `make test` runs this suite",
    "pip": "installs packages; tests/unit/test_requirements.py checks the trainer's files, docs/training.md pip's dry run",
    "docker": "builds or pushes the image of Dockerfile",
    "gcloud": "Google Cloud's CLI; the --config file it takes is a ```yaml block, checked below",
    "xdg-open": "opens a file in the desktop's browser",
    "printf": "builds a REST request body (the shell's own)",
    "curl": "sends a REST request to a running server",
}
# Documented commands that are wrong today, each with what is wrong. Each is an xfail(strict=True): once
# the document is corrected the entry fails as XPASS (and test_known_broken_entries_still_match fails), so the
# entry is deleted together with the fix. The key is a piece of the command's text.
KNOWN_BROKEN: Dict[str, str] = {}
# Vertex AI API field names (CustomJobSpec, WorkerPoolSpec, MachineSpec, ContainerSpec, EnvVar).
CUSTOM_JOB_FIELDS = {"workerPoolSpecs", "scheduling", "serviceAccount", "network", "reservedIpRanges",
                     "baseOutputDirectory", "protectedArtifactLocationId", "tensorboard", "enableWebAccess",
                     "enableDashboardAccess", "experiment", "experimentRun", "models", "persistentResourceId",
                     "pscInterfaceConfig"}
POOL_FIELDS = {"containerSpec", "pythonPackageSpec", "machineSpec", "replicaCount", "nfsMounts", "lustreMounts",
               "diskSpec"}
MACHINE_FIELDS = {"machineType", "acceleratorType", "acceleratorCount", "tpuTopology", "reservationAffinity",
                  "gpuPartitionSize", "multihostGpuNodeCount"}
CONTAINER_FIELDS = {"imageUri", "command", "args", "env"}
VERTEX_JOBS = ("chief", "worker", "ps", "evaluator")   # TF_CONFIG job of workerPoolSpecs[0], [1], [2], [3]


class CommandError(AssertionError):
    """A documented command that would fail as written; the message says where (file:line) and why."""


@dataclasses.dataclass(frozen=True)
class Block:
    language: str
    line: int             # line of the block's first line in its file
    text: str
    source: str = "README.md"   # the file, relative to the checkout


@dataclasses.dataclass(frozen=True)
class Command:
    line: int             # line where the command starts in its file
    text: str             # as written, continuation lines joined
    env: Tuple[Tuple[str, str], ...]
    argv: Tuple[str, ...]  # program and arguments, placeholders filled in
    source: str = "README.md"   # the file, relative to the checkout

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def fenced_blocks(markdown: str, source: str = "README.md") -> List[Block]:
    """The fenced code blocks of the file ``source``, with the fence's indentation (a block inside a list
    item) removed."""
    blocks, open_fence = [], None
    for number, line in enumerate(markdown.splitlines(), 1):
        stripped = line.strip()
        if open_fence is None:
            if stripped.startswith("```"):
                open_fence = (stripped[3:].strip().lower(), number + 1, len(line) - len(line.lstrip()), [])
        elif stripped.startswith("```"):
            language, first, indent, lines = open_fence
            blocks.append(Block(language, first, "\n".join(text[indent:] if not text[:indent].strip() else text
                                                           for text in lines), source))
            open_fence = None
        else:
            open_fence[3].append(line)
    if open_fence is not None:
        raise CommandError(f"{source}:{open_fence[1] - 1}: a ``` fence is never closed")
    return blocks


def fill_placeholders(text: str) -> str:
    return re.sub(r"\b(" + "|".join(PLACEHOLDERS) + r")\b", lambda match: PLACEHOLDERS[match.group(1)], text)


ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


def shell_commands(block: Block) -> List[Command]:
    """The block's commands as a shell reads them: ``\\`` continues a line, ``#`` starts a comment, leading
    ``NAME=value`` words set the command's environment, quotes group words."""
    commands, pending, start = [], [], block.line
    for offset, line in enumerate(block.text.splitlines()):
        if not pending:
            start = block.line + offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        text = " ".join(part.strip() for part in [*pending, line])
        pending = []
        try:
            words = shlex.split(text, comments=True)
        except ValueError as error:
            raise CommandError(f"{block.source}:{start}: {error}: {text}") from None
        env = []
        while words and ENV_ASSIGNMENT.fullmatch(words[0]):
            name, value = words.pop(0).split("=", 1)
            env.append((name, fill_placeholders(value)))
        if words:
            commands.append(Command(start, text, tuple(env), tuple(fill_placeholders(word) for word in words),
                                    block.source))
        elif env:
            raise CommandError(f"{block.source}:{start}: an assignment without a command: {text}")
    if pending:
        raise CommandError(f"{block.source}:{start}: the block ends inside a line continuation")
    return commands


def _parse(parse: Callable, where: str):
    """Run an argparse-based parse; its exit 2 (a usage error) becomes CommandError, --help's exit 0 None."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            return parse()
    except SystemExit as exit_:
        if exit_.code in (0, None):
            return None
        lines = errors.getvalue().strip().splitlines() or [f"exit {exit_.code}"]
        raise CommandError(f"{where}: {lines[-1]}") from None


def pipeline_launch_checks(argv: List[str], where: str) -> None:
    """What ``python -m beam_pipeline ARGV`` checks before it submits anything: the one place that names
    beam_pipeline's modules (after a restructuring, adapt the imports here).

    1. Beam's option parser over every PipelineOptions subclass, failing on options it does not know (Beam
       itself drops them with a warning: a misspelt --max_num_workers would be ignored silently);
    2. the pipeline's own checks: ``to_config`` (values, required options) and the runner and worker-path
       checks (``check_worker_paths``);
    3. Beam's own validation for the runner, which ``beam.Pipeline(runner, options)`` runs at launch
       (without its one GCS request).
    """
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, _BeamArgumentParser
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.runner import create_runner

    from beam_pipeline.launcher.config import to_config
    from beam_pipeline.launcher.runners import check_worker_paths
    from beam_pipeline.launcher.options import CorpusOptionsError, help_parser

    if "--help" in argv or "-h" in argv:
        _parse(lambda: help_parser().parse_args(argv), where)
        return
    parser = _BeamArgumentParser(prog="python -m beam_pipeline", allow_abbrev=False)
    for options_class in {str(cls): cls for cls in PipelineOptions.__subclasses__()}.values():
        options_class._add_argparse_args(parser)  # noqa: SLF001 - what PipelineOptions.get_all_options does
    _, unknown = _parse(lambda: parser.parse_known_args(argv), where)
    if unknown:
        raise CommandError(f"{where}: Beam knows no option {' '.join(unknown)} (it would drop it with a warning)")
    options = PipelineOptions(argv)
    try:
        check_worker_paths(options, to_config(options))
    except CorpusOptionsError as error:
        raise CommandError(f"{where}: error: {error}") from None
    try:
        runner = create_runner(options.view_as(StandardOptions).runner or "DirectRunner")
    except (ValueError, ImportError) as error:
        raise CommandError(f"{where}: {error}") from None
    # --dry_run: Beam's own switch that skips the one request its validation makes (the soft-delete policy
    # of the temp and staging buckets, a GCS call).
    errors = PipelineOptionsValidator(PipelineOptions([*argv, "--dry_run=true"]), runner).validate()
    if errors:
        raise CommandError(f"{where}: Beam: {' '.join(errors)}")


def trainer_checks(argv: List[str], env: Dict[str, str], where: str) -> None:
    """``python -m trainer ARGV`` with ``env``: the trainer's parser, and TF_CONFIG against its cluster rules."""
    from trainer.training.config import parse_config
    from trainer.training.cluster import StrategyError, cluster_from_tf_config, pick_strategy

    config = _parse(lambda: parse_config(argv), where)
    if config is None:                                  # --help
        return
    try:
        cluster = cluster_from_tf_config(env.get("TF_CONFIG"))
        if config.strategy != "tpu":
            pick_strategy(config.strategy, cluster, gpus=0)
    except StrategyError as error:
        raise CommandError(f"{where}: {error}") from None


class _Parsed(Exception):
    """Raised with the parsed arguments to stop a command's main() right after its own parser ran."""


def flink_cluster_checks(argv: List[str], where: str) -> None:
    """``python -m tools.flink.cluster COMMAND [-- PIPELINE ARGS]``: the tool's own parser (its main() is
    stopped right after parsing; nothing starts), then the pipeline's checks on PIPELINE ARGS plus the Flink
    options the tool adds (``pipeline_flags``, for a cluster on localhost)."""
    from tools.flink import cluster

    split = argv.index("--") if "--" in argv else len(argv)
    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        raise _Parsed(parse_args(parser, args, namespace))

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop):
        try:
            _parse(lambda: cluster.main(argv), where)
        except _Parsed as parsed:
            command, options = parsed.args[0].command, parsed.args[0]
        else:
            return                                      # --help
    if command != "run":
        if split < len(argv):
            raise CommandError(f"{where}: only `run` takes pipeline options after --")
        return
    flink = types.SimpleNamespace(rest_address="localhost:8081", slots=options.slots,
                                  parallelism=options.slots * options.taskmanagers,
                                  runner_lib="build/flink/beam-flink-1.19-runner-lib-2.70.0.jar")
    pool = types.SimpleNamespace(environment_config="localhost:50000")
    flags = cluster.pipeline_flags(flink, pool, "build/flink/beam-flink-1.19-job-server-2.70.0.jar")
    pipeline_launch_checks([*argv[split + 1:], *flags], where)


def _own_parse(module: str, name: str, call: bool = True) -> Callable[[List[str]], object]:
    """``module.name``: a parser factory (``call``) or a parse function, as ``argv -> parsed``."""
    def parse(argv: List[str]):
        target = getattr(__import__(module, fromlist=[name]), name)
        return target().parse_args(argv) if call else target(argv)
    return parse


# Commands whose arguments are checked by the program's own parser (nothing runs or is read).
OWN_PARSERS = {
    "beam_pipeline.report": _own_parse("beam_pipeline.report.__main__", "parser"),
    "trainer.evaluate": _own_parse("trainer.evaluate", "parse_config", call=False),   # with its value checks
    "trainer.serve": _own_parse("trainer.serve", "build_parser"),
    "tools.sample_corpus": _own_parse("tools.sample_corpus.__main__", "build_parser"),
}


def check_command(command: Command) -> str:
    """Check one documented command; returns what was done with it, raises CommandError."""
    where = command.where
    program, *args = command.argv
    if program in PYTHONS and args[:1] == ["-m"] and len(args) > 1:
        module, rest, env = args[1], args[2:], dict(command.env)
        if module == "beam_pipeline":
            pipeline_launch_checks(rest, where)
        elif module == "trainer":
            trainer_checks(rest, env, where)
        elif module == "tools.flink.cluster":
            flink_cluster_checks(rest, where)
        elif module in OWN_PARSERS:
            _parse(lambda: OWN_PARSERS[module](rest), where)
        else:
            raise CommandError(f"{where}: python -m {module}: no check for this module; add one")
        return f"checked: python -m {module}"
    if program in SKIPPED:
        return f"skipped: {SKIPPED[program]}"
    raise CommandError(f"{where}: {program}: neither checked nor listed in SKIPPED")


def _unknown_fields(mapping, known, what: str, where: str) -> None:
    if not isinstance(mapping, dict):
        raise CommandError(f"{where}: {what} is not a mapping: {mapping!r}")
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise CommandError(f"{where}: {what}: Vertex AI has no field {', '.join(unknown)}")


def check_vertex_job(block: Block) -> str:
    """A Vertex AI CustomJobSpec in YAML: field names, the trainer command and its args, and the cluster."""
    where = f"{block.source}:{block.line}"
    try:
        spec = yaml.safe_load(block.text)
    except yaml.YAMLError as error:
        raise CommandError(f"{where}: not YAML: {error}") from None
    _unknown_fields(spec, CUSTOM_JOB_FIELDS, "the job spec", where)
    pools = spec.get("workerPoolSpecs") or []
    if not pools:
        raise CommandError(f"{where}: no workerPoolSpecs")
    if len(pools) > len(VERTEX_JOBS):
        raise CommandError(f"{where}: Vertex AI takes at most {len(VERTEX_JOBS)} worker pools")
    argvs = []
    for index, pool in enumerate(pools):
        name = f"workerPoolSpecs[{index}]"
        _unknown_fields(pool, POOL_FIELDS, name, where)
        _unknown_fields(pool.get("machineSpec", {}), MACHINE_FIELDS, f"{name}.machineSpec", where)
        container = pool.get("containerSpec")
        _unknown_fields(container, CONTAINER_FIELDS, f"{name}.containerSpec", where)
        if index == 0 and pool.get("replicaCount", 1) != 1:
            raise CommandError(f"{where}: {name} is the primary replica (the chief): replicaCount must be 1")
        command, args = container.get("command") or [], container.get("args") or []
        if [str(word) for word in command][1:] != ["-m", "trainer"] or str(command[0]) not in PYTHONS:
            raise CommandError(f"{where}: {name}.containerSpec.command {command!r} is not python -m trainer")
        not_text = [arg for arg in args if not isinstance(arg, str)]
        if not_text:
            raise CommandError(f"{where}: {name}.containerSpec.args: YAML read {not_text!r} as a "
                               f"{type(not_text[0]).__name__}, not text: an item was split at a comma or left "
                               "unquoted; quote it or put one item per line")
        env = {item["name"]: item["value"] for item in container.get("env", [])}
        trainer_checks([fill_placeholders(arg) for arg in args], env, f"{where}: {name}.containerSpec.args")
        argvs.append(tuple(args))
    if len(set(argvs)) > 1:
        raise CommandError(f"{where}: the worker pools run different trainer args; every replica must run the same")
    _check_vertex_cluster(pools, where)
    return f"checked: {len(pools)} worker pool(s) of python -m trainer"


def _check_vertex_cluster(pools, where: str) -> None:
    """Every task of the TF_CONFIG that Vertex AI derives from the pools is one the trainer runs in."""
    from trainer.training.cluster import StrategyError, cluster_from_tf_config

    cluster = {job: [f"{job}-{i}:2222" for i in range(int(pool.get("replicaCount", 1)))]
               for job, pool in zip(VERTEX_JOBS, pools) if job != "evaluator"}
    for job, pool in zip(VERTEX_JOBS, pools):
        for index in range(int(pool.get("replicaCount", 1))):
            tf_config = {"cluster": cluster, "task": {"type": job, "index": index}, "environment": "cloud"}
            try:
                cluster_from_tf_config(json.dumps(tf_config))
            except StrategyError as error:
                raise CommandError(f"{where}: the {job}:{index} replica: {error}") from None


# ---------------------------------------------------------------------------------------------------------

def _source(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def readme_blocks() -> List[Block]:
    """The fenced blocks of README.md and of every docs/*.md file, each naming its file."""
    return [block for path in DOCUMENTS for block in fenced_blocks(path.read_text(), _source(path))]


def readme_commands() -> List[Command]:
    return [command for block in readme_blocks() if block.language in SHELL_LANGUAGES
            for command in shell_commands(block)]


def _known_broken(text: str) -> Optional[str]:
    return next((reason for key, reason in KNOWN_BROKEN.items() if key in text), None)


def _params(items, text_of, id_of):
    params = []
    for item in items:
        reason = _known_broken(text_of(item))
        marks = [pytest.mark.xfail(raises=CommandError, strict=True, reason=reason)] if reason else []
        params.append(pytest.param(item, marks=marks, id=id_of(item)))
    return params


COMMANDS = readme_commands()
YAML_BLOCKS = [block for block in readme_blocks() if block.language in YAML_LANGUAGES]


@pytest.mark.parametrize("command", _params(COMMANDS, lambda c: c.text,
                                            lambda c: f"{c.where}-{' '.join(c.argv[:3])}"))
def test_readme_command(command):
    check_command(command)


@pytest.mark.parametrize("block", _params(YAML_BLOCKS, lambda b: b.text, lambda b: f"{b.source}:{b.line}-yaml"))
def test_readme_yaml(block):
    check_vertex_job(block)


def test_readme_has_every_kind_of_command():
    # The extraction found what README and docs/ are known to hold together: a regression here would
    # silently check nothing.
    kinds = {" ".join(command.argv[1:3]) for command in COMMANDS if command.argv[0] in PYTHONS}
    assert {"-m beam_pipeline", "-m trainer", "-m tools.flink.cluster"} <= kinds
    assert any(command.argv[0] == "gcloud" for command in COMMANDS)
    assert any(dict(command.env).get("TF_CONFIG") for command in COMMANDS)
    assert YAML_BLOCKS
    assert not [block.language for block in readme_blocks() if block.language in ("bash", "shell", "yml")], \
        "use ```sh and ```yaml, as the rest of README and docs/"


def test_known_broken_entries_still_match():
    text = "\n".join(path.read_text() for path in DOCUMENTS)
    stale = [key for key in KNOWN_BROKEN if key not in text]
    assert not stale, f"neither README nor docs/ has {stale} any longer: delete these KNOWN_BROKEN entries"


# --- The checker itself: shell syntax, and planted typos in every checked command and YAML block ---------

SHELL_SAMPLE = """\
Text.

- A list item:
  ```sh
  # a comment line
  .venv/bin/python -m trainer --data build/out/x --job_dir gs://BUCKET/jobs/a \\
      --crop 64,64   # a trailing comment
  TF_CONFIG='{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1}}' \\
  python -m trainer --data d --job_dir j --filter_unused_in_trainer "x # y"
  ```
"""


def test_continuations_comments_env_prefixes_and_indented_fences():
    (block,) = fenced_blocks(SHELL_SAMPLE)
    assert (block.language, block.line) == ("sh", 5)
    first, second = shell_commands(block)
    assert first.line == 6 and first.env == ()
    assert first.argv == (".venv/bin/python", "-m", "trainer", "--data", "build/out/x", "--job_dir",
                          "gs://example-bucket/jobs/a", "--crop", "64,64")
    assert second.line == 8
    assert second.env == (("TF_CONFIG", '{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", '
                                        '"index": 1}}'),)
    assert second.argv[-2:] == ("--filter_unused_in_trainer", "x # y")       # a quoted # is no comment
    assert check_command(first) == "checked: python -m trainer"
    with pytest.raises(CommandError, match=r"README.md:8: .*unrecognized arguments: --filter_unused_in_trainer"):
        check_command(second)


def test_a_block_ending_in_a_continuation_and_an_unknown_program_fail():
    with pytest.raises(CommandError, match="ends inside a line continuation"):
        shell_commands(Block("sh", 1, "python -m trainer --data d \\"))
    with pytest.raises(CommandError, match="wget: neither checked nor listed in SKIPPED"):
        check_command(shell_commands(Block("sh", 1, "wget https://example.com"))[0])


def test_errors_name_the_file_and_line():
    (block,) = fenced_blocks("Text.\n\n```sh\nmake run\npython -m trainer --data d --job_dir j --no_such\n```\n",
                             "docs/example.md")
    assert (block.source, block.line) == ("docs/example.md", 4)
    make, trainer = shell_commands(block)
    assert (make.where, trainer.where) == ("docs/example.md:4", "docs/example.md:5")
    with pytest.raises(CommandError, match=r"^docs/example.md:5: .*unrecognized arguments: --no_such"):
        check_command(trainer)
    with pytest.raises(CommandError, match=r"^docs/example.md:3: a ``` fence is never closed"):
        fenced_blocks("Text.\n\n```sh\nmake run\n", "docs/example.md")
    with pytest.raises(CommandError, match=r"^docs/example.md:7: the block ends inside a line continuation"):
        shell_commands(Block("sh", 7, "python -m trainer --data d \\", "docs/example.md"))


def _misspell_last_option(argv: Tuple[str, ...]) -> Tuple[str, ...]:
    """The last --option (name only, before any =value) with one letter doubled; without options, the last
    word when it is a subcommand such as `up`, or else (a path) an option the program does not have."""
    options = [i for i, word in enumerate(argv) if word.startswith("--") and len(word) > 2]
    if not options and "/" in argv[-1]:
        return (*argv, "--no_such_option")
    index = max(options) if options else len(argv) - 1
    name, sep, value = argv[index].partition("=")
    return (*argv[:index], name + name[-1] + sep + value, *argv[index + 1:])


CHECKED = [command for command in COMMANDS if command.argv[0] not in SKIPPED and not _known_broken(command.text)]


@pytest.mark.parametrize("command", CHECKED, ids=lambda c: c.where)
def test_a_misspelt_option_in_any_checked_command_fails(command):
    planted = dataclasses.replace(command, argv=_misspell_last_option(command.argv))
    with pytest.raises(CommandError):
        check_command(planted)


@pytest.mark.parametrize("old,new", [
    ("--num_classes 8", "--num_classes eight"),                  # a bad value
    ("--task segmentation", "--task segmentaton"),                # a bad choice
    ("--runner=FlinkRunner", "--runner=FlinkRuner"),              # a runner Beam does not know
    ("gs://BUCKET/tmp", "/tmp/beam"),                             # a local path for remote workers
    ("--artifacts_dir gs://BUCKET/", "--artifacts_dir s3://BUCKET/"),   # artifacts remote TaskManagers cannot read
    ('"index": 0', '"index": 2'),                                 # a TF_CONFIG task outside its cluster
    ("--strategy mirrored", "--strategy mirored"),
])
def test_planted_value_typos_fail(old, new):
    matching = [command for command in CHECKED if old in command.text]
    assert matching, f"no checked command in README or docs/ has {old!r}"
    for command in matching:
        planted = shell_commands(Block("sh", command.line, command.text.replace(old, new), command.source))[0]
        with pytest.raises(CommandError):
            check_command(planted)


ARGS_NODE = re.compile(r"^(?P<indent>[ \t]*)args:[^\n]*\n(?:(?P=indent)(?:[ \t]+|- )[^\n]*\n)*", re.MULTILINE)


def _args_as_unquoted_flow_list(text: str) -> str:
    """The YAML with every ``args:`` written as an unquoted [flow, list]: the quoting mistake of issue 15."""
    def flow(match):
        items = yaml.safe_load(textwrap.dedent(match.group(0)))["args"]
        return f"{match.group('indent')}args: [{', '.join(str(item) for item in items)}]\n"
    return ARGS_NODE.sub(flow, text if text.endswith("\n") else text + "\n")


# A Vertex AI job of a chief pool and a worker pool, args one per line (the documented one, kept here so the
# layout stays checked if the documented example changes).
CORRECTED_VERTEX_YAML = """\
# vertex_job.yaml: pool 0 is the chief (one replica), pool 1 adds workers; every replica runs the same args
workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-16, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 4}
    replicaCount: 1
    containerSpec:
      imageUri: us-central1-docker.pkg.dev/PROJECT/beam/image-corpus:2.70.0
      command: [python, -m, trainer]
      args:   # one item per line: in a [flow, list] the comma of --crop=256,256 would split the item
        - --data=gs://BUCKET/shards/v1
        - --job_dir=gs://BUCKET/jobs/unet-001
        - --strategy=auto
        - --epochs=50
        - --steps_per_epoch=1000
        - --global_batch_size=64
        - --crop=256,256
  - machineSpec: {machineType: n1-standard-16, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 4}
    replicaCount: 1
    containerSpec:
      imageUri: us-central1-docker.pkg.dev/PROJECT/beam/image-corpus:2.70.0
      command: [python, -m, trainer]
      args:
        - --data=gs://BUCKET/shards/v1
        - --job_dir=gs://BUCKET/jobs/unet-001
        - --strategy=auto
        - --epochs=50
        - --steps_per_epoch=1000
        - --global_batch_size=64
        - --crop=256,256
"""
YAML_TO_PLANT_IN = [*[b for b in YAML_BLOCKS if not _known_broken(b.text)], Block("yaml", 0, CORRECTED_VERTEX_YAML)]


def test_the_corrected_vertex_yaml_passes():
    assert check_vertex_job(Block("yaml", 0, CORRECTED_VERTEX_YAML)) == "checked: 2 worker pool(s) of python -m trainer"


@pytest.mark.parametrize("block", YAML_TO_PLANT_IN, ids=lambda b: f"{b.source}:{b.line}")
def test_planted_mistakes_in_the_vertex_yaml_fail(block):
    quoting = _args_as_unquoted_flow_list(block.text)
    assert quoting != block.text and "--crop=" in quoting
    field = block.text.replace("replicaCount", "replicaCont", 1)
    option = re.sub(r"(?m)^(\s*- |\s*args: \[)--(\w+)=", r"\1--\2x=", block.text, count=1)   # the first arg
    other_args = block.text[::-1].replace("46=", "48=", 1)[::-1]          # the last pool's =64 becomes =84
    pools = block.text + block.text[block.text.index("  - machineSpec"):].replace("replicaCount: 1", "replicaCount: 2")
    for planted, message in ((quoting, "split at a comma"), (field, "no field replicaCont"),
                             (option, "unrecognized arguments|required"), (other_args, "different trainer args"),
                             (pools, "at most 4 worker pools|parameter servers|replicaCount")):
        with pytest.raises(CommandError, match=message):
            check_vertex_job(dataclasses.replace(block, text=planted))
