"""Apache Beam pipeline: raw image corpus -> validated, sharded TFRecords + manifest.json."""
