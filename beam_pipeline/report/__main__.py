"""``python -m beam_pipeline.report OUTPUT_DIR``: (re)write report.html and stats/<split>.tfrecord."""

import argparse
import posixpath
import sys
from typing import List

from beam_pipeline import console


def parser() -> argparse.ArgumentParser:
    limits_help = "(default: %(default)s)"
    p = argparse.ArgumentParser(
        prog="python -m beam_pipeline.report",
        description="Write OUTPUT_DIR/report.html, a self-contained page that shows a published dataset (counts, "
                    "rejects, classes before and after balancing, image sizes, shards, strata, a gallery, the "
                    "run's options), and OUTPUT_DIR/stats/<split>.tfrecord, the statistics as TFDV reads them. "
                    "Reads manifest.json, stats.json, the rejects files and a few shards; OUTPUT_DIR may be "
                    "local, gs:// or s3://.")
    p.add_argument("output_dir", metavar="OUTPUT_DIR", help="a published output folder (holds manifest.json)")
    p.add_argument("--report_path", help="write the page here instead of OUTPUT_DIR/report.html")
    p.add_argument("--no_statistics", action="store_true", help="do not (re)write OUTPUT_DIR/stats/*.tfrecord")
    p.add_argument("--max_shards", type=int, default=8, help="shards read for the gallery and image sizes "
                   + limits_help)
    p.add_argument("--max_shard_mb", type=int, default=512, help="record megabytes read from those shards "
                   + limits_help)
    p.add_argument("--gallery_per_class", type=int, default=6, help="examples shown per class " + limits_help)
    p.add_argument("--gallery_mb", type=float, default=2.5, help="encoded gallery images, in MB " + limits_help)
    console.add_log_level_arguments(p)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    console.configure(args.log_level)      # before Beam and tfx-bsl are imported
    import hashlib

    from apache_beam.io.filesystems import FileSystems

    from beam_pipeline.core import layout, paths
    from beam_pipeline.report import REPORT_NAME, ReportLimits, render_report, statistics_files
    from beam_pipeline.report.read import read_json, read_stats
    manifest_path = paths.join(args.output_dir, "manifest.json")
    if not FileSystems.exists(manifest_path):
        print(f"error: {manifest_path} does not exist: not a published output folder", file=sys.stderr)
        return 2
    manifest = read_json(manifest_path)
    # The published version folder (runs/<run_id>/); the output folder itself for manifests before versions.
    folder = paths.join(args.output_dir, manifest["data_dir"]) if manifest.get("data_dir") else args.output_dir
    # Where the manifest's paths are relative to: the output folder from format 3 on (core/layout.py).
    base = args.output_dir if manifest.get("format_version", 1) >= layout.OUTPUT_RELATIVE_FORMAT else folder
    published = manifest.get("files") or {}
    limits = ReportLimits(gallery_per_class=args.gallery_per_class, max_shards=args.max_shards,
                          max_shard_bytes=args.max_shard_mb << 20, gallery_bytes=int(args.gallery_mb * 1e6))
    outputs = {args.report_path or paths.join(folder, REPORT_NAME): render_report(manifest, args.output_dir, limits)}
    if not args.no_statistics:
        for relative, content in statistics_files(manifest, read_stats(args.output_dir, manifest)).items():
            outputs[paths.join(folder, relative)] = content
    for path, content in outputs.items():
        relative = paths.relative_to(base, path)
        listed = published.get(relative) if relative else None
        if listed and hashlib.sha256(content).hexdigest() != listed["sha256"]:
            print(f"error: {path} is published with its SHA-256 in manifest.json, and this rendering differs "
                  "(other options or a newer release); writing it would fail the dataset's verification. "
                  "Give --report_path to write the page elsewhere, or publish the dataset again", file=sys.stderr)
            return 2
    for path, content in outputs.items():
        with FileSystems.create(path) as handle:
            handle.write(content)
        print(f"wrote {path} ({len(content) / 1e6:.2f} MB)")
    return 0


def _brief(folder: str, written: List[str]) -> str:
    """``stats/{test,train,val}.tfrecord`` for files of one folder and suffix under ``folder``; else all paths."""
    inside = [path[len(folder):].lstrip("/") if path.startswith(folder) else path for path in written]
    heads = {posixpath.dirname(path) for path in inside}
    suffixes = {posixpath.splitext(path)[1] for path in inside}
    if len(inside) < 2 or len(heads) != 1 or len(suffixes) != 1:
        return ", ".join(inside)
    stems = ",".join(posixpath.splitext(posixpath.basename(path))[0] for path in inside)
    return posixpath.join(heads.pop(), f"{{{stems}}}{suffixes.pop()}")


if __name__ == "__main__":
    sys.exit(main())
