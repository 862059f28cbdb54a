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
    from apache_beam.io.filesystems import FileSystems

    from beam_pipeline.core import paths
    from beam_pipeline.report import ReportLimits, write_report, write_statistics
    from beam_pipeline.report.read import read_json, read_stats
    manifest_path = paths.join(args.output_dir, "manifest.json")
    if not FileSystems.exists(manifest_path):
        print(f"error: {manifest_path} does not exist: not a published output folder", file=sys.stderr)
        return 2
    manifest = read_json(manifest_path)
    limits = ReportLimits(gallery_per_class=args.gallery_per_class, max_shards=args.max_shards,
                          max_shard_bytes=args.max_shard_mb << 20, gallery_bytes=int(args.gallery_mb * 1e6))
    path = write_report(manifest, args.output_dir, args.report_path, limits)
    size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
    line = f"wrote {path} ({size / 1e6:.2f} MB)"
    if not args.no_statistics:
        written = write_statistics(manifest, args.output_dir, read_stats(args.output_dir, manifest))
        line += f" and {_brief(args.output_dir, written)} (statistics for TFDV)"
    print(line)
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
