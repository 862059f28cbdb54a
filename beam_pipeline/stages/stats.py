"""ComputeStats: exact train-split statistics with tf.Transform.

Input: unique ValidPair. The train pairs' summaries (core.stats.summary_values:
no pixels, the encoded bytes left empty) are batched into Arrow record batches
of the raw schema, the input of ``tft_beam.AnalyzeDataset``. The analysis waits
on a side input (the graph tf.Transform traces), so its input is held until
then: the summaries are held in files where they are made (stages/stats_rows.py,
the step ``STATISTICS_ROWS_STEP``, which stays on the workers when the
DirectRunner runs the rest of the statistics in the launcher), and only the
files' paths wait in the runner. Outputs:

* ``<version folder>/transform/``: ``transform_fn/``, ``transformed_metadata/`` and the
  raw ``metadata/``, which ``tft.TFTransformOutput`` loads. tf.Transform writes
  through TensorFlow's file layer, which has no s3:// in TF 2.21 (and
  tensorflow-io 0.37.1 does not load with it): for an s3:// output it writes on
  this machine's disk, which the workers share (the launcher refuses the run
  otherwise: core/runners.py), and ``CopyTransformOutput`` copies the files with
  Beam's filesystems, each read back and compared by SHA-256;
* a singleton PCollection with the stats dict (also written as stats.json by
  PublishOutputs). Its totals are read back from the transform graph itself,
  by transforming one empty row: they are the graph's own constants, so
  stats.json describes exactly what the graph (and so the trainer) uses.
"""

import os
import shutil
import tempfile
from typing import Optional

import apache_beam as beam
import pyarrow as pa
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils
from tfx_bsl.public import tfxio

from beam_pipeline import phases
from beam_pipeline.core import layout, paths
from beam_pipeline.core.runners import tensorflow_can_write
from beam_pipeline.core.stats import build_stats
from beam_pipeline.io import streams
from beam_pipeline.stages.preprocessing import (NORMALISATION, SCALAR_TOTALS, STATS_PREFIX, bound_preprocessing_fn,
                                                raw_feature_spec)
from beam_pipeline.stages.shuffle import ReadHeldRecords
from beam_pipeline.stages.specs import STATISTICS_ROWS_STEP, ShuffleSpec, StatsSpec
from beam_pipeline.stages.stats_rows import TrainRows

_TELEMETRY = ["beam_pipeline", "ComputeStats"]
MAX_BATCH = 1000        # summaries per record batch


def empty_values(spec: dict) -> dict:
    """A raw row of empty bytes and zero numbers: transforming it reads out the totals."""
    values = {}
    for name, feature in spec.items():
        size = feature.shape[0] if feature.shape else 1
        values[name] = [b""] * size if feature.dtype.name == "string" else [0] * size
    return values


class ToRecordBatchFn(beam.DoFn):
    """[raw row dict, ...] -> one pyarrow.RecordBatch of the raw schema."""

    def __init__(self, arrow_schema: pa.Schema):
        self._schema = arrow_schema

    def process(self, batch):
        phases.reached(phases.STATISTICS)
        columns = [pa.array([row[field.name] for row in batch], type=field.type) for field in self._schema]
        yield pa.RecordBatch.from_arrays(columns, schema=self._schema)


class ExtractTotalsFn(beam.DoFn):
    """Transformed record batch of the empty row -> stats dict (see core/stats.py)."""

    def __init__(self, spec: StatsSpec):
        self._spec = spec

    def process(self, transformed):
        record_batch, _ = transformed
        totals = {}
        for name, values in record_batch.to_pydict().items():
            total = name[len(STATS_PREFIX):]
            if name.startswith(STATS_PREFIX) and total not in NORMALISATION:
                # Every output arrives as a list per example; scalars are lists of one value.
                totals[total] = values[0][0] if total in SCALAR_TOTALS else values[0]
        spec = self._spec
        yield build_stats(totals, spec.task, spec.num_classes, spec.ignore_label, spec.class_names)


