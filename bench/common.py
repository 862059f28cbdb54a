"""What the benchmarks share: the cached sample corpora, /proc sampling (process trees, their peak RSS and
CPU over time), noise measurement, logging and the median (min..max) text of repeated measurements.

The benchmarks are scripts (``python bench/<name>.py``), so this folder is on
their import path; the product is imported as installed (``make install``),
through public names only.
"""

from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import hashlib
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy

ROOT = Path(__file__).resolve().parents[1]
GENERATOR_PACKAGE = ROOT / "tools" / "sample_corpus"  # the hash of its sources is part of the corpus cache key
NUM_CLASSES = 8
GENERATOR_CLASS_IMAGES = 8  # the classification part of the sample corpus is not used; keep it tiny
NOISY_CORES = 0.25  # other processes' CPU use during a run above which the reports warn
MB = 1024 * 1024


def count_rows(listing: Path) -> int:
    """Data rows of a CSV listing (the corpus's manifest.csv)."""
    with listing.open(newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.DictReader(handle))


@dataclasses.dataclass(frozen=True)
class Corpus:
    scale: int
    manifest: Path
    rows: int  # manifest rows = pairs attempted by both sides (valid and broken)


def generator_version() -> str:
    """First 8 hex digits of a SHA-256 over the corpus generator's sources, every ``*.py`` of the
    tools/sample_corpus package (relative path and content, in path order): a stale cache has another."""
    digest = hashlib.sha256()
    for name in sorted(path.relative_to(GENERATOR_PACKAGE).as_posix() for path in GENERATOR_PACKAGE.rglob("*.py")):
        digest.update(name.encode() + b"\0" + (GENERATOR_PACKAGE / name).read_bytes() + b"\0")
    return digest.hexdigest()[:8]


def corpus_dir(workdir: Path, pairs: int, scale: int, version: str) -> Path:
    return workdir / f"corpus_{pairs}pairs_x{scale}_g{version}"


def remove_stale_corpora(workdir: Path, version: str) -> None:
    """Delete cached corpora written by another version of the generator (including unversioned ones)."""
    for path in sorted(workdir.glob("corpus_*pairs_x*")):
        if path.is_dir() and not path.name.endswith(f"_g{version}"):
            log(f"deleting stale corpus {path}")
            shutil.rmtree(path)


def generate_command(out: Path, pairs: int, scale: int) -> list[str]:
    return [sys.executable, "-m", "tools.sample_corpus", str(out), "--num_pairs", str(pairs),
            "--scale", str(scale), "--num_class_images", str(GENERATOR_CLASS_IMAGES), "--overwrite"]


def generate_corpus(workdir: Path, pairs: int, scale: int, version: str) -> None:
    """Write one corpus into a temporary folder, renamed into place only when complete."""
    final = corpus_dir(workdir, pairs, scale, version)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    log(f"generating corpus {pairs} pairs x{scale} -> {final}")
    command = generate_command(tmp, pairs, scale)
    completed = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"corpus generation failed (exit {completed.returncode}): {' '.join(command)}")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def ensure_corpora(workdir: Path, pairs: int, scales: Sequence[int],
                   version: str) -> tuple[dict[int, Corpus], float]:
    """Generate the missing corpora, one per core at a time; returns them by scale and the seconds spent."""
    started = time.perf_counter()
    remove_stale_corpora(workdir, version)
    missing = [s for s in sorted(scales, reverse=True)
               if not (corpus_dir(workdir, pairs, s, version) / "segmentation" / "manifest.csv").exists()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as executor:
        for future in [executor.submit(generate_corpus, workdir, pairs, scale, version) for scale in missing]:
            future.result()
    corpora = {}
    for scale in scales:
        manifest = corpus_dir(workdir, pairs, scale, version) / "segmentation" / "manifest.csv"
        corpora[scale] = Corpus(scale, manifest, count_rows(manifest))
    return corpora, time.perf_counter() - started


PHOTO_GENERATOR_SOURCE = ROOT / "tools" / "photo_corpus.py"
PHOTO_FORMATS = {"png": "png.csv", "jpeg": "jpeg.csv"}   # image format -> the photo corpus's listing


def photo_generator_version() -> str:
    """First 8 hex digits of the SHA-256 of tools/photo_corpus.py: a stale cache has another."""
    return hashlib.sha256(PHOTO_GENERATOR_SOURCE.read_bytes()).hexdigest()[:8]


def ensure_photo_corpus(workdir: Path, pairs: int) -> tuple[Path, float]:
    """The real-looking photo corpus (tools/photo_corpus.py) with at least ``pairs`` pairs, generated when
    missing or too small (pair i is the same whatever the size, so a larger corpus serves every smaller
    one); folders of other generator versions are deleted. Returns the folder and the seconds spent."""
    started = time.perf_counter()
    version = photo_generator_version()
    for path in sorted(workdir.glob("photo_g*")):
        if path.is_dir() and path.name != f"photo_g{version}":
            log(f"deleting stale photo corpus {path}")
            shutil.rmtree(path)
    folder = workdir / f"photo_g{version}"
    listing = folder / PHOTO_FORMATS["png"]
    if not listing.exists() or count_rows(listing) < pairs:
        log(f"generating the photo corpus: {pairs} pairs -> {folder} (about 0.2 s of CPU per pair)")
        folder.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "tools.photo_corpus", str(folder), "--pairs", str(pairs),
                   "--workers", str(os.cpu_count() or 1), "--overwrite"]
        completed = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
        if completed.returncode != 0:
            raise RuntimeError(f"photo corpus generation failed (exit {completed.returncode}): {' '.join(command)}")
    return folder, time.perf_counter() - started


