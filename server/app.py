"""`pomoview serve`: wires the Spark session, the scheduler and the gRPC server together."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

from .errors import ServiceError
from .scheduler import Scheduler
from .service import ViewService
from .spark_session import SparkProvider, create_spark_session

log = logging.getLogger("pomoview")


def serve(
    *,
    data_dir: Path,
    host: str = "127.0.0.1",
    port: int = 7878,
    program: Path | None = None,
    spark_master: str = "local[*]",
    flush_interval: float = 5.0,
) -> None:
    """Runs the server until SIGINT or SIGTERM. Prints `pomoview listening on HOST:PORT` when ready."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spark = SparkProvider(lambda: create_spark_session(spark_master))
    # The JVM takes seconds to boot: start it now so the first upquery does not wait for it.
    spark.start_in_background()
    scheduler = Scheduler(data_dir, spark, flush_interval=flush_interval)
    if program is not None:
        try:
            scheduler.install(program.read_text(), program.name)
        except ServiceError as err:
            print(f"pomoview: cannot install {program}:\n{err.message}", file=sys.stderr)
            spark.stop()
            raise SystemExit(2) from None
    scheduler.start()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="grpc"))
    pb_grpc.add_ViewServiceServicer_to_server(ViewService(scheduler), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    service_name = pb.DESCRIPTOR.services_by_name["ViewService"].full_name
    reflection.enable_server_reflection(
        (service_name, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        print(f"pomoview: cannot listen on {host}:{port}", file=sys.stderr)
        raise SystemExit(1)
    server.start()
    for name in ("", service_name):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    print(f"pomoview listening on {host}:{bound}", flush=True)
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    done.wait()
    log.info("shutting down")
    health_servicer.enter_graceful_shutdown()
    server.stop(grace=2).wait()
    scheduler.stop()
    spark.stop()
