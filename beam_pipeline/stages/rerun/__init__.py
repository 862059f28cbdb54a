"""The re-run's composites (docs/incremental.md): ``reuse`` (KeepParentRecords: which records of the parent
version stay where they are, which are written, deleted or compacted) and ``adopt`` (AdoptKilledSpill: a
killed run's spill files become shards of this version). Both sit between balancing and WriteShards; their
rules are core/rerun/."""
