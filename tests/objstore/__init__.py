"""Test plumbing for object stores: local S3 and GCS servers, a fault-injecting proxy, the corpus in buckets.

Not product code, and not shipped: see fixtures.py for what the tests get, servers.py for the processes.
"""
