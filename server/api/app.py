"""`pomoview serve`: wires the Spark session, the scheduler and the gRPC server together."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.api.listen import listen
from pomoview.server.api.replica_process import ReplicaFront, ReplicaStartError
from pomoview.server.api.security import SecurityConfigError, ServerSecurity, is_loopback
from pomoview.server.api.service import ViewService, add_view_service
from pomoview.server.disk.fileio import OS_FILES
from pomoview.server.disk.fsync import fsync_path
from pomoview.server.errors import ServiceError
from pomoview.server.limits.requests import Limits
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.replica.feed import ReplicaFeed
from pomoview.server.scheduler.applier import DEFAULT_MAX_APPLY_LAG
from pomoview.server.scheduler.gc_policy import REFREEZE, GcPauses, freeze_at_start
from pomoview.server.scheduler.gil_policy import SWITCH_INTERVAL, set_switch_interval
from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.spark.conf import SparkConf, driver_address_defaults
from pomoview.server.spark.deadline import DEFAULT_READ_TIMEOUT, DEFAULT_WRITE_TIMEOUT, SparkTimeouts
from pomoview.server.spark.executors import ExecutorWatch, SparkStatus
from pomoview.server.spark.priority import DEFAULT_SPARK_NICE
from pomoview.server.spark.session import SparkProvider, create_spark_session
from pomoview.server.store.fs import StoreLocationError, split_location
from pomoview.server.views.memory_budget import format_bytes
from pomoview.server.views.subscriptions import DEFAULT_BUFFER_ROWS
from pomoview.server.views.view_state import DEFAULT_WHOLE_SOURCE_ROWS

log = logging.getLogger("pomoview")


# The store a data folder was last used with: its write-ahead log holds only what that store
# does not, so starting it with another store would silently lose the writes flushed there.
STORE_MARKER = "store-location"


class ConfigError(Exception):
    """A configuration the server cannot start with; the message says why."""


def store_location(store: str | None, data_dir: Path) -> Path | str:
    """Where the Parquet store lives: a local folder (a Path) for a path or a file:// URI,
    `<data_dir>/store` for None; any other URI as given (a str), to be opened with the Spark
    JVM's Hadoop client (hdfs://, s3a://, ...; `hadoop+URI` forces a URI through it). A
    location that is neither a path nor an absolute URI is refused with ConfigError; whether
    Hadoop can use a URI is only known once the store opens (`StoreLocationError`)."""
    if store is None:
        return (data_dir / "store").absolute()
    try:
        kind, where = split_location(store)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return Path(where) if kind == "local" else store


def _recorded_location(text: str, data_abs: Path) -> Path | str:
    try:
        if split_location(text)[0] == "hadoop":
            return text
    except ValueError:
        pass
    return data_abs / text  # relative: inside the data folder; an absolute path stays itself


def _same_store(a: Path | str, b: Path | str) -> bool:
    if isinstance(a, Path) and isinstance(b, Path):
        return a.resolve() == b.resolve()
    return isinstance(a, str) and isinstance(b, str) and a.rstrip("/") == b.rstrip("/")


def check_store_marker(data_dir: Path, store: Path | str) -> None:
    """Refuses a store other than the one `data_dir` was last used with; records it if new."""
    marker = data_dir / STORE_MARKER
    data_abs = data_dir.absolute()
    previous: Path | str | None
    if marker.exists():
        # A store inside the data folder is recorded relative to it, so the folder can move.
        previous = _recorded_location(marker.read_text(encoding="utf-8").strip(), data_abs)
    elif (data_dir / "store" / "manifest.json").exists():
        previous = data_abs / "store"  # a data folder older than the marker
    else:
        previous = None
    if previous is not None and not _same_store(previous, store):
        raise ConfigError(
            f"the data folder {data_dir} was last used with the store {previous}, not "
            f"{store}: its write-ahead log holds only the writes that store lacks. Start "
            f"with --store {previous}, or, if you moved that store, write its new location "
            f"into {marker}"
        )
    if not marker.exists():
        OS_FILES.makedirs_durably(data_dir)  # acknowledged writes will live in it
        tmp = marker.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            if isinstance(store, Path):
                inside = store.resolve().is_relative_to(data_abs.resolve())
                recorded: Path | str = store.resolve().relative_to(data_abs.resolve()) if inside else store
            else:
                recorded = store
            f.write(f"{recorded}\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(marker)
        fsync_path(data_dir)


GRPC_THREADS = 256


def serve(
    *,
    data_dir: Path,
    host: str = "127.0.0.1",
    port: int = 7878,
    metrics_port: int | None = None,
    program: Path | None = None,
    spark_master: str = "local[*]",
    spark_conf: SparkConf | None = None,
    spark_nice: int = DEFAULT_SPARK_NICE,
    flush_interval: float = 5.0,
    max_apply_lag: float = DEFAULT_MAX_APPLY_LAG,
    store: str | None = None,
    origins: Mapping[str, str] | None = None,
    full_state: bool = False,
    binary_joins: bool = False,
    memory_budget: int | None = None,
    spark_timeout: float | None = DEFAULT_READ_TIMEOUT,
    spark_write_timeout: float | None = DEFAULT_WRITE_TIMEOUT,
    security: ServerSecurity | None = None,
    subscription_buffer: int = DEFAULT_BUFFER_ROWS,
    limits: Limits | None = None,
    hit_replica: bool = False,
    whole_source_rows: int = DEFAULT_WHOLE_SOURCE_ROWS,
) -> None:
    """Runs the server until SIGINT or SIGTERM. Prints `pomoview listening on HOST:PORT` when ready.

    `store` is a local folder, a file:// URI or any URI Spark's Hadoop client can write (default
    `<data_dir>/store`, see `store_location`); `origins` says where each setting came from.
    `security` holds the token and TLS files (default: none, which only loopback allows).
    `spark_timeout` and `spark_write_timeout` are the deadlines in seconds (None: none) of the
    Spark jobs that read and that write the store (see `spark_deadline`). `limits` are what one
    request may ask for (default: `Limits()`'s); `spark_conf` the Spark settings (`spark/conf.py`),
    `spark_nice` the JVM's CPU priority below ours (`spark/priority.py`). `hit_replica`: a second
    process listens on the port, answers hits from a copy of the readers and passes every other
    call here, over a local socket (hit_replica.py).
    """
    _configure_logging()
    sys.setswitchinterval(SWITCH_INTERVAL)
    security, limits = security or ServerSecurity(), limits or Limits()
    location = _checked_store(security, host, store, data_dir)
    _log_configuration(
        origins or {}, security, limits, data=data_dir.absolute(), location=location, host=host, port=port,
        spark_master=spark_master, spark_nice=spark_nice, metrics_port=metrics_port, program=program,
        memory_budget=memory_budget, full_state=full_state, flush_interval=flush_interval,
        max_apply_lag=max_apply_lag, hit_replica=hit_replica, subscription_buffer=subscription_buffer,
        whole_source_rows=whole_source_rows, spark_timeout=spark_timeout,
        spark_write_timeout=spark_write_timeout, binary_joins=binary_joins,
    )
    metrics = _serve_metrics(host, metrics_port)
    front = _bind_front(host, port, security, limits) if hit_replica else None
    server, bound = (front.server, front.replica.port) if front else _bind(f"{host}:{port}", security, limits)
    spark = _start_spark(spark_master, spark_conf or SparkConf(), host, spark_nice)
    try:
        # A store on Hadoop's file system opens through the JVM: this waits for it to boot.
        scheduler = Scheduler(
            data_dir, spark, flush_interval=flush_interval, max_apply_lag=max_apply_lag, limits=limits,
            store_dir=location, full_state=full_state, binary_joins=binary_joins, memory_budget=memory_budget,
            metrics=metrics, subscription_buffer=subscription_buffer, whole_source_rows=whole_source_rows,
            spark_timeouts=SparkTimeouts(spark_timeout, spark_write_timeout), graph_dropped=REFREEZE.thaw,
        )
    except StoreLocationError as err:
        _refuse_start(f"pomoview: {err}", spark)
    if program is not None:
        _install_program(scheduler, program, spark)
    scheduler.start()
    watch = ExecutorWatch(spark_master, spark.current)
    done = _stop_on_signals()
    feed = front.feed(scheduler.view_state, metrics, on_lost=done.set) if front else None
    health_servicer = _start_serving(server, scheduler, watch, spark, metrics, feed)
    _ready(front, metrics)
    print(f"pomoview listening on {host}:{bound}", flush=True)
    _trace_memory(int(os.environ.get("POMOVIEW_TRACEMALLOC") or 0))
    wait_for_stop(done)
    watch.stop()
    _shut_down(server, health_servicer, spark, scheduler, front)
    if front is not None and front.lost.is_set():
        log.error("stopped: the hit replica went away")
        raise SystemExit(1)


def _ready(front: ReplicaFront | None, metrics: Metrics) -> None:
    """The last steps before the server says it listens: the hit replica starts serving; the
    interpreter's switch interval is set for it (scheduler/gil_policy.py); the garbage
    collector's pauses are timed from now on, after what is alive is frozen
    (scheduler/gc_policy.py: last, so that it holds everything the start made)."""
    if front is not None:
        front.serve()
    set_switch_interval(hit_replica=front is not None)
    GcPauses(metrics.gc_paused).start()  # for the process's life
    freeze_at_start()


def _start_serving(
    server: grpc.Server,
    scheduler: Scheduler,
    watch: ExecutorWatch,
    spark: SparkProvider,
    metrics: Metrics,
    feed: ReplicaFeed | None,
) -> health.HealthServicer:
    """Adds the services to `server`, starts it and says SERVING; returns the health servicer."""
    health_servicer, services = _add_services(server, scheduler, watch, feed)
    _watch_executors(watch, spark, metrics, health_servicer)
    server.start()
    for name in services:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return health_servicer


def _bind_front(host: str, port: int, security: ServerSecurity, limits: Limits) -> ReplicaFront:
    """The hit replica bound to `host:port` in front of this server (replica_process.py);
    exits with 1 if either cannot listen."""
    try:
        return ReplicaFront.bind(host, port, security, limits, GRPC_THREADS, SWITCH_INTERVAL)
    except ReplicaStartError as err:
        print(f"pomoview: {err}", file=sys.stderr)
        raise SystemExit(1) from None


def _start_spark(master: str, conf: SparkConf, host: str, nice: int) -> SparkProvider:
    """The Spark provider, its session booting in the background (the JVM takes seconds: the
    first upquery should not wait for it), with `conf`'s settings and, on a cluster, the
    driver's address from `host` (`driver_address_defaults`), its JVM `nice` steps below the
    server's CPU priority; logs the settings."""
    note = driver_address_defaults(master, host, conf)
    log.info("spark settings: %s", conf.describe())
    if note is not None:
        log.warning("%s", note)
    spark = SparkProvider(lambda: create_spark_session(master, conf=conf.values, nice=nice))
    spark.start_in_background()
    return spark


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # py4j logs every lost connection at INFO; a dead JVM is reported once, by the provider.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _refuse_start(message: str, spark: SparkProvider | None = None) -> NoReturn:
    """Prints why the server cannot start and exits with 2, stopping Spark if it was started."""
    print(message, file=sys.stderr)
    if spark is not None:
        spark.stop()
    raise SystemExit(2) from None


def _checked_store(security: ServerSecurity, host: str, store: str | None, data_dir: Path) -> Path | str:
    """The store's location, once the host and the store are known to be allowed; exits with
    2 if not. This runs before anything is written or started: a refused start leaves no trace."""
    try:
        security.check_host(host)
        location = store_location(store, data_dir)
        check_store_marker(data_dir, location)
    except (ConfigError, SecurityConfigError, OSError) as err:
        _refuse_start(f"pomoview: {err}")
    return location


def _log_configuration(
    origins: Mapping[str, str],
    security: ServerSecurity,
    limits: Limits,
    *,
    data: Path,
    location: Path | str,
    spark_master: str,
    spark_nice: int,
    host: str,
    port: int,
    metrics_port: int | None,
    flush_interval: float,
    max_apply_lag: float,
    program: Path | None,
    full_state: bool,
    binary_joins: bool,
    memory_budget: int | None,
    subscription_buffer: int,
    spark_timeout: float | None,
    spark_write_timeout: float | None,
    hit_replica: bool,
    whole_source_rows: int,
) -> None:
    """Logs every setting on one line, each with where it came from (`origins`: flag, env or
    default), and warns when the server is open to anyone who can reach it."""

    def setting(name: str, value: object) -> str:
        return f"{name}={value}" + (f" ({origins[name]})" if name in origins else "")

    log.info(
        "configuration: %s",
        ", ".join(
            [
                setting("data", data),
                setting("store", location.as_uri() if isinstance(location, Path) else location),
                setting("spark_master", spark_master),
                setting("spark_nice", spark_nice),
                setting("host", host),
                setting("port", port),
                *(f"{name}={value}" for name, value in security.describe().items()),
                setting("metrics_port", "off" if metrics_port is None else metrics_port),
                setting("flush_interval", f"{flush_interval}s"),
                setting("max_apply_lag", f"{max_apply_lag}s"),
                setting("program", program if program is not None else "none"),
                setting("full_state", full_state),
                setting("binary_joins", binary_joins),
                setting("hit_replica", hit_replica),
                setting("whole_source_rows", whole_source_rows),
                setting(
                    "memory_budget",
                    "none" if memory_budget is None else f"{memory_budget} ({format_bytes(memory_budget)})",
                ),
                f"subscription_buffer={subscription_buffer} rows",
                *(
                    setting(name, "none" if seconds is None else f"{seconds:g}s")
                    for name, seconds in (
                        ("spark_timeout", spark_timeout),
                        ("spark_write_timeout", spark_write_timeout),
                    )
                ),
                *(setting(name, value) for name, value in limits.describe().items()),
            ]
        ),
    )
    if security.token is None and not security.mutual_tls and not is_loopback(host):
        log.warning(
            "listening on %s without authentication (--insecure): anyone who can reach it can "
            "read and write every view",
            host,
        )


def _serve_metrics(host: str, metrics_port: int | None) -> Metrics:
    """The server's metrics, served on `metrics_port` if given; exits with 2 if it is in use.
    This runs before Spark starts, so a port in use is refused at once."""
    metrics = Metrics()
    if metrics_port is not None:
        try:
            log.info("metrics at %s", metrics.serve(host, metrics_port))
        except OSError as err:
            _refuse_start(f"pomoview: cannot serve metrics on {host}:{metrics_port}: {err}")
    return metrics


def _install_program(scheduler: Scheduler, program: Path, spark: SparkProvider) -> None:
    """Installs the --program file; exits with 2, stopping Spark, if it does not compile."""
    try:
        scheduler.install(program.read_text(), program.name)
    except ServiceError as err:
        _refuse_start(f"pomoview: cannot install {program}:\n{err.message}", spark)


# The health service's name for Spark: SERVING while the server's Spark application has an
# executor (lookups that need Spark can run), NOT_SERVING otherwise. The server itself ("")
# serves on regardless: hits and writes need no Spark.
SPARK_HEALTH = "pomoview.spark"


def _watch_executors(
    watch: ExecutorWatch, spark: SparkProvider, metrics: Metrics, health_servicer: health.HealthServicer
) -> None:
    """Starts the executor watch: lookups' jobs use it, and it reports to the metrics and to
    the health service (`SPARK_HEALTH`)."""

    def report(status: SparkStatus) -> None:
        serving = health_pb2.HealthCheckResponse.SERVING
        health_servicer.set(
            SPARK_HEALTH, serving if status.executors > 0 else health_pb2.HealthCheckResponse.NOT_SERVING
        )

    watch.on_change = report
    report(watch.poll())
    metrics.watch_spark(lambda: watch.status().executors)
    spark.executors = watch
    watch.start()


def _add_services(
    server: grpc.Server, scheduler: Scheduler, watch: ExecutorWatch, feed: ReplicaFeed | None
) -> tuple[health.HealthServicer, tuple[str, ...]]:
    """Adds the view service, health checks and reflection to `server`; returns the health
    servicer and the names it reports SERVING once the server has started."""
    replica_hits = None if feed is None else (lambda: feed.replica_hits)
    service = ViewService(scheduler, watch.status, replica_hits)
    add_view_service(service, server)
    if feed is not None:
        feed.serve_writes(service.write_bytes)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    service_name = pb.DESCRIPTOR.services_by_name["ViewService"].full_name
    reflection.enable_server_reflection(
        (service_name, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    return health_servicer, ("", service_name)


def _stop_on_signals() -> threading.Event:
    """An event SIGINT and SIGTERM set, handled from now on. This runs before the line that
    says the server is ready: a supervisor may signal at once, and the default action would
    kill the process, leaving a booting JVM to exit on its own."""
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return done


def wait_for_stop(done: threading.Event) -> None:
    """Blocks the main thread until `done` is set, waking twice a second: a signal the kernel
    delivers to another thread (gRPC's, py4j's) does not interrupt the main thread's wait,
    and Python runs its handler only once the main thread wakes. Waiting without a timeout,
    a server in the suite ignored SIGTERM for the 120 s its test waited."""
    while not done.wait(0.5):
        pass


def _shut_down(
    server: grpc.Server,
    health_servicer: health.HealthServicer,
    spark: SparkProvider,
    scheduler: Scheduler,
    front: ReplicaFront | None = None,
) -> None:
    log.info("shutting down")
    if front is not None:
        front.stop()  # first: no call reaches this server through it any more
    health_servicer.enter_graceful_shutdown()
    server.stop(grace=2).wait()
    # A JVM still booting serves nobody now: killed, it releases a flush waiting for it, so
    # that the scheduler's stop does not wait for the boot. Acknowledged writes are in the log.
    spark.abort_boot()
    scheduler.stop()
    spark.stop()


def _trace_memory(frames: int) -> None:
    """Memory debugging (POMOVIEW_TRACEMALLOC=frames; 0: off): `kill -USR1 <pid>` logs the 25
    largest allocation sites."""
    if not frames:
        return
    import tracemalloc

    tracemalloc.start(frames)

    def dump(signum: int, frame: object) -> None:
        snapshot = tracemalloc.take_snapshot()
        total = sum(stat.size for stat in snapshot.statistics("filename"))
        log.info("tracemalloc: %d MiB traced", total >> 20)
        for stat in snapshot.statistics("lineno")[:25]:
            log.info("tracemalloc: %s", stat)

    signal.signal(signal.SIGUSR1, dump)


def _bind(address: str, security: ServerSecurity, limits: Limits) -> tuple[grpc.Server, int]:
    """The gRPC server, bound to its port before Spark starts, so that a port in use (or a
    TLS key that does not match its certificate) is refused at once. Exits with 1 if not."""
    # A lookup that misses holds its thread while its Spark job runs; concurrent misses can
    # only share a job (upquery_jobs.py) if they are all being served, so the pool is wide.
    bound = listen(address, security, limits, GRPC_THREADS)
    if isinstance(bound, str):
        print(f"pomoview: {bound}", file=sys.stderr)
        raise SystemExit(1)
    return bound
