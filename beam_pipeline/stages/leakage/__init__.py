"""Splits you can trust (docs/leakage.md): ``group`` (GroupNearDuplicates: near-duplicate pairs, their components,
each pair's final split, the manifest's ``leakage`` section), ``find`` (FindNearPairs: bands of the hash),
``components`` (FindComponents: Hash-to-Min rounds), ``rerun`` (what a re-run compares and joins again, given its
parent's index), ``files`` (the version's sorted JSON-lines files) and ``drift`` (ProfileVersion: what changed since
the parent version). Their rules are core/leakage/."""
