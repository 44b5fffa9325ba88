"""Creation of the one Spark session a server process uses, and its replacement if it dies.

The store and the upquery executor never create sessions; they are handed a
`SparkProvider` (or any `Callable[[], SparkSession]`) and call it when they need Spark.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping

from pyspark.sql import SparkSession

from pomoview.server.spark.conf import is_local_master
from pomoview.server.spark.executors import ExecutorWatch
from pomoview.server.spark.priority import lower_priority

log = logging.getLogger("pomoview.spark")

# A failure reason is cut to this many characters: Java messages can embed whole files.
_REASON_LIMIT = 400
# How long a stopped driver JVM may take to exit, and a stop to wait for an abandoned boot to
# give up, before they are dealt with harder.
_JVM_EXIT_WAIT = 10.0
_BOOT_GIVE_UP_WAIT = 10.0
# Scans for processes a killed boot may still be starting (the JVM, the launcher before it).
_FREEZE_ROUNDS = 10


# The server's own settings, for a small machine; `serve --spark-conf` (and the other sources of
# `conf.resolve_spark_conf`) override them.
SERVER_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    # C1 only: C2 recompiled each keyed upquery's new generated classes, 0.3 of 2 cores under a
    # write load (bench/hits_under_load.py); scans were no slower. Executors are left alone.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


def create_spark_session(
    master: str = "local[*]", app_name: str = "pomoview", conf: Mapping[str, str] | None = None, nice: int = 0
) -> SparkSession:
    """Create (or get the process's existing) Spark session: `SERVER_DEFAULTS`, then `conf`;
    the driver JVM, if this process launched it, `nice` steps below this process's CPU
    priority (`priority.lower_priority`).

    Settings that size the driver JVM only take effect if no JVM is running yet in this process.
    """
    settings = dict(SERVER_DEFAULTS)
    if is_local_master(master):
        # A local driver only talks to itself; binding to loopback also avoids Spark's warning
        # about a hostname that resolves to loopback. An explicit setting wins.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    quiet_task_failures(session)
    pid = getattr(_gateway_process(session), "pid", None)
    if nice and isinstance(pid, int):
        lower_priority(pid, nice)
    return session


# Spark's loggers that print a failed task's or job's whole stack trace at ERROR, every time
# it fails (in local mode, where the executor is the driver's JVM): the server reports each
# failure itself, with its cause (`spark_error_reason`), once and then with a count.
_TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
)


def quiet_task_failures(session: SparkSession) -> None:
    """Turns off the Spark loggers of `_TASK_FAILURE_LOGGERS` in the driver's JVM."""
    try:
        jvm = session.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF  # type: ignore[union-attr]
        for name in _TASK_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 (only the log's volume depends on it)
        log.debug("quieting Spark's task failure logs failed", exc_info=True)


def _gateway_process(session: SparkSession) -> object | None:
    """The Popen of the driver JVM pyspark launched, if it launched one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or session.sparkContext is not SparkContext._active_spark_context:
        return None
    return getattr(gateway, "proc", None)


def session_dead_reason(session: SparkSession, probe_jvm: bool = False) -> str | None:
    """Why `session` can no longer run jobs, or None if it looks alive.

    Without `probe_jvm` only local state is looked at (the driver JVM process has exited, or
    the session was stopped), which costs no call into the JVM. With it, the JVM is also
    asked whether its SparkContext is stopped: a JVM that does not answer is dead too.
    """
    from py4j.protocol import Py4JError

    context = session._sc
    if getattr(context, "_jsc", None) is None:
        return "the Spark session was stopped"
    proc = _gateway_process(session)
    poll = getattr(proc, "poll", None)
    code = poll() if callable(poll) else None
    if code is not None:
        return f"the Spark driver JVM exited with status {code}"
    if probe_jvm:
        try:
            if context._jsc.sc().isStopped():
                return "the SparkContext was stopped by Spark"
        except (Py4JError, OSError) as err:
            # A killed JVM refuses connections before its last thread is gone: give it a moment
            # to be reaped, to tell a death from a hang.
            wait = getattr(proc, "wait", None)
            if callable(wait):
                try:
                    return f"the Spark driver JVM exited with status {wait(timeout=5)}"
                except subprocess.TimeoutExpired:
                    pass
            return f"the Spark driver JVM does not answer ({type(err).__name__}: {err})"
    return None


def discard_session(session: SparkSession) -> None:
    """Tears down a dead (or stopped) session so that the next one launches a new JVM.

    pyspark keeps its gateway and active context in class attributes and would otherwise hand
    the dead ones back. The old JVM, if still running, is killed first, so that no call below
    can wait on it.
    """
    from pyspark import SparkContext
    from pyspark.sql import SQLContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 (a JVM that will not die is left to the OS)
            log.warning("the old Spark driver JVM (pid %s) did not exit", proc.pid)
    try:
        session._sc.stop()  # closes the accumulator server; the JVM call fails fast now
    except Exception:  # noqa: BLE001
        log.debug("stopping the dead Spark context failed", exc_info=True)
    if gateway is not None:
        try:
            gateway.shutdown()  # the Python side: its client sockets and callback server
        except Exception:  # noqa: BLE001
            log.debug("shutting down the dead Py4J gateway failed", exc_info=True)
    with SparkContext._lock:
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None


def spark_error_reason(err: BaseException) -> str:
    """A one-line account of a Spark failure that names its cause, without stack traces.

    A failure in a Python worker (a `PythonException`, or a Java error that carries one)
    carries the worker's traceback: the cause is the exception at its end, given as its error
    class and message (`PYTHON_VERSION_MISMATCH: Python in worker has different version ...`)
    or its type and message (`ModuleNotFoundError: No module named 'pyarrow'`). A Java error
    gives its message and its root cause; any other error its class (`getCondition`) if it
    has one, its type otherwise, and its message.
    """
    from py4j.protocol import Py4JJavaError

    text = str(err).strip()
    python = _python_cause(text)
    if python is not None:
        return _cut(f"{python} (in a Spark Python worker)")
    if isinstance(err, Py4JJavaError):
        parts = _java_parts(text.splitlines())
        if parts:
            return "; caused by ".join(_cut(p) for p in parts)
    message = " ".join(_message_lines(text.splitlines()))
    condition = _condition(err)
    if condition is not None:
        return _cut(_classed(condition, message))
    return _cut(f"{type(err).__name__}: {message}" if message else type(err).__name__)


def _java_parts(lines: list[str]) -> list[str]:
    """A Java error's message and its root cause's, each with the lines that continue it (a
    message may span lines: "SparkException: \\nError from python worker:\\n  ..."), up to
    its stack trace. The text is "An error occurred while calling oN.method.\\n: java.Exc:
    message\\n\\tat ...\\nCaused by: java.Exc2: message\\n\\tat ..."."""
    starts = [(i, 2) for i, line in enumerate(lines) if line.startswith(": ")][:1]
    causes = [(i, len("Caused by: ")) for i, line in enumerate(lines) if line.startswith("Caused by: ")]
    parts = []
    for i, skip in starts + causes[-1:]:
        words = [lines[i][skip:].strip()]
        for line in lines[i + 1 :]:
            if not line.strip() or line.lstrip().startswith(("at ", "... ")) or line.startswith(
                ("Caused by: ", "Driver stacktrace:", "Suppressed: ")
            ):
                break
            words.append(line.strip())
        parts.append(" ".join(w for w in words if w))
    return parts


def is_spark_error(err: BaseException) -> bool:
    """Whether `err` comes from Spark or the JVM (pyspark's errors, py4j's), or is the session
    provider's; not a bug of the caller's."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return isinstance(err, (PySparkException, Py4JError, SparkSessionLost, SparkProviderStopped))


def _condition(err: BaseException) -> str | None:
    """A pyspark error's class (`getCondition`, e.g. PATH_NOT_FOUND), if it has one."""
    get = getattr(err, "getCondition", None)
    try:
        condition = get() if callable(get) else None
    except Exception:  # noqa: BLE001 (a captured error whose JVM side is gone)
        return None
    return condition if isinstance(condition, str) and condition else None


def _classed(condition: str, message: str) -> str:
    """`CLASS: message`, without the `[CLASS] ` that Spark's messages start with."""
    prefix = f"[{condition}]"
    if message.startswith(prefix):
        message = message[len(prefix) :].strip()
    return f"{condition}: {message}" if message else condition


def _message_lines(lines: list[str]) -> list[str]:
    """The lines of a message, up to the first blank, stack frame or traceback line."""
    out = []
    for line in lines:
        if not line.strip() or line[:1].isspace() or line.startswith(("Traceback ", "JVM stacktrace:")):
            break
        out.append(line.strip())
    return out


_TRACEBACK = "Traceback (most recent call last):"
_ERROR_CLASS = re.compile(r"^\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]\s*")


def _python_cause(text: str) -> str | None:
    """The exception at the end of the last Python traceback in `text`, as one line; None if
    there is no traceback. It is the first line after the traceback's start that is not
    indented (its frames are), with the lines that continue its message."""
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    lines = text[start + len(_TRACEBACK) :].splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not line[:1].isspace():
            message = " ".join(_message_lines(lines[i:]))
            break
    else:
        return None
    kind, _, detail = message.partition(": ")
    kind = kind.rsplit(".", 1)[-1]  # pyspark.errors.exceptions.base.PySparkRuntimeError
    match = _ERROR_CLASS.match(detail)
    if match is not None:
        return _classed(match.group(1), detail)
    return f"{kind}: {detail}" if detail else kind


def _cut(text: str) -> str:
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"


def end_session(session: SparkSession) -> None:
    """Stops a live session, then its driver JVM.

    pyspark's stop leaves the gateway JVM running until this process exits and closes its stdin:
    a server that stops it here exits with no JVM behind it.
    """
    from pyspark import SparkContext

    proc = _gateway_process(session)
    gateway = SparkContext._gateway if proc is not None else None
    session.stop()
    stdin = getattr(proc, "stdin", None)
    if proc is None or stdin is None:
        return
    if gateway is not None:
        # The Python side first: its threads would otherwise send to the exiting JVM (and log
        # a traceback apiece).
        with contextlib.suppress(Exception):
            gateway.shutdown()
    with contextlib.suppress(OSError):
        stdin.close()  # the gateway exits at the end of its stdin, running its shutdown hooks
    try:
        proc.wait(timeout=_JVM_EXIT_WAIT)  # type: ignore[attr-defined]
    except subprocess.TimeoutExpired:
        log.warning("the Spark driver JVM (pid %s) did not exit; killing it", proc.pid)  # type: ignore[attr-defined]
        proc.kill()  # type: ignore[attr-defined]
        proc.wait(timeout=_JVM_EXIT_WAIT)  # type: ignore[attr-defined]


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state, parent, ...); None if
    the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # The command name comes in parentheses and may hold spaces and parentheses itself.
    return stat[stat.rindex(b")") + 2 :].split()


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, read from /proc; empty where there is no /proc (not Linux)."""
    tree: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return tree
    for entry in entries:
        if entry.isdigit() and (fields := _stat_fields(entry)) is not None:  # else it exited
            tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(pid: int) -> set[int]:
    """The processes `pid` started, and theirs, that are still there (zombies included)."""
    tree = _children_by_parent()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _process_state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[0].decode()


def own_processes() -> frozenset[int]:
    """The processes this one has started so far, and theirs."""
    return frozenset(descendants(os.getpid()))


def kill_new_processes(spared: frozenset[int]) -> None:
    """Kills every process this one started, directly or not, that is not in `spared`: the
    JVM of an abandoned boot, and the launcher that `spark-submit` runs before it.

    They are first stopped (SIGSTOP), scan after scan until no new one appears: one killed
    while it forks would leave its new child behind, orphaned and out of reach.
    """
    me = os.getpid()
    frozen: set[int] = set()
    for _ in range(_FREEZE_ROUNDS):
        new = descendants(me) - spared - frozen
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(_process_state(p) in ("R", "S", "D") for p in new):
            time.sleep(0.005)  # SIGSTOP lands when the process next runs
        frozen |= new
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class SparkProviderStopped(RuntimeError):
    """The server is shutting down: no Spark session will be created any more."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("the Spark session provider has been stopped" + detail)


class SparkSessionLost(RuntimeError):
    """The Spark session died; a new one is starting in the background."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; a new Spark session is starting")
        self.reason = reason


class SparkProvider:
    """Lazily creates one Spark session, shared by every caller, on first call; replaces it if
    it dies.

    Calling the provider blocks until the session exists (creating it if needed). A session
    found dead (its driver JVM gone or its context stopped) is discarded and a new one starts
    in the background: the call that finds it raises `SparkSessionLost`, later calls wait for
    the new session. `check()` looks harder after a job failed. `abort_boot()` refuses new
    sessions and kills a JVM still booting, without waiting for it; `stop()` also ends the
    session. After either, a late caller during shutdown cannot boot a fresh JVM.
    """

    def __init__(
        self,
        factory: Callable[[], SparkSession] = create_spark_session,
        *,
        dead_reason: Callable[[SparkSession, bool], str | None] = session_dead_reason,
        discard: Callable[[SparkSession], None] = discard_session,
        end: Callable[[SparkSession], None] = end_session,
        processes: Callable[[], frozenset[int]] = own_processes,
        kill_boot: Callable[[frozenset[int]], None] = kill_new_processes,
    ) -> None:
        self._factory = factory
        self._dead_reason = dead_reason
        self._discard = discard
        self._end = end
        self._processes = processes
        self._kill_boot = kill_boot
        # Held while a session is created, so that callers wait for one boot; stop() never
        # takes it while the boot runs (only to see the abandoned boot give up, bounded).
        self._lock = threading.Lock()
        # Guards the fields below, and is never held across a call into Spark.
        self._guard = threading.Lock()
        self._session: SparkSession | None = None
        self._stopped = False
        # The processes there were before the running boot started (None: no boot is running).
        self._boot_spared: frozenset[int] | None = None
        self._background_error: BaseException | None = None
        self._lost: str | None = None  # why the last session was discarded, until a new one is up
        self.restarts = 0
        # Set by the server when it watches the cluster's executors; lookups' jobs use it.
        self.executors: ExecutorWatch | None = None

    def __call__(self) -> SparkSession:
        """Return the session, creating it if needed. Raises what session creation raises,
        `SparkSessionLost` if the current session has just been found dead, and
        `SparkProviderStopped` once the provider is stopped."""
        with self._lock:
            with self._guard:
                session = self._session
            if session is None:
                return self._create_locked()  # raises SparkProviderStopped once stopping
            reason = self._dead_reason(session, False)
            if reason is None:
                return session
            self._replace_locked(reason)
        self.start_in_background()
        raise SparkSessionLost(reason)

    def current(self) -> SparkSession | None:
        """The session if one is up (it may have died since), without creating one."""
        with self._guard:
            return self._session

    def _create_locked(self) -> SparkSession:
        spared = self._processes()
        with self._guard:
            if self._stopped:
                raise SparkProviderStopped()
            self._boot_spared = spared
        try:
            session = self._factory()
        except BaseException as err:
            with self._guard:
                self._boot_spared = None
                if self._stopped:  # the boot failed because stop() killed its JVM
                    raise SparkProviderStopped(" while the Spark session was starting") from err
            raise
        with self._guard:
            self._boot_spared = None
            stopped = self._stopped
            if not stopped:
                self._session = session
                self._lost = None
        if stopped:
            # stop() came during the boot and did not wait for it: what the boot made ends here.
            self._end_quietly(session)
            raise SparkProviderStopped(" while the Spark session was starting")
        log.info("the Spark session is ready")
        return session

    def check(self) -> str | None:
        """Called after a Spark job failed: if the session is dead, discard it and start a new
        one in the background. Returns why the session died (also when another caller found it
        dead first and the new one is not up yet), or None if the session is alive: the job
        failed on its own."""
        lost = self._lost
        if lost is not None:
            return lost  # the new session is booting: do not wait for it here
        with self._lock:
            with self._guard:
                if self._stopped or self._session is None:
                    return None
                session = self._session
            reason = self._dead_reason(session, True)
            if reason is None:
                return None
            self._replace_locked(reason)
        self.start_in_background()
        return reason

    def _replace_locked(self, reason: str) -> None:
        with self._guard:
            session, self._session = self._session, None
        self._lost = reason
        self.restarts += 1
        log.warning("the Spark session is dead (%s); starting a new one", reason)
        assert session is not None
        try:
            self._discard(session)
        except Exception:  # a half torn-down session must not keep the new one from starting
            log.exception("discarding the dead Spark session failed")

    def start_in_background(self) -> threading.Thread:
        """Start creating the session in a daemon thread, so the JVM boots while the server starts.

        A failure there is kept in `background_error`; the next call retries creation and
        raises to its caller.
        """

        def boot() -> None:
            try:
                self()
            except SparkProviderStopped:
                pass  # shutdown came first: nobody will ask for this session
            except BaseException as exc:  # reported to the next caller via background_error
                log.warning("the Spark session did not start (the next caller retries): %s", exc)
                self._background_error = exc

        thread = threading.Thread(target=boot, name="spark-session-boot", daemon=True)
        thread.start()
        return thread

    @property
    def background_error(self) -> BaseException | None:
        """The error of the last failed background creation, if any."""
        return self._background_error

    def abort_boot(self) -> None:
        """Refuse to create sessions from now on, and kill the JVM of a boot in progress, whose
        callers then get `SparkProviderStopped`. A session already up keeps serving until
        `stop()`: a flush that is running can finish.

        A JVM takes from seconds to a minute to boot on a busy machine; a server that stops
        before anyone needed Spark must not wait for it.
        """
        with self._guard:
            self._stopped = True
            spared = self._boot_spared
        if spared is None:
            return
        log.info("stopping: the Spark session still starting is abandoned")
        # Killed, the boot fails fast; it is waited for, so that nothing it started outlives
        # this process. The kill is repeated: the boot may not have launched its JVM yet.
        deadline = time.monotonic() + _BOOT_GIVE_UP_WAIT
        while True:
            self._kill_boot(spared)
            if self._lock.acquire(timeout=0.1):
                self._lock.release()
                return
            if time.monotonic() > deadline:
                log.warning("the abandoned Spark session boot did not give up in %g s", _BOOT_GIVE_UP_WAIT)
                return

    def stop(self) -> None:
        """End the session if there is one, and abandon a boot in progress (see `abort_boot`)."""
        self.abort_boot()
        with self._guard:
            session, self._session = self._session, None
        if session is not None:
            if self._dead_reason(session, False) is not None:
                self._discard(session)
            else:
                self._end(session)

    def _end_quietly(self, session: SparkSession) -> None:
        try:
            self._end(session)
        except Exception:  # shutting down: a session that will not stop is the OS's now
            log.warning("stopping the Spark session failed", exc_info=True)