def local_stage(output: str, temp_dir: str) -> Optional[str]:
    """A new folder on this machine's disk for tf.Transform when TensorFlow cannot write ``output`` or
    ``temp_dir`` (s3://); None when it can write both. A local ``temp_dir`` holds it."""
    if tensorflow_can_write(output) and tensorflow_can_write(temp_dir):
        return None
    parent = temp_dir if not paths.split_scheme(temp_dir)[0] else None
    if parent:
        os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix="transform-stage-", dir=parent)


class CopyTransformOutputFn(beam.DoFn):
    """Runs once, after tf.Transform is done with its local stage: copy the transform output to
    ``target`` (each object read back and compared), remove the stage; yields the copied paths."""

    def __init__(self, stage: str, target: str):
        self._stage = stage
        self._target = target

    def process(self, _, written, stats):
        copied = streams.copy_tree(os.path.join(self._stage, layout.TRANSFORM_DIR), self._target)
        shutil.rmtree(self._stage, ignore_errors=True)
        for relative in sorted(copied):
            yield paths.join(self._target, relative)


class ComputeStats(beam.PTransform):
    """``stats, written = unique_pairs | ComputeStats(StatsSpec(data_dir, task, num_classes, ...), temp_dir,
    ShuffleSpec())``."""

    def __init__(self, spec: StatsSpec, temp_dir: str, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._temp_dir = temp_dir
        self._shuffle = shuffle

    def expand(self, pairs):
        spec = self._spec
        feature_spec = raw_feature_spec(spec.task, spec.num_classes)
        schema = schema_utils.schema_from_feature_spec(feature_spec)
        # Only for the Arrow schema and tensor representations TFXIO derives from the feature spec; nothing is
        # read through it.
        source = tfxio.TFExampleBeamRecord(physical_format="inmem", telemetry_descriptors=_TELEMETRY, schema=schema)
        to_batches = ToRecordBatchFn(source.ArrowSchema())
        stage = local_stage(spec.data_dir, self._temp_dir)
        output = layout.transform_dir(stage or spec.data_dir)
        temp_dir = os.path.join(stage, "tmp") if stage else self._temp_dir
        with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
            held = pairs | STATISTICS_ROWS_STEP >> TrainRows(spec.task, self._shuffle)
            # the train pairs' raw rows, in files until the analysis (which waits on its traced graph) reads them:
            # the runner holds their paths, not a row a pair (docs/scale.md)
            summaries = (held
                         | "ReadTrainRows" >> ReadHeldRecords(self._shuffle)
                         # raw row dict of a train pair
                         | "BatchSummaries" >> beam.BatchElements(max_batch_size=MAX_BATCH)
                         # [raw row dict, ...]
                         | "ToRecordBatches" >> beam.ParDo(to_batches))
                         # pyarrow.RecordBatch of the raw features, no pixels
            transform_fn = ((summaries, source.TensorAdapterConfig())
                            | "AnalyzeDataset" >> tft_beam.AnalyzeDataset(
                                bound_preprocessing_fn(spec.task, spec.num_classes)))
            # (transform_fn path, transformed metadata)
            written = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(output)
            raw_written = (dataset_metadata.DatasetMetadata(schema)
                           | "WriteRawMetadata" >> tft_beam.WriteMetadata(
                               paths.join(output, layout.RAW_METADATA_DIR), pipeline=pairs.pipeline))
            empty = (pairs.pipeline
                     | "OneEmptyRow" >> beam.Create([[empty_values(feature_spec)]])
                     | "EmptyToRecordBatch" >> beam.ParDo(to_batches))
            transformed, _ = (((empty, source.TensorAdapterConfig()), transform_fn)
                              | "ReadOutTotals" >> tft_beam.TransformDataset(output_record_batches=True))
            # (RecordBatch of the transformed empty row, passthrough)
            stats = transformed | "BuildStats" >> beam.ParDo(ExtractTotalsFn(spec))
            # stats dict
        done = (written, raw_written) | "TransformOutputWritten" >> beam.Flatten()
        # paths tf.Transform wrote
        if stage:
            done = (pairs.pipeline
                    | "Once" >> beam.Create([None])
                    | "CopyTransformOutput" >> beam.ParDo(
                        CopyTransformOutputFn(stage, layout.transform_dir(spec.data_dir)),
                        written=beam.pvalue.AsList(done), stats=beam.pvalue.AsList(stats)))
            # path of every transform file in the store
        return stats, done
