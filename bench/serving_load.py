"""Load on ``python -m trainer.serve``: N concurrent clients x M requests of real photographs, clean and with
10 % hostile clients added (issue 29).

What is measured
    A fresh server per run (``python -m trainer.serve`` with its default limits, on 127.0.0.1 only) serves a
    classification model. N good clients, each on its own kept-alive connection, send M predict requests
    one after the other, each one 480x360 JPEG photograph (tools/photo_corpus.py: crops of scikit-image's
    photographs) in base64. Every answer is checked against the same model called directly in this
    process (class id equal, probabilities within 1e-5): a wrong or missing answer is counted, and the
    script exits 1 if there is one. Printed per run: requests/s (good requests over the run's wall time),
    p50 and p99 latency (request sent to answer read), the server's peak RSS (VmHWM) and CPU time per
    request, and the cores other processes used meanwhile (this machine is shared).

    The hostile runs add round(N / 10) hostile clients (at least 1), in a process of their own so that
    their Python does not slow the good clients' timing. Each keeps one slow sender open (a request's
    headers, then one body byte a second, until the server drops it after --request_timeout; then
    another) and loops over three other kinds, 20 times a second at most: a body declared as 300 MB and
    sent until the 413 comes, half a request and a hang-up, and a whole request and a hang-up before the
    answer. Clean and hostile runs take turns (clean first on even repeats, hostile first on odd ones);
    the medians over --repeats are printed with their range, and the hostile p99 over the clean p99 per
    pair of runs.

Against another version
    --baseline DIR runs a second server side by side: ``python -m trainer.serve`` from another checkout
    (e.g. ``git archive main | tar -x -C DIR``), with the same model and limits; --waitress a third, the
    same handler on waitress with waitress's own limits (bench/serving_waitress.py). Every repeat then runs
    the servers one after the other on the clean load, then on the hostile one (both orders reversed on odd
    repeats), so that the runs compared are next to each other in time, and the summary adds this version's
    figures over each other server's per repeat (requests/s, p50, p99 and the server's CPU time per request,
    which the machine's other load moves least), their median and range, and the ratio of the medians.

Model
    A Food-101-layout corpus (images/<class>/<id>.jpg, 4 class folders, --images photographs) through the
    pipeline (the class folders count themselves) and ``python -m trainer`` for a few steps of the default
    CNN, exported; cached in --workdir. Or --model EXPORT_DIR (a classification export).

Bounds
    At most 64 good clients and 2,000 requests each; each run stops issuing requests after --max_seconds.
    The server listens on 127.0.0.1 and every client connects there.

Run
    .venv/bin/python bench/serving_load.py --clients 16 --requests 25 --repeats 3
    .venv/bin/python bench/serving_load.py --clients 16 --requests 25 --repeats 3 --baseline /tmp/main_checkout
"""

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")          # this process calls the model for the expected answers
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, ensure_photo_corpus, log, machine_busy_seconds, spread  # noqa: E402

HOST = "127.0.0.1"
CLASSES = ("apple_pie", "pizza", "ramen", "sushi")
PREDICT = "/v1/models/model:predict"


# --------------------------------------------------------------------------
# The model and the photographs
# --------------------------------------------------------------------------
def prepare_model(workdir: Path, images: int) -> Path:
    """A classification export trained a few steps on a Food-101-layout photo corpus (cached)."""
    export = workdir / "job" / "export"
    if (export / "saved_model.pb").exists():
        return export
    photos, _ = ensure_photo_corpus(workdir, images)
    folders = workdir / "food" / "images"
    for index in range(images):
        target = folders / CLASSES[index % len(CLASSES)] / f"{index:06d}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_bytes((photos / "jpeg" / f"{index:06d}.jpg").read_bytes())
    log(f"the pipeline on {folders} (classification, {len(CLASSES)} class folders)")
    _run([sys.executable, "-m", "beam_pipeline", "--input", str(folders), "--output", str(workdir / "data"),
          "--task", "classification", "--overwrite"])
    log("python -m trainer: a few steps of the default CNN, exported")
    _run([sys.executable, "-m", "trainer", "--data", str(workdir / "data"), "--job_dir", str(workdir / "job"),
          "--epochs", "1", "--steps_per_epoch", "4", "--global_batch_size", "8", "--validation_steps", "1"])
    return export


