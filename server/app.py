"""`pomoview serve`: wires the Spark session, the scheduler and the gRPC server together."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from concurrent import futures
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

from .errors import ServiceError
from .fsync import fsync_path
from .scheduler import Scheduler
from .service import ViewService
from .spark_session import SparkProvider, create_spark_session

log = logging.getLogger("pomoview")


# The store a data folder was last used with: its write-ahead log holds only what that store
# does not, so starting it with another store would silently lose the writes flushed there.
STORE_MARKER = "store-location"


class ConfigError(Exception):
    """A configuration the server cannot start with; the message says why."""


def store_folder(store: str | None, data_dir: Path) -> Path:
    """The local folder of the Parquet store: `store` is a path or a file:// URI; None means
    `<data_dir>/store`. Other URI schemes are refused: the store writes its manifest and
    renames its parts through the local file system."""
    if store is None:
        return (data_dir / "store").absolute()
    parts = urlsplit(store)
    if parts.scheme == "":
        return Path(store).expanduser().absolute()
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(
                f"store {store!r}: a file:// URI must name a local path (file:///path), "
                f"not the host {parts.netloc!r}"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"store {store!r}: a file:// URI takes no query or fragment")
        return Path(url2pathname(unquote(parts.path))).absolute()
    raise ConfigError(
        f"store {store!r}: {parts.scheme}:// is not supported; the store must be a local folder "
        "or a file:// URI, because it keeps its manifest and publishes its Parquet parts by "
        "atomic renames on the local file system. To use a Spark cluster, put the store on a "
        "file system mounted at the same path on every node."
    )


def check_store_marker(data_dir: Path, store_dir: Path) -> None:
    """Refuses a store other than the one `data_dir` was last used with; records it if new."""
    marker = data_dir / STORE_MARKER
    data_abs = data_dir.absolute()
    if marker.exists():
        # A store inside the data folder is recorded relative to it, so the folder can move.
        previous: Path | None = data_abs / marker.read_text(encoding="utf-8").strip()
    elif (data_dir / "store" / "manifest.json").exists():
        previous = data_abs / "store"  # a data folder older than the marker
    else:
        previous = None
    if previous is not None and previous.resolve() != store_dir.resolve():
        raise ConfigError(
            f"the data folder {data_dir} was last used with the store {previous}, not "
            f"{store_dir}: its write-ahead log holds only the writes that store lacks. Start "
            f"with --store {previous}, or, if you moved that store, write its new location "
            f"into {marker}"
        )
    if not marker.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        tmp = marker.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            inside = store_dir.resolve().is_relative_to(data_abs.resolve())
            recorded = store_dir.resolve().relative_to(data_abs.resolve()) if inside else store_dir
            f.write(f"{recorded}\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(marker)
        fsync_path(data_dir)


def serve(
    *,
    data_dir: Path,
    host: str = "127.0.0.1",
    port: int = 7878,
    program: Path | None = None,
    spark_master: str = "local[*]",
    flush_interval: float = 5.0,
    store: str | None = None,
    origins: Mapping[str, str] | None = None,
) -> None:
    """Runs the server until SIGINT or SIGTERM. Prints `pomoview listening on HOST:PORT` when ready.

    `store` is a local folder or a file:// URI (default `<data_dir>/store`); `origins` says
    where each setting came from (flag, env or default), for the configuration log line.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # py4j logs every lost connection at INFO; a dead JVM is reported once, by the provider.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        store_dir = store_folder(store, data_dir)
        check_store_marker(data_dir, store_dir)
    except (ConfigError, OSError) as err:
        print(f"pomoview: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    origin = dict(origins or {})

    def setting(name: str, value: object) -> str:
        return f"{name}={value}" + (f" ({origin[name]})" if name in origin else "")

    log.info(
        "configuration: %s",
        ", ".join(
            [
                setting("data", data_dir.absolute()),
                setting("store", store_dir.as_uri()),
                setting("spark_master", spark_master),
                setting("host", host),
                setting("port", port),
                setting("flush_interval", f"{flush_interval}s"),
                setting("program", program if program is not None else "none"),
            ]
        ),
    )
    spark = SparkProvider(lambda: create_spark_session(spark_master))
    # The JVM takes seconds to boot: start it now so the first upquery does not wait for it.
    spark.start_in_background()
    scheduler = Scheduler(data_dir, spark, flush_interval=flush_interval, store_dir=store_dir)
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
