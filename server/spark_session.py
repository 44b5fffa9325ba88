"""Creation of the one Spark session a server process uses.

The store and the upquery executor never create sessions; they are handed a
`SparkProvider` (or any `Callable[[], SparkSession]`) and call it when they need Spark.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from pyspark.sql import SparkSession


def create_spark_session(master: str = "local[*]", app_name: str = "pomoview") -> SparkSession:
    """Create (or get the process's existing) Spark session, configured for a small machine.

    Settings that size the driver JVM only take effect if no JVM is running yet in this process.
    """
    if master.startswith("local"):
        # A local driver only talks to itself; binding to loopback also avoids Spark's warning
        # about a hostname that resolves to loopback. An explicit setting wins.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkProvider:
    """Lazily creates one Spark session, shared by every caller, on first call.

    Calling the provider blocks until the session exists (creating it if needed). `stop()` ends
    the session; after it the provider refuses to create another, so a late caller during
    shutdown cannot boot a fresh JVM.
    """

    def __init__(self, factory: Callable[[], SparkSession] = create_spark_session) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._stopped = False
        self._background_error: BaseException | None = None

    def __call__(self) -> SparkSession:
        """Return the session, creating it on first use. Raises what session creation raises."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("the Spark session provider has been stopped")
            if self._session is None:
                self._session = self._factory()
            return self._session

    def start_in_background(self) -> threading.Thread:
        """Start creating the session in a daemon thread, so the JVM boots while the server starts.

        A failure there is kept in `background_error`; the next call retries creation and
        raises to its caller.
        """

        def boot() -> None:
            try:
                self()
            except BaseException as exc:  # reported to the next caller via background_error
                self._background_error = exc

        thread = threading.Thread(target=boot, name="spark-session-boot", daemon=True)
        thread.start()
        return thread

    @property
    def background_error(self) -> BaseException | None:
        """The error of the last failed background creation, if any."""
        return self._background_error

    def stop(self) -> None:
        """Stop the session if it was created (waiting for a creation in progress)."""
        with self._lock:
            self._stopped = True
            session, self._session = self._session, None
        if session is not None:
            session.stop()