def _run(command) -> None:
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")


def photographs(workdir: Path, count: int):
    """``count`` JPEG photographs (bytes) and their request bodies."""
    photos, _ = ensure_photo_corpus(workdir, count)
    images = [(photos / "jpeg" / f"{index:06d}.jpg").read_bytes() for index in range(count)]
    bodies = [json.dumps({"instances": [{"b64": base64.b64encode(image).decode()}]}).encode() for image in images]
    return images, bodies


def expected_answers(export: Path, images):
    """The model's own answer for each photograph, called in this process (not through the server)."""
    import tensorflow as tf
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    answers = []
    for image in images:
        out = serve(image_bytes=tf.constant([image]))
        answers.append((int(out["class_id"].numpy()[0]), out["probabilities"].numpy()[0].tolist()))
    return answers


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def start_server(export: Path, log_path: Path, server: str = "this", baseline: str = None):
    """On a free port: ``python -m trainer.serve`` of this checkout (``this``) or of the one at ``baseline``
    (``baseline``), or the handler on waitress (``waitress``, bench/serving_waitress.py)."""
    port = free_port()
    handle = log_path.open("w")
    root = Path(baseline) if server == "baseline" else ROOT
    command = ["bench/serving_waitress.py"] if server == "waitress" else ["-m", "trainer.serve"]
    environment = {**os.environ, "PYTHONPATH": str(root)}
    process = subprocess.Popen([sys.executable, *command, "--model", str(export), "--host", HOST,
                                "--port", str(port)], cwd=root, env=environment, stdout=handle,
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}; see {log_path}")
        with socket.socket() as sock:
            if sock.connect_ex((HOST, port)) == 0:
                return process, port
        time.sleep(0.2)
    raise SystemExit(f"the server did not listen within 300 s; see {log_path}")


def peak_rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024


