"""Local object-store servers for tests and benchmarks: moto's S3, the patched GCS emulator, a fault proxy.

Not product code and not shipped (setup.py packages only beam_pipeline and trainer). servers.py starts
and stops the processes; stores.py is the tests' and benchmarks' view of a bucket (URLs, the Beam
options and environment a run needs, set-up and check clients). The pytest fixtures are in
tests/objstore_fixtures.py.
"""
