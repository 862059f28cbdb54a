"""Every boto3 session of a process that imported beam_pipeline.io.streams shares botocore's data loader.

Beam's S3 filesystem makes a new session for each call; a session of its own parsed botocore's JSON models
again each time (beam_pipeline/io/sessions.py; bench/s3_sessions.py measures the difference)."""

import subprocess
import sys

from conftest import ROOT

SESSIONS = """
import threading
import boto3
import beam_pipeline.io.streams  # noqa: F401 - what the launcher and every worker import
from apache_beam.io.aws.clients.s3 import boto3_client

loaders, clients = [], []
def make():
    session = boto3.session.Session()
    loaders.append(session._session.get_component("data_loader"))
    clients.append(boto3_client.Client({"s3_region_name": "eu-west-1", "s3_endpoint_url": "http://127.0.0.1:9"}))
threads = [threading.Thread(target=make) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
make()
beam_loader = clients[0].client._loader
print(len({id(loader) for loader in loaders}), beam_loader is loaders[0],
      len({id(client.client) for client in clients}),
      clients[0].client.meta.region_name, clients[0].client.meta.endpoint_url)
"""


def test_sessions_made_anywhere_share_one_loader_and_keep_their_own_clients():
    completed = subprocess.run([sys.executable, "-c", SESSIONS], cwd=ROOT, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.split() == ["1", "True", "5", "eu-west-1", "http://127.0.0.1:9"]
