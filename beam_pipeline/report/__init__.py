"""The dataset report (``report.html``) and TFDV-readable statistics of a published output folder.

Two entry points for the publish step, both deterministic (same artifacts, same bytes):

* ``render_report(manifest, folder) -> bytes`` and ``write_report(manifest, folder, path=None)``:
  one self-contained HTML page (inline CSS and images, no script, no network) that shows the
  count funnel, splits, classes before and after balancing, image sizes, RGB statistics, class
  presence per shard, strata, a gallery and the run's options. A few MB at most, whatever the
  corpus size (see ``ReportLimits``).
* ``statistics_files(manifest, stats) -> {relative path: bytes}`` and ``write_statistics``:
  ``stats/<split>.tfrecord``, a ``DatasetFeatureStatisticsList`` per split (see ``tfdv.py``).

``manifest`` is the manifest as a dict (it need not be on disk yet); ``output`` is the output folder,
below which its paths (shards, rejects, stats.json) resolve (core/layout.py), through Beam's FileSystems. The report is
meant to be written by the launcher, not by workers; its charts are drawn as SVG text (``svg.py``), without a
plotting library.

``python -m beam_pipeline.report OUTPUT_DIR`` rewrites both from the published artifacts.

Layout: ``data`` (what is shown, pure choices), ``read`` (bounded reads), ``images``, ``charts``,
``gallery`` and ``render`` (presentation), ``tfdv`` (the statistics protos), ``tfrecord`` (reader).
Imports are lazy, so that importing the package costs nothing until a report is made.
"""

from typing import Dict, List, Optional

from beam_pipeline.core import layout
from beam_pipeline.report.data import ReportLimits

REPORT_NAME = layout.REPORT


def render_report(manifest: dict, output: str, limits: ReportLimits = ReportLimits(),
                  stats: Optional[dict] = None) -> bytes:
    """The report page, UTF-8 encoded, for the dataset ``manifest`` of the output folder ``output``.

    ``stats`` is the stats.json dict when the caller holds it; otherwise it is read from the output.
    """
    from beam_pipeline.report.read import gather
    from beam_pipeline.report.render import render_html
    return render_html(gather(manifest, output, limits, stats), limits).encode("utf-8")


def write_report(manifest: dict, output: str, path: Optional[str] = None,
                 limits: ReportLimits = ReportLimits(), stats: Optional[dict] = None) -> str:
    """Render the report and write it to ``path`` (default: report.html in the version folder); returns the
    path."""
    from apache_beam.io.filesystems import FileSystems

    from beam_pipeline.core import paths
    folder = paths.join(output, manifest["data_dir"]) if manifest.get("data_dir") else output
    path = path or paths.join(folder, REPORT_NAME)
    content = render_report(manifest, output, limits, stats)
    with FileSystems.create(path) as handle:
        handle.write(content)
    return path


def statistics_files(manifest: dict, stats: Optional[dict] = None) -> Dict[str, bytes]:
    """``{"stats/<split>.tfrecord": bytes}``: each split's DatasetFeatureStatisticsList as TFDV loads it."""
    from beam_pipeline.report import tfdv
    return tfdv.statistics_files(manifest, stats)


def write_statistics(manifest: dict, folder: str, stats: Optional[dict] = None) -> List[str]:
    """Write ``statistics_files`` under ``folder`` (the version folder); returns the paths written."""
    from beam_pipeline.report import tfdv
    return tfdv.write_statistics(manifest, folder, stats)
