"""ComputeStats: exact train-split statistics with tf.Transform, through TFXIO.

Input: unique ValidPair. The train pairs become small summary Examples (no
pixels: the encoded bytes are left empty) that TFXIO turns into Arrow record
batches for ``tft_beam.AnalyzeDataset``. Outputs:

* ``<output>/transform/``: ``transform_fn/``, ``transformed_metadata/`` and the
  raw ``metadata/``, which ``tft.TFTransformOutput`` loads;
* a singleton PCollection with the stats dict (also written as stats.json by
  PublishOutputs), read back from the analysis by transforming one empty
  example: the totals are the graph's own constants.
"""

import apache_beam as beam
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils
from tfx_bsl.public import tfxio

from beam_pipeline.core import paths
from beam_pipeline.core.example import bytes_feature, encode_example, int64_feature, summary_example
from beam_pipeline.core.records import ValidPair
from beam_pipeline.core.stats import build_stats
from beam_pipeline.options import CorpusConfig
from beam_pipeline.preprocessing import SCALAR_TOTALS, STATS_PREFIX, bound_preprocessing_fn, raw_feature_spec

TRANSFORM_DIR = "transform"
STATS_SPLIT = "train"
_TELEMETRY = ["beam_pipeline", "ComputeStats"]


def transform_dir(output: str) -> str:
    return paths.join(output, TRANSFORM_DIR)


def _is_stats_split(pair: ValidPair) -> bool:
    return pair.ref.split == STATS_SPLIT


def empty_raw_example(spec: dict) -> bytes:
    """A raw Example with empty bytes and zero numbers: transforming it reads out the totals."""
    values = {}
    for name, feature in spec.items():
        size = feature.shape[0] if feature.shape else 1
        values[name] = bytes_feature([b""] * size) if feature.dtype.name == "string" else int64_feature([0] * size)
    return encode_example(values)


class ExtractTotalsFn(beam.DoFn):
    """Transformed record batch of the empty example -> stats dict (see core/stats.py)."""

    def __init__(self, config: CorpusConfig):
        self._config = config

    def process(self, transformed):
        record_batch, _ = transformed
        columns = record_batch.to_pydict()
        totals = {}
        for name, values in columns.items():
            if name.startswith(STATS_PREFIX):
                total = name[len(STATS_PREFIX):]
                # Every output arrives as a list per example; scalars are lists of one value.
                totals[total] = values[0][0] if total in SCALAR_TOTALS else values[0]
        config = self._config
        yield build_stats(totals, config.task, config.num_classes, config.limits.ignore_label,
                          config.class_names)


class ComputeStats(beam.PTransform):
    """``stats, written = unique_pairs | ComputeStats(config, temp_dir)``."""

    def __init__(self, config: CorpusConfig, temp_dir: str):
        super().__init__()
        self._config = config
        self._temp_dir = temp_dir

    def expand(self, pairs):
        config = self._config
        spec = raw_feature_spec(config.task, config.num_classes)
        schema = schema_utils.schema_from_feature_spec(spec)
        source = tfxio.TFExampleBeamRecord(physical_format="inmem", telemetry_descriptors=_TELEMETRY,
                                           schema=schema)
        output = transform_dir(config.output)
        with tft_beam.Context(temp_dir=self._temp_dir, force_tf_compat_v1=False):
            summaries = (pairs
                         | "KeepTrainSplit" >> beam.Filter(_is_stats_split)
                         | "ToSummaryExamples" >> beam.Map(summary_example)
                         # serialized tf.Example without pixels
                         | "ToRecordBatches" >> source.BeamSource())
                         # pyarrow.RecordBatch
            transform_fn = ((summaries, source.TensorAdapterConfig())
                            | "AnalyzeDataset" >> tft_beam.AnalyzeDataset(
                                bound_preprocessing_fn(config.task, config.num_classes)))
            # (transform_fn path, transformed metadata)
            written = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(output)
            raw_written = (dataset_metadata.DatasetMetadata(schema)
                           | "WriteRawMetadata" >> tft_beam.WriteMetadata(
                               paths.join(output, "metadata"), pipeline=pairs.pipeline))
            empty_source = tfxio.TFExampleBeamRecord(physical_format="inmem", telemetry_descriptors=_TELEMETRY,
                                                     schema=schema)
            empty = (pairs.pipeline
                     | "OneEmptyExample" >> beam.Create([empty_raw_example(spec)])
                     | "EmptyToRecordBatch" >> empty_source.BeamSource())
            transformed, _ = (((empty, empty_source.TensorAdapterConfig()), transform_fn)
                              | "ReadOutTotals" >> tft_beam.TransformDataset(output_record_batches=True))
            # (RecordBatch of the transformed empty example, passthrough)
            stats = transformed | "BuildStats" >> beam.ParDo(ExtractTotalsFn(config))
            # stats dict
        return stats, (written, raw_written) | "TransformOutputWritten" >> beam.Flatten()
