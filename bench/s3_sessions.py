"""What sharing botocore's data loader between boto3 sessions saves a run on S3 (beam_pipeline/io/sessions.py).

Beam's S3 filesystem builds a new boto3 session for each listing, write, delete and existence check, and
each new session parsed botocore's JSON models again. ``beam_pipeline.io.streams`` now makes every session
of the process share one loader. Two measurements, the two ways interleaved in each repeat:

    client     CPU seconds per Beam S3 client (``boto3_client.Client``, what S3FileSystem makes per call),
               ``--clients`` of them made in a fresh process, after one made untimed
    run        ``python -m beam_pipeline`` (one process, worker threads) on ``--pairs`` pairs of the photo
               corpus (tools/photo_corpus.py) uploaded to a local S3 server (moto, tools/objstore), output
               to the same server: wall seconds and the run's CPU seconds

``own`` is a session's own loader, as before (the call that shares it is made a no-op before the pipeline
is imported); ``shared`` is the product as it is. Printed: median (min..max) over ``--repeats`` and the
ratio shared/own within each repeat.

    python bench/s3_sessions.py --pairs 100 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, ensure_photo_corpus, log, photo_listing, positive, spread

sys.path.insert(0, str(ROOT))
from tools.objstore.servers import start_moto  # noqa: E402
from tools.objstore.stores import S3Store  # noqa: E402

WAYS = ("own", "shared")
NO_SHARING = "import beam_pipeline.io.sessions as s; s.share_botocore_loader = lambda: None\n"
CLIENTS = """
import sys, time
{prelude}
import beam_pipeline.io.streams  # noqa: F401 - the product's import, which shares the loader
from apache_beam.io.aws.clients.s3 import boto3_client
options = {{"s3_region_name": "us-east-1", "s3_endpoint_url": "http://127.0.0.1:9"}}
boto3_client.Client(options)
started = time.process_time()
for _ in range(int(sys.argv[1])):
    boto3_client.Client(options)
print((time.process_time() - started) / int(sys.argv[1]))
"""
RUN = "{prelude}import runpy, sys; sys.argv[0] = 'beam_pipeline'; runpy.run_module('beam_pipeline', run_name='__main__')\n"


def prelude(way: str) -> str:
    return NO_SHARING if way == "own" else ""


def client_seconds(way: str, clients: int) -> float:
    completed = subprocess.run([sys.executable, "-W", "ignore", "-c", CLIENTS.format(prelude=prelude(way)),
                                str(clients)], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(completed.stdout.split()[-1])


def run_seconds(way: str, store: S3Store, listing_url: str, output_url: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", RUN.format(prelude=prelude(way)), "--input", listing_url, "--output", output_url,
         "--num_classes", "8", "--direct_running_mode", "multi_threading", "--max_reject_fraction", "1",
         "--log_level", "warning", *store.flags()],
        cwd=ROOT, env={**os.environ, **store.env()}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(f"the {way} run failed:\n{completed.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def upload_pairs(store: S3Store, photo: Path, listing: Path, bucket: str) -> str:
    store.make_bucket(bucket)
    lines = listing.read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        for relative in line.split(",")[:2]:
            store.put(bucket, f"corpus/{relative}", (photo / relative).read_bytes())
    store.put(bucket, "corpus/listing.csv", listing.read_bytes())
    return store.url(bucket, "corpus/listing.csv")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=positive, default=100, help="photo pairs uploaded to the S3 server")
    parser.add_argument("--clients", type=positive, default=20, help="clients made per process (client)")
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--json", type=Path, help="write the measurements here too")
    args = parser.parse_args(argv)

    photo, _ = ensure_photo_corpus(args.workdir, args.pairs)
    listing = photo_listing(photo, "png", args.pairs)
    results = {way: {"client": [], "wall": [], "cpu": []} for way in WAYS}
    ratios = {"client": [], "wall": [], "cpu": []}
    with tempfile.TemporaryDirectory() as logs:
        server = start_moto(logs)
        try:
            store = S3Store(server.url)
            listing_url = upload_pairs(store, photo, listing, "bench")
            for repeat in range(args.repeats):
                order = WAYS if repeat % 2 == 0 else WAYS[::-1]
                measured = {}
                for way in order:
                    client = client_seconds(way, args.clients)
                    wall, cpu = run_seconds(way, store, listing_url, store.url("bench", f"out-{way}-{repeat}"))
                    measured[way] = {"client": client, "wall": wall, "cpu": cpu}
                    log(f"repeat {repeat + 1} {way}: {client * 1000:.1f} ms a client, run {wall:.1f} s wall, "
                        f"{cpu:.1f} s CPU")
                for way in WAYS:
                    for key, value in measured[way].items():
                        results[way][key].append(value)
                for key in ratios:
                    ratios[key].append(measured["shared"][key] / measured["own"][key])
        finally:
            server.stop()

    print(f"{args.pairs} photo pairs on a local S3 server (moto), {args.repeats} repeats, median (min..max):")
    print(f"{'':8} {'ms a client':>22} {'run wall s':>22} {'run CPU s':>22}")
    for way in WAYS:
        print(f"{way:8} {spread([v * 1000 for v in results[way]['client']], '{:.1f}'):>22} "
              f"{spread(results[way]['wall'], '{:.1f}'):>22} {spread(results[way]['cpu'], '{:.1f}'):>22}")
    print(f"{'shared/own':8} {spread(ratios['client']):>22} {spread(ratios['wall']):>22} {spread(ratios['cpu']):>22}")
    if args.json:
        args.json.write_text(json.dumps({"pairs": args.pairs, "results": results, "ratios": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
