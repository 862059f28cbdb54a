"""I/O: reading the input and writing the output, on every filesystem Beam knows (local, gs://, s3://).

``listing`` reads the input listing (.csv, .jsonl, .parquet) and globs into pairs; ``streams`` opens
byte streams on any store (one S3 client per thread, missing vs refused vs transient failures, empty
objects, copying a local folder); ``files`` reads and writes whole files and folders; ``stores`` is what
the output folder needs beyond Beam's FileSystems, per backend: the lock and the whole-file publish.

I/O imports only core (and Beam's and the stores' client libraries).
"""
