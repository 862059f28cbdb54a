"""The launcher's part in re-runs: ``options`` (the re-run and cache options of ``--help``) and ``cache`` (the
verdict cache's owner and its collection after the commit). The rules are core/rerun/, the files io/cache/."""