def photo_listing(folder: Path, image_format: str, pairs: int) -> Path:
    """A listing of the first ``pairs`` rows of the photo corpus's listing for ``image_format``."""
    path = folder / f"bench_{image_format}_{pairs}.csv"
    if not path.exists():
        with (folder / PHOTO_FORMATS[image_format]).open(newline="", encoding="utf-8") as handle:
            lines = handle.readlines()[:pairs + 1]
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(lines), encoding="utf-8")
        tmp.rename(path)
    return path


def warm_page_cache(folder: Path) -> None:
    """Read every file below ``folder`` once so that no side pays for a cold disk (not timed)."""
    for path in folder.rglob("*"):
        if path.is_file():
            path.read_bytes()


def machine_busy_seconds() -> float:
    """CPU seconds all processes have used since boot, from the first line of /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def other_cores(busy_before: float, own_cpu_seconds: float, seconds: float) -> float:
    """Cores used by processes other than the measured ones during ``seconds``."""
    return max(0.0, (machine_busy_seconds() - busy_before - own_cpu_seconds) / seconds)


def cpu_seconds() -> float:
    """CPU time of this process plus its reaped children so far."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def run_measured(command: Sequence[str], cwd: Path, log_path: Path, env: Optional[dict] = None) -> dict:
    """Run ``command`` to its end, its output into ``log_path``: its wall seconds from spawn to reaping, the CPU
    seconds of it and every process it started (``RUSAGE_CHILDREN``), and the cores other processes used
    meanwhile. A non-zero exit raises, naming the log."""
    busy, own = machine_busy_seconds(), cpu_seconds()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with log_path.open("w") as handle:
        completed = subprocess.run(list(command), cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(f"exit {completed.returncode}: see {log_path}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"seconds": seconds, "cpu_seconds": cpu, "other_cores": other_cores(busy, cpu_seconds() - own, seconds)}


def read_stat(pid: str) -> Optional[tuple[int, float, int]]:
    """(parent pid, CPU ticks, RSS pages) of a process from /proc, or None when it is gone.

    The CPU ticks include those of reaped children (cutime, cstime), so the tree's
    CPU time does not drop when a worker process exits.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), sum(float(fields[i]) for i in (11, 12, 13, 14)), int(fields[21])


def process_tree(root_pid: int) -> dict[str, tuple[int, float, int]]:
    """``read_stat`` of ``root_pid`` and of every process descending from it, by pid."""
    stats = {pid: stat for pid in os.listdir("/proc") if pid.isdigit()
             for stat in [read_stat(pid)] if stat is not None}
    tree = {str(root_pid)}
    grew = True
    while grew:
        children = {pid for pid, (ppid, _, _) in stats.items() if str(ppid) in tree} - tree
        tree |= children
        grew = bool(children)
    return {pid: stats[pid] for pid in tree if pid in stats}


def process_role(pid: str, root_pid: int) -> str:
    """``launcher`` (the process run), ``sdk_worker`` (Beam's SDK worker processes: started by Beam's engine, or
    by the launcher's warm pool and its clients, beam_pipeline/launcher/warm_workers.py), or ``other``."""
    if pid == str(root_pid):
        return "launcher"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    workers = ("sdk_worker_main", "beam_pipeline.launcher.warm_workers")
    return "sdk_worker" if any(name in command for name in workers) else "other"


class TreeSampling(threading.Thread):
    """A thread that reads ``process_tree`` of a process every ``seconds`` until stopped; subclasses say what
    they keep of each reading (``sample``)."""

    def __init__(self, pid: int, seconds: float = 0.25):
        super().__init__(daemon=True)
        self._pid = pid
        self._seconds = seconds
        self._stop_event = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample(process_tree(self._pid))
            self._stop_event.wait(self._seconds)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def sample(self, members: dict[str, tuple[int, float, int]]) -> None:
        raise NotImplementedError


class ProcessPeaks(TreeSampling):
    """The peak RSS of every process of a tree, sampled from /proc every ``seconds``, with its role."""

    def __init__(self, pid: int, seconds: float = 0.25):
        super().__init__(pid, seconds)
        self.peaks: dict[str, int] = {}           # pid -> peak RSS bytes
        self.roles: dict[str, str] = {}           # pid -> process_role

    def sample(self, members: dict[str, tuple[int, float, int]]) -> None:
        for pid, (_, _, pages) in members.items():
            if pid not in self.roles:
                self.roles[pid] = process_role(pid, self._pid)
            self.peaks[pid] = max(self.peaks.get(pid, 0), pages * self._page)

    def by_role(self) -> dict[str, list[int]]:
        """``{role: [peak RSS bytes of each process of that role]}``, largest first."""
        roles: dict[str, list[int]] = {}
        for pid, peak in self.peaks.items():
            roles.setdefault(self.roles[pid], []).append(peak)
        return {role: sorted(peaks, reverse=True) for role, peaks in roles.items()}


class TreeSampler(TreeSampling):
    """CPU time and summed RSS of a process and all its descendants over time, sampled from /proc."""

    def __init__(self, pid: int, seconds: float = 0.25):
        super().__init__(pid, seconds)
        self._ticks = os.sysconf("SC_CLK_TCK")
        self.samples: list[tuple[float, float, int]] = []  # (monotonic s, CPU s, tree RSS bytes)
        self.max_descendants = 0

    def sample(self, members: dict[str, tuple[int, float, int]]) -> None:
        if not members:
            return
        self.max_descendants = max(self.max_descendants, len(members) - 1)
        cpu = sum(ticks for _, ticks, _ in members.values()) / self._ticks
        rss = sum(pages for _, _, pages in members.values()) * self._page
        self.samples.append((time.monotonic(), cpu, rss))

    def peak_rss(self) -> int:
        """The largest sampled sum of RSS over the tree, in bytes (0 without samples)."""
        return max((rss for _, _, rss in self.samples), default=0)

    def cores_timeline(self, bins: int = 10) -> list[float]:
        """Cores used in each of ``bins`` equal slices of the sampled run."""
        if len(self.samples) < 2:
            return []
        times = [t for t, _, _ in self.samples]
        cpus = [c for _, c, _ in self.samples]
        width = (times[-1] - times[0]) / bins
        edges = [times[0] + i * width for i in range(bins + 1)]
        at = [float(numpy.interp(edge, times, cpus)) for edge in edges]   # CPU s, interpolated between samples
        return [round((at[i + 1] - at[i]) / width, 2) for i in range(bins)]


def spread(values: Sequence[float], fmt: str = "{:.2f}", form: str = "{median} ({min}..{max})") -> str:
    """The median of ``values`` and their range as text, ``median (min..max)`` by default: the median, the
    minimum and the maximum each formatted with ``fmt`` and put into ``form``, which may also name ``n``,
    the number of values (e.g. ``"{median} (range {min}-{max}, n={n})"``)."""
    numbers = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return form.format(n=len(values), **{name: fmt.format(value) for name, value in numbers.items()})


def readme_sample(folder: Path) -> Path:
    """README's sample corpus (what ``make run`` makes with ``python -m tools.sample_corpus``) in ``folder``, made
    when it is not there yet."""
    if not (folder / "segmentation" / "manifest.csv").exists():
        log(f"making the sample corpus in {folder}")
        subprocess.run([sys.executable, "-m", "tools.sample_corpus", str(folder), "--overwrite"], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return folder


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
