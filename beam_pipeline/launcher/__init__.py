"""The launcher: everything ``python -m beam_pipeline`` does on the machine that starts a run.

It reads and checks the options (``options``, ``config``), looks at the input and the output once and
picks the runner (``launch``, ``runners``), wires the stages into one pipeline and runs it (``pipeline``: the one
place that names every stage), shows its progress (``watch``), holds the output's lock and commits the
version it wrote (``commit``), or instead estimates a run (``plan``, ``--plan``), and prints the summary
(``summary``). ``cache`` claims and collects the verdict cache; ``memory`` keeps glibc's heap from growing in
every process of a run, and the garbage collector from scanning what a run imports and builds.

It imports the stages, the report, I/O and core; nothing below imports it.
"""
