"""Run the pipeline on Apache Flink: the job server jar, a Flink distribution, a session cluster.

Everything is built once into build/flink/ and reused:

- ``job_server_jar()``: the runnable Beam Flink job server jar
  (``tools/flink/fetch_job_server.sh``, Maven), for ``--flink_job_server_jar``.
- ``flink_home()``: Flink's own distribution (``bin/``, ``conf/``, ``lib/flink-dist-*.jar``),
  unpacked from PyPI's ``apache-flink`` wheel (scripts, default conf) and
  ``apache-flink-libraries`` (jars), fetched with ``pip download --no-deps``; neither is installed.
- ``FlinkCluster``: a standalone session cluster, a JobManager and one or more TaskManagers as
  processes started from that distribution (``bin/jobmanager.sh start-foreground``,
  ``bin/taskmanager.sh start-foreground``) with a private conf dir and free ports; with several
  TaskManagers (``--taskmanagers 2 --slots 1``) records cross between them as between hosts.
- ``WorkerPool``: Beam's Python SDK worker pool (``--environment_type=EXTERNAL``), whose SDK
  workers are started with the ``python`` found first on PATH: this interpreter's folder is put
  first, otherwise the workers lack the project's packages and the job hangs until a deadline.

Command line (from the repository root, with the project's virtualenv python):

    python -m tools.flink.cluster jar        # build or find the job server jar, print its path
    python -m tools.flink.cluster dist       # fetch or find the Flink distribution, print FLINK_HOME
    python -m tools.flink.cluster up         # start cluster + worker pool, print the pipeline flags, wait for Ctrl-C
    python -m tools.flink.cluster run -- --input ... --output ... --task ... --num_classes N
                                             # start both, run python -m beam_pipeline on them, stop both
"""

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List, Optional

from tools.flink.artifacts import ROOT, flink_home, job_server_jar, runner_lib_jar
from tools.flink.processes import _stop, _wait_for_port, free_port

BOOT_SCRIPT = os.path.join(ROOT, "tools", "flink", "sdk_boot.py")   # the pool's SDK worker start-up


