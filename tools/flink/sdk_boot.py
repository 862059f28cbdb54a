#!/usr/bin/env python3
"""Start one Python SDK worker the way Beam's SDK container does: with the job's pipeline options.

Beam's external worker pool (``apache_beam.runners.worker.worker_pool_main``) starts a bare
``SdkHarness`` for each worker unless it is given a ``--container_executable``. A bare harness never
receives the job's pipeline options, so Beam's filesystems in it have none: on s3:// every call
fails with "Must provide one of client or options" (gs:// and local paths take their settings from
the environment and do not notice). Given this script as ``--container_executable``, the pool runs
it with the container contract's flags; it asks the runner's provision service for the job's
pipeline options, as Beam's container boot program does, and hands over to ``sdk_worker_main``,
which passes them to the filesystems (``FileSystems.set_options``) before any bundle runs.

    python -m apache_beam.runners.worker.worker_pool_main --service_port=PORT \\
        --container_executable=tools/flink/sdk_boot.py

The code itself is not fetched from the job's artifacts: the worker imports the packages of the
interpreter and PYTHONPATH that start the pool (tools/flink/cluster.py WorkerPool).
"""

import argparse
import os
import sys


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--id", required=True)
    parser.add_argument("--logging_endpoint", required=True)
    parser.add_argument("--artifact_endpoint", required=True)
    parser.add_argument("--provision_endpoint", required=True)
    parser.add_argument("--control_endpoint", required=True)
    parser.add_argument("--semi_persist_dir", default="/tmp")
    args, _ = parser.parse_known_args(argv)

    import grpc
    from apache_beam.portability.api import (beam_provision_api_pb2, beam_provision_api_pb2_grpc,
                                             endpoints_pb2)
    from google.protobuf import json_format, text_format

    with grpc.insecure_channel(args.provision_endpoint) as channel:
        info = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel).GetProvisionInfo(
            beam_provision_api_pb2.GetProvisionInfoRequest(), metadata=[("worker_id", args.id)]).info

    def descriptor(url: str) -> str:
        return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))

    env = dict(os.environ)
    env.update({
        "WORKER_ID": args.id,
        "PIPELINE_OPTIONS": json_format.MessageToJson(info.pipeline_options),
        "SEMI_PERSISTENT_DIRECTORY": args.semi_persist_dir,
        "LOGGING_API_SERVICE_DESCRIPTOR": descriptor(info.logging_endpoint.url or args.logging_endpoint),
        "CONTROL_API_SERVICE_DESCRIPTOR": descriptor(info.control_endpoint.url or args.control_endpoint),
        "RUNNER_CAPABILITIES": " ".join(info.runner_capabilities),
    })
    python = sys.executable
    os.execve(python, [python, "-m", "apache_beam.runners.worker.sdk_worker_main"], env)


if __name__ == "__main__":
    main()
