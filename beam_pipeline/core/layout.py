"""Where everything lives in an output folder: one name for each published file and working folder."""

from beam_pipeline.core import paths

DATASET_MANIFEST = "manifest.json"          # written last: a reader that sees it sees a complete dataset
STATS = "stats.json"
TRANSFORM_DIR = "transform"                 # tf.Transform: transform_fn/, transformed_metadata/, metadata/
RAW_METADATA_DIR = "metadata"               # inside TRANSFORM_DIR: the raw feature schema
REJECTS_PREFIX = "rejects/rejects"          # + -SSSSS-of-NNNNN.jsonl
CLASS_INDEX_PREFIX = "class_index/class_index"
STAGING_DIR = ".staging"                    # shards while they are written; moved into place at publish
TEMP_DIR = ".tmp"                           # tf.Transform's temporary files without --temp_location
REFUSAL = "refusal.json"                    # inside STAGING_DIR: why a refused run wrote nothing


def staging_dir(output: str) -> str:
    return paths.join(output, STAGING_DIR)


def transform_dir(output: str) -> str:
    return paths.join(output, TRANSFORM_DIR)


def temp_dir(output: str) -> str:
    return paths.join(output, TEMP_DIR)
