"""The options of re-runs: the verdict cache (docs/cache.md) and versions that keep their parent's shards
(docs/incremental.md). Part of CorpusOptions (launcher/options.py), which calls :func:`add_rerun_arguments`."""


def add_rerun_arguments(parser) -> None:
    cache = parser.add_argument_group("verdict cache (docs/cache.md)")
    cache.add_argument(
        "--cache_dir", default=None,
        help="Where the verdict cache lives: every validated pair's verdict and summary, keyed by its files' "
             "content and the options that change a check, so that a later run reuses them instead of decoding "
             "the pair again (a run on a grown corpus, a re-run after a kill). Default OUTPUT/cache, which "
             "re-running the same command with --overwrite uses with no new flag. Local, gs:// or s3://; one "
             "cache per output.")
    versions = parser.add_argument_group("versions (docs/incremental.md)")
    versions.add_argument(
        "--compact", default="auto", choices=("auto", "never", "all"),
        help="A re-run keeps the records of its parent version's shards that did not change, writes new shards "
             "for the rest, and records the parent's records that are gone as deleted (docs/incremental.md). "
             "auto (default): a kept shard with less than half of its records live, and a group's shards under "
             "a quarter of --target_shard_bytes once there are more than 4, are written again into full ones. "
             "A re-run after a kill takes the killed run's spill files as shards (hard links, on a local disk), "
             "unless fewer than half their records would be live (auto). never: keep every shard and adopt "
             "every spill file. all: write every record again, as a fresh run (the same shard bytes), and adopt "
             "nothing.")
    versions.add_argument(
        "--on_damaged_parent", default="rebuild", choices=("rebuild", "fail"),
        help="Before a re-run keeps the published version's shards, it checks each one it would keep, with its keys "
             "file and class-index part: there, of its size, and unchanged since it was published (its recorded "
             "version: size, mtime and inode, or the object's generation or ETag; a file whose version moved is "
             "read and its SHA-256 compared). rebuild (default): a missing or damaged shard is not kept, and its "
             "records are written again from their sources (the summary names it). fail: stop before anything is "
             "written, naming the file (docs/recovery.md).")
    versions.add_argument(
        "--skip_unchanged", default="auto", choices=("auto", "always", "never"),
        help="A re-run first looks whether anything changed since the published version: the options that shape "
             "the dataset, the package versions and this pipeline's code, the listing file, every file the version "
             "publishes, and each selected pair's files (one version each: size, mtime, inode and ctime, or the "
             "object's generation or ETag). When nothing did, it publishes nothing, says so in one line, and "
             "exits in seconds, before TensorFlow or any worker starts (docs/incremental.md). auto (default): "
             "look where the published version holds at most 2,000,000 pairs on a local disk or 100,000 on "
             "gs:// and s3://, and where the input is a listing, class folders or a layout's split files; else "
             "run. always: look whatever the size. never: always run the pipeline (a new version, which keeps "
             "every record of its parent).")
    cache.add_argument(
        "--no_cache", dest="use_cache", action="store_false", default=True,
        help="Validate every pair afresh, and neither read nor write the verdict cache.")
    cache.add_argument(
        "--spill", default="auto", choices=("auto", "always", "never"),
        help="What validation keeps for the writer in the cache (docs/cache.md). auto (default): each pair's "
             "record, so the writer copies it instead of reading the files again (and a re-run after a kill "
             "adopts the killed run's records as shards without a copy), while the local disk "
             "of the cache keeps room for the shards (every selected pair at the mean size so far, plus 16 MB); "
             "once it would not, the writer reads the remaining pairs' files again, and the summary says how "
             "many. On gs:// and s3:// auto keeps them all. always: keep them all on any disk (until the "
             "commit the cache then holds the new pairs' bytes a second time). never: verdicts only; the "
             "writer reads every file again and checks its digest.")
    cache.add_argument(
        "--revalidate", action="store_true", default=False,
        help="Read and hash every selected file, and reuse a cached verdict only for the very same bytes: for "
             "files changed in ways their size, modification time, inode and ctime (or object generation, "
             "ETag) do not show. Costs a read of every file, not a decode.")
    cache.add_argument(
        "--cache_audit", type=float, default=0.0,
        help="The share (0..1) of cache hits whose files are read and hashed all the same, drawn anew each run, "
             "as a sampled check of the pre-key. Default 0.")