class FlinkCluster:
    """A standalone Flink session cluster on localhost: one JobManager and ``taskmanagers`` TaskManager
    processes of ``slots`` slots each.

    Ports are free ones picked at start; the conf, lib, logs and pid files live in ``work_dir`` (a
    new temporary folder by default), never in the distribution, so several clusters can run at once.
    Use as a context manager; ``rest_address`` is what ``--flink_master`` takes.

    ``runner_lib`` (default: ``runner_lib_jar()``) goes into the cluster's lib/ and classes are
    loaded parent-first: only then does the Beam runner keep the Python SDK workers of a job
    alive from one task to the next (``--environment_cache_millis``); loaded from the job's own
    jar it releases them at the end of every task, and starting a Python worker (Beam and the
    pipeline's imports) for each of the job's ~15 tasks costs more than the work on a small corpus.
    Pass ``runner_lib=""`` for a plain cluster.
    """

    def __init__(self, work_dir: Optional[str] = None, slots: int = 2, home: Optional[str] = None,
                 jobmanager_memory: str = "1024m", taskmanager_memory: str = "3072m",
                 runner_lib: Optional[str] = None, taskmanagers: int = 1):
        self.home = home or flink_home()
        self.runner_lib = runner_lib_jar() if runner_lib is None else runner_lib
        self.work_dir = work_dir or tempfile.mkdtemp(prefix="flink-cluster-")
        self.slots = slots
        self.taskmanagers_count = taskmanagers
        self.jobmanager_memory = jobmanager_memory
        self.taskmanager_memory = taskmanager_memory
        self.rest_port = self.rpc_port = self.blob_port = None
        self.jobmanager: Optional[subprocess.Popen] = None
        self.taskmanagers: List[subprocess.Popen] = []

    @property
    def parallelism(self) -> int:
        """Every slot of every TaskManager: the job's parallelism."""
        return self.slots * self.taskmanagers_count

    @property
    def rest_address(self) -> str:
        return f"localhost:{self.rest_port}"

    @property
    def log_dir(self) -> str:
        return os.path.join(self.work_dir, "log")

    def _write_conf(self) -> str:
        import yaml  # PyYAML comes with apache-beam.
        conf_dir = os.path.join(self.work_dir, "conf")
        os.makedirs(conf_dir, exist_ok=True)
        for name in os.listdir(os.path.join(self.home, "conf")):
            shutil.copy(os.path.join(self.home, "conf", name), conf_dir)
        with open(os.path.join(self.home, "conf", "config.yaml")) as handle:
            config = yaml.safe_load(handle)  # keeps the shipped env.java.opts.all (--add-opens for Java 17)
        self.rest_port, self.rpc_port, self.blob_port = free_port(), free_port(), free_port()
        config["jobmanager"]["rpc"]["port"] = self.rpc_port
        config["jobmanager"]["memory"]["process"]["size"] = self.jobmanager_memory
        config["taskmanager"]["numberOfTaskSlots"] = self.slots
        config["taskmanager"]["memory"]["process"]["size"] = self.taskmanager_memory
        # Beam runs a batch job as Flink DataSet tasks that are all deployed at once, and each
        # blocking result partition asks for 512 network buffers (sort-shuffle.min-buffers): the
        # default network memory (10 %, 158 MB = 5079 buffers) fails the job with "Insufficient
        # number of network buffers". Give the network 512 MB and a smaller managed-memory share.
        config["taskmanager"]["memory"]["network"] = {"min": "512m", "max": "512m"}
        config["taskmanager"]["memory"]["managed"] = {"fraction": "0.25"}
        config["parallelism"]["default"] = self.parallelism
        config["rest"]["port"] = self.rest_port
        # Only free ports, none of Flink's defaults (6123, 8081) that another cluster may hold.
        config["blob"] = {"server": {"port": str(self.blob_port)}}
        # Each TaskManager binds its own: "0" lets every one of them pick a free port.
        config["taskmanager"]["rpc"] = {"port": "0"}
        config["taskmanager"]["data"] = {"port": 0}
        config["metrics"] = {"internal": {"query-service": {"port": "0"}}}
        config["io"] = {"tmp": {"dirs": os.path.join(self.work_dir, "tmp")}}
        config["env"]["log"] = {"dir": self.log_dir}
        config["env"]["pid"] = {"dir": os.path.join(self.work_dir, "pid")}
        if self.runner_lib:
            # Parent-first for every class, not only org.apache.beam: Beam's own dependencies
            # (joda-time, ...) must come from the same loader, or the job fails with
            # "cannot assign instance of org.joda.time.Duration to field ... of type org.joda.time.Duration".
            config["classloader"] = {"resolve-order": "parent-first"}
        with open(os.path.join(conf_dir, "config.yaml"), "w") as handle:
            yaml.safe_dump(config, handle, default_flow_style=False)
        for folder in ("log", "pid", "tmp"):
            os.makedirs(os.path.join(self.work_dir, folder), exist_ok=True)
        lib_dir = os.path.join(self.work_dir, "lib")  # the distribution's lib/ plus the Beam runner
        shutil.rmtree(lib_dir, ignore_errors=True)
        os.makedirs(lib_dir)
        jars = glob.glob(os.path.join(self.home, "lib", "*.jar")) + ([self.runner_lib] if self.runner_lib else [])
        for jar in jars:
            os.symlink(os.path.abspath(jar), os.path.join(lib_dir, os.path.basename(jar)))
        return conf_dir

    def start(self, timeout: float = 120) -> "FlinkCluster":
        conf_dir = self._write_conf()
        env = dict(os.environ, FLINK_CONF_DIR=conf_dir, FLINK_LOG_DIR=self.log_dir,
                   FLINK_LIB_DIR=os.path.join(self.work_dir, "lib"),
                   FLINK_PID_DIR=os.path.join(self.work_dir, "pid"))
        env.pop("FLINK_HOME", None)
        out = open(os.path.join(self.log_dir, "processes.out"), "ab")
        try:
            self.jobmanager = subprocess.Popen([os.path.join(self.home, "bin", "jobmanager.sh"), "start-foreground"],
                                               env=env, stdout=out, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
            for number in range(self.taskmanagers_count):   # each with log files of its own
                log_dir = os.path.join(self.log_dir, f"taskmanager-{number}")
                os.makedirs(log_dir, exist_ok=True)
                self.taskmanagers.append(subprocess.Popen(
                    [os.path.join(self.home, "bin", "taskmanager.sh"), "start-foreground"],
                    env=dict(env, FLINK_LOG_DIR=log_dir), stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True))
        finally:
            out.close()
        deadline = time.monotonic() + timeout
        try:
            _wait_for_port(self.rest_port, deadline, self.jobmanager, "Flink JobManager", self.log_dir)
            while time.monotonic() < deadline:  # every TaskManager has registered its slots
                processes = [(self.jobmanager, "JobManager")] + [(tm, "TaskManager") for tm in self.taskmanagers]
                for process, what in processes:
                    if process.poll() is not None:
                        raise RuntimeError(f"Flink {what} exited with {process.returncode}; see {self.log_dir}")
                with contextlib.suppress(OSError, ValueError):
                    with urllib.request.urlopen(f"http://{self.rest_address}/overview", timeout=2) as response:
                        overview = json.load(response)
                        if (overview.get("taskmanagers", 0) >= self.taskmanagers_count
                                and overview.get("slots-total", 0) >= self.parallelism):
                            return self
                time.sleep(0.5)
            raise RuntimeError(f"the Flink TaskManagers did not register in {timeout:.0f} s; see {self.log_dir}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for taskmanager in self.taskmanagers:
            _stop(taskmanager)
        _stop(self.jobmanager)

    def __enter__(self) -> "FlinkCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class WorkerPool:
    """Beam's Python SDK worker pool: the EXTERNAL environment that Flink's TaskManager asks for workers.

    Its SDK workers are processes started through ``tools/flink/sdk_boot.py``, which gives them the
    job's pipeline options as Beam's SDK container does (a bare pool gives none, and Beam's s3://
    filesystem then fails in every worker). This interpreter's folder goes first on PATH, and the
    repository root on PYTHONPATH (the code under test, not an installed copy). ``env`` adds variables
    for the pool and its workers, as a TaskManager host's environment would hold them: object-store
    credentials, for example (boto3 reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY there; the
    endpoint and region travel with the job's options).
    """

    def __init__(self, log_path: Optional[str] = None, python: str = sys.executable,
                 env: Optional[Dict[str, str]] = None):
        self.python = python
        self.env = dict(env or {})
        self.log_path = log_path or os.path.join(tempfile.mkdtemp(prefix="beam-worker-pool-"), "worker_pool.log")
        self.port: Optional[int] = None
        self.process: Optional[subprocess.Popen] = None

    @property
    def environment_config(self) -> str:
        return f"localhost:{self.port}"

    def start(self, timeout: float = 60) -> "WorkerPool":
        self.port = free_port()
        env = dict(os.environ, **self.env)
        env["PATH"] = os.path.dirname(self.python) + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.python, "-m", "apache_beam.runners.worker.worker_pool_main", f"--service_port={self.port}",
                 f"--container_executable={BOOT_SCRIPT}"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        try:
            _wait_for_port(self.port, time.monotonic() + timeout, self.process, "Beam worker pool", self.log_path)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        _stop(self.process, grace=5)  # the SDK workers are in its process group

    def __enter__(self) -> "WorkerPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def pipeline_flags(cluster: FlinkCluster, pool: WorkerPool, jar: str) -> List[str]:
    """The Beam options that send a run of ``python -m beam_pipeline`` to this cluster and worker pool.

    ``--environment_cache_millis`` keeps a job's SDK workers from one task to the next (see
    FlinkCluster); 30 s outlasts the gaps between the tasks of a batch job.
    ``--sdk_worker_parallelism`` = slots: one Python SDK worker process per slot, so the Python
    work of parallel tasks is not serialised by one worker's GIL (measured on the sample corpus,
    2 cores: 60 s with 2 workers, 71 s with 1).
    """
    flags = ["--runner=FlinkRunner", f"--flink_master={cluster.rest_address}", f"--flink_job_server_jar={jar}",
             f"--parallelism={cluster.parallelism}", "--environment_type=EXTERNAL",
             f"--environment_config={pool.environment_config}"]
    if cluster.runner_lib:
        flags += ["--environment_cache_millis=30000", f"--sdk_worker_parallelism={cluster.slots}"]
    return flags


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.flink.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["jar", "dist", "up", "run"])
    parser.add_argument("--work_dir", help="conf, logs and pid files of the cluster (default: a new temporary folder)")
    parser.add_argument("--slots", type=int, default=2, help="slots of each TaskManager (default 2)")
    parser.add_argument("--taskmanagers", type=int, default=1,
                        help="TaskManager processes (default 1); the job's parallelism is slots x taskmanagers")
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    pipeline_args = argv[split + 1:]
    if args.command == "jar":
        print(job_server_jar())
        return 0
    if args.command == "dist":
        print(flink_home())
        return 0
    jar = job_server_jar()
    # SIGTERM (kill PID, or a background job's only way out) stops the cluster and the pool too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with FlinkCluster(args.work_dir, slots=args.slots, taskmanagers=args.taskmanagers) as cluster, \
            WorkerPool(os.path.join(cluster.work_dir, "log", "worker_pool.log")) as pool:
        flags = pipeline_flags(cluster, pool, jar)
        print(f"Flink web UI and REST: http://{cluster.rest_address}  logs: {cluster.log_dir}", file=sys.stderr)
        if args.command == "up":
            print(" ".join(flags))
            sys.stdout.flush()
            with contextlib.suppress(KeyboardInterrupt):
                while cluster.jobmanager.poll() is None:
                    time.sleep(1)
            return 0
        env = dict(os.environ, PYTHONPATH=ROOT + (os.pathsep + os.environ["PYTHONPATH"]
                                                  if os.environ.get("PYTHONPATH") else ""))
        return subprocess.call([sys.executable, "-m", "beam_pipeline", *pipeline_args, *flags], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