# --------------------------------------------------------------------------
# Good clients
# --------------------------------------------------------------------------
def good_client(port, index, requests, bodies, answers, stop_at, results) -> None:
    """``requests`` predict requests on one kept-alive connection; (latency, right, status) each."""
    connection = http.client.HTTPConnection(HOST, port, timeout=300)
    for number in range(requests):
        if time.monotonic() > stop_at:
            break
        photo = (index * requests + number) % len(bodies)
        started = time.perf_counter()
        try:
            connection.request("POST", PREDICT, bodies[photo], {"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
            latency = time.perf_counter() - started
        except (OSError, http.client.HTTPException) as error:
            results.append((None, False, f"lost: {type(error).__name__}: {error}"))
            connection.close()
            connection = http.client.HTTPConnection(HOST, port, timeout=300)
            continue
        results.append((latency, response.status == 200 and _right(payload, answers[photo]), response.status))
    connection.close()


def _right(payload: bytes, expected) -> bool:
    prediction = json.loads(payload)["predictions"][0]
    class_id, probabilities = expected
    return prediction["class_id"] == class_id and all(
        abs(a - b) <= 1e-5 for a, b in zip(prediction["probabilities"], probabilities))


# --------------------------------------------------------------------------
# Hostile clients (in a process of their own)
# --------------------------------------------------------------------------
def _head(length: int) -> bytes:
    return (f"POST {PREDICT} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def slow_sender(port, body, stop, counts) -> None:
    while not stop.is_set():
        with socket.create_connection((HOST, port)) as sock:
            sock.sendall(_head(len(body)) + body[:100])
            for byte in body[100:]:
                if stop.wait(1.0) or select.select([sock], [], [], 0)[0]:
                    break                                   # stopping, or the server answered (408) and closed
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    break
        counts["slow"] = counts.get("slow", 0) + 1


def rapid_hostile(port, body, stop, counts) -> None:
    kinds = ("oversized", "half_then_hang_up", "whole_then_hang_up")
    action = 0
    while not stop.wait(0.05):
        kind = kinds[action % len(kinds)]
        action += 1
        try:
            with socket.create_connection((HOST, port), timeout=30) as sock:
                if kind == "oversized":
                    sock.sendall(_head(300_000_000))
                    while not select.select([sock], [], [], 0)[0]:
                        sock.send(b"x" * 65536)             # a client that sends before it reads
                    sock.recv(4096)
                elif kind == "half_then_hang_up":
                    sock.sendall(_head(len(body)) + body[:len(body) // 2])
                else:
                    sock.sendall(_head(len(body)) + body)
        except OSError:
            pass
        counts[kind] = counts.get(kind, 0) + 1


def hostile_process(port, clients, body, stop, queue) -> None:
    counts = {}
    threads = [threading.Thread(target=target, args=(port, body, stop, counts), daemon=True)
               for _ in range(clients) for target in (slow_sender, rapid_hostile)]
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(5)
    queue.put(counts)


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------
def one_run(kind, export, args, bodies, answers, workdir, number, server="this"):
    process, port = start_server(export, workdir / f"server_{number}_{server}_{kind}.log", server, args.baseline)
    try:
        warm = http.client.HTTPConnection(HOST, port, timeout=300)     # the first call traces the model
        warm.request("POST", PREDICT, bodies[0], {"Content-Type": "application/json"})
        if warm.getresponse().status != 200:
            raise SystemExit(f"the warm-up request failed; see {workdir}")
        warm.close()
        spawn = multiprocessing.get_context("spawn")        # not a fork of this process, which holds TensorFlow
        hostile, stop, queue = None, spawn.Event(), spawn.Queue()
        if kind == "hostile":
            hostile = spawn.Process(target=hostile_process,
                                              args=(port, max(1, round(args.clients / 10)), bodies[0], stop, queue))
            hostile.start()
            time.sleep(1.0)                                 # the slow senders are in before the good clients
        results, busy, started = [], machine_busy_seconds(), time.perf_counter()
        own = _cpu(process.pid)
        threads = [threading.Thread(target=good_client, args=(port, index, args.requests, bodies, answers,
                                                              time.monotonic() + args.max_seconds, results))
                   for index in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        server_cpu = _cpu(process.pid) - own
        others = max(0.0, (machine_busy_seconds() - busy - server_cpu) / seconds)
        counts = {}
        if hostile is not None:
            stop.set()
            counts = queue.get(timeout=60)
            hostile.join(10)
        rss = peak_rss_bytes(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
    latencies = sorted(latency for latency, _, _ in results if latency is not None)
    return {"kind": kind, "server": server, "requests": len(results), "seconds": seconds, "rps": len(latencies) / seconds,
            "p50": _quantile(latencies, 0.50), "p99": _quantile(latencies, 0.99), "rss": rss,
            "wrong": sum(1 for latency, right, _ in results if latency is not None and not right),
            "lost": sum(1 for latency, _, _ in results if latency is None),
            "planned": args.clients * args.requests, "others": others, "hostile": counts,
            "cpu": server_cpu / max(1, len(latencies))}


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quantile(values, q: float) -> float:
    """The nearest-rank quantile (the value below which a share q of the values lie)."""
    return values[min(len(values) - 1, max(0, int(-(-q * len(values) // 1)) - 1))] if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="good clients at once (default 16, at most 64)")
    parser.add_argument("--requests", type=int, default=25, help="requests per good client (default 25)")
    parser.add_argument("--repeats", type=int, default=3, help="clean and hostile runs each (default 3)")
    parser.add_argument("--images", type=int, default=200, help="photographs in the corpus and the requests")
    parser.add_argument("--max_seconds", type=float, default=600, help="a run stops issuing requests after this")
    parser.add_argument("--model", default=None, help="a classification export (default: made in --workdir)")
    parser.add_argument("--workdir", default=str(ROOT / "build" / "bench" / "serving_load"))
    parser.add_argument("--baseline", default=None,
                        help="a checkout of another version whose trainer.serve runs side by side (its ratios)")
    parser.add_argument("--waitress", action="store_true",
                        help="also run the handler on waitress with its own limits (bench/serving_waitress.py)")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 64 and 1 <= args.requests <= 2000 and args.repeats >= 1):
        parser.error("--clients must be 1..64, --requests 1..2000, --repeats >= 1")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    export = Path(args.model) if args.model else prepare_model(workdir, args.images)
    images, bodies = photographs(workdir, args.images)
    answers = expected_answers(export, images)
    servers = ("this",) + (("baseline",) if args.baseline else ()) + (("waitress",) if args.waitress else ())
    runs = []
    for repeat in range(args.repeats):
        for kind in (("clean", "hostile") if repeat % 2 == 0 else ("hostile", "clean")):
            for server in (servers if repeat % 2 == 0 else servers[::-1]):
                log(f"run {len(runs) + 1}: {server} {kind}")
                runs.append({**one_run(kind, export, args, bodies, answers, workdir, len(runs) + 1, server),
                             "repeat": repeat})
                _print_run(len(runs), runs[-1])
    return _summary(runs, args, bodies)


def _print_run(number, run) -> None:
    hostile = ", ".join(f"{kind} {count}" for kind, count in sorted(run["hostile"].items())) or "-"
    print(f"run {number} {run['server']:<8} {run['kind']:<7}  {run['rps']:6.1f} requests/s  p50 {run['p50'] * 1000:6.1f} ms  "
          f"p99 {run['p99'] * 1000:6.1f} ms  peak RSS {run['rss'] / 2 ** 20:6.0f} MiB  "
          f"server CPU {run['cpu'] * 1000:.0f} ms/request  answered {run['requests'] - run['lost']}/{run['planned']}, wrong {run['wrong']}, lost {run['lost']}  "
          f"other processes {run['others']:.2f} cores  hostile: {hostile}", flush=True)


def _ratios(runs, other: str) -> None:
    """This version's figures over ``other``'s, per kind of run: the ratio of the two runs of each repeat (taken
    side by side, under the same load from the machine's other processes), their median and range; then the
    ratio of the medians."""
    for kind in ("clean", "hostile"):
        def run_of(server, repeat):
            return next(run for run in runs if (run["server"], run["kind"], run["repeat"]) == (server, kind, repeat))
        repeats = sorted({run["repeat"] for run in runs})
        figures = []
        for key in ("rps", "p50", "p99", "cpu"):
            per_repeat = [run_of("this", r)[key] / run_of(other, r)[key] for r in repeats]
            of_medians = (statistics.median(run_of("this", r)[key] for r in repeats) /
                          statistics.median(run_of(other, r)[key] for r in repeats))
            name = {"rps": "requests/s", "cpu": "server CPU/request"}.get(key, key)
            figures.append(f"{name} {spread(per_repeat, '{:.2f}')} "
                           f"[of medians {of_medians:.2f}]")
        print(f"  this / {other}, {kind:<7} per repeat: {'; '.join(figures)}")


def _summary(runs, args, bodies) -> int:
    size = statistics.median(len(body) for body in bodies) / 1024
    print(f"\n{args.clients} good clients x {args.requests} requests, one 480x360 JPEG photograph a request "
          f"(median body {size:.0f} KiB); hostile runs add {max(1, round(args.clients / 10))} hostile client(s); "
          f"medians (min..max) of {args.repeats} runs each:")
    for server, kind in sorted({(run["server"], run["kind"]) for run in runs}, reverse=True):
        mine = [run for run in runs if run["kind"] == kind and run["server"] == server]
        print(f"  {server:<8} {kind:<7}  requests/s {spread([r['rps'] for r in mine], '{:.1f}')}  "
              f"p50 ms {spread([r['p50'] * 1000 for r in mine], '{:.0f}')}  "
              f"p99 ms {spread([r['p99'] * 1000 for r in mine], '{:.0f}')}  "
              f"peak RSS MiB {spread([r['rss'] / 2 ** 20 for r in mine], '{:.0f}')}")
    for other in ("baseline", "waitress"):
        if any(run["server"] == other for run in runs):
            _ratios(runs, other)
    runs_here = [run for run in runs if run["server"] == "this"]
    pairs = [(runs_here[i], runs_here[i + 1]) for i in range(0, len(runs_here) - 1, 2)]
    ratios = [next(r for r in pair if r["kind"] == "hostile")["p99"] / next(r for r in pair if r["kind"] == "clean")["p99"]
              for pair in pairs]
    print(f"  hostile p99 / clean p99, per pair of runs: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f}")
    bad = sum(run["wrong"] + run["lost"] + (run["planned"] - run["requests"]) for run in runs)
    print(f"  every answer right and none lost: {'yes' if bad == 0 else f'NO ({bad} wrong, lost or not sent)'}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
