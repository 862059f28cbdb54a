"""I/O: reading the input and writing the output, on every filesystem Beam knows (local, gs://, s3://).

``listing`` reads the input listing (.csv, .jsonl, .parquet) in ranges; ``folders`` matches folder
inputs' globs, one subfolder at a time; ``streams`` opens byte streams on any store (one S3 client per
thread, missing vs refused vs transient failures, empty objects, copying a local folder, a file's
version); ``files`` reads and writes whole files and folders; ``verdict_store`` keeps the verdict
cache's parts (docs/cache.md); ``stores`` is what the output folder needs beyond Beam's FileSystems,
per backend: the lock and the whole-file publish.

I/O imports only core (and Beam's and the stores' client libraries).
"""
