"""The Spark settings a server passes to its session: `serve --spark-conf KEY=VALUE`
(repeatable), the environment variable `POMOVIEW_SPARK_CONF` (`KEY=VALUE` pairs separated by
`;`) and the file `spark.conf` in the data folder (one `KEY VALUE` or `KEY=VALUE` per line,
`#` comments, as Spark's own `spark-defaults.conf`). A flag wins over the variable, which wins
over the file, key by key; all of them win over the server's own defaults
(`session.SERVER_DEFAULTS`).

For a master that is not local, `spark.driver.host` and `spark.driver.bindAddress` default to
the address the server listens on (`--host`), when that is an IP address the executors can
reach: the driver otherwise advertises the machine's first interface, which may not be the
one the cluster reaches it by.

Only the standard library: the command line resolves these before it imports the server.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

CONF_FILE = "spark.conf"
CONF_ENV = "POMOVIEW_SPARK_CONF"
CONF_FLAG = "--spark-conf"
# Settings that have a flag of their own, which would silently disagree with them.
_OWN_FLAGS = {"spark.master": "--spark-master"}
_LINE = re.compile(r"^([^\s=]+)\s*(?:=|\s)\s*(.*)$")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


class SparkConfError(ValueError):
    """A Spark setting that cannot be used; the message names where it came from."""


@dataclass
class SparkConf:
    """The settings to pass to the session, and where each came from (for the log)."""

    values: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)

    def set(self, key: str, value: str, origin: str) -> None:
        self.values[key] = value
        self.origins[key] = origin

    def describe(self) -> str:
        """`key=value (origin)` for each setting, sorted, for the configuration line."""
        return ", ".join(f"{k}={v} ({self.origins[k]})" for k, v in sorted(self.values.items())) or "none"


def _pair(text: str, where: str) -> tuple[str, str]:
    match = _LINE.match(text.strip())
    if match is None:
        raise SparkConfError(f"{where}: expected KEY=VALUE, got {text.strip()!r}")
    key, value = match.group(1), match.group(2).strip()
    if not key.startswith("spark."):
        raise SparkConfError(
            f"{where}: {key!r} is not a Spark setting (they start with 'spark.'; Hadoop's are "
            "passed as spark.hadoop.*)"
        )
    if key in _OWN_FLAGS:
        raise SparkConfError(f"{where}: set {key} with {_OWN_FLAGS[key]}, not as a Spark setting")
    return key, value


def read_conf_file(path: Path) -> list[tuple[str, str, str]]:
    """The settings of a `spark.conf` file as (key, value, origin); none if it is absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as err:
        raise SparkConfError(f"cannot read {path}: {err}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            where = f"{path}:{number}"
            out.append((*_pair(line, where), where))
    return out


def resolve_spark_conf(
    data_dir: Path, flags: Iterable[str], environ: Mapping[str, str]
) -> SparkConf:
    """The settings of `data_dir/spark.conf`, then `POMOVIEW_SPARK_CONF`, then the flags, each
    later one winning for its key. Raises SparkConfError naming the bad entry and where it
    was."""
    conf = SparkConf()
    for key, value, where in read_conf_file(data_dir / CONF_FILE):
        conf.set(key, value, where)
    for entry in (environ.get(CONF_ENV) or "").split(";"):
        if entry.strip():
            conf.set(*_pair(entry, f"env {CONF_ENV}"), f"env {CONF_ENV}")
    for entry in flags:
        conf.set(*_pair(entry, CONF_FLAG), "flag")
    return conf


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _master_is_loopback(master: str) -> bool:
    """Whether every host in a `spark://h1:p1,h2:p2` URL is a loopback address or name."""
    hosts = [h.rsplit(":", 1)[0] for h in re.sub(r"^\w+://", "", master).split(",")]
    addresses = [_address(h) for h in hosts]
    return all(
        h.lower() in _LOOPBACK_NAMES or (a is not None and a.is_loopback)
        for h, a in zip(hosts, addresses, strict=True)
    )


def driver_address_defaults(master: str, host: str, conf: SparkConf) -> str | None:
    """Sets `spark.driver.host` and `spark.driver.bindAddress` to `host` for a master that is
    not local, unless set already. Returns why they were left unset, if they were (for the
    log), else None.

    Left unset when `host` is a name (Spark resolves names its own way) or an unspecified
    address (0.0.0.0 or ::, which no executor can connect to), and when it is loopback but
    the master is not (executors on other machines cannot reach a loopback driver)."""
    if is_local_master(master):
        return None
    address = _address(host)
    if address is None:
        why = f"--host {host} is not an IP address"
    elif address.is_unspecified:
        why = f"--host {host} is every address, not one executors can connect to"
    elif address.is_loopback and not _master_is_loopback(master):
        why = f"--host {host} is loopback and the master {master} is not"
    else:
        for key in ("spark.driver.host", "spark.driver.bindAddress"):
            if key not in conf.values:
                conf.set(key, str(address), "from --host")
        return None
    if "spark.driver.host" in conf.values:
        return None
    return (
        f"spark.driver.host is not set ({why}): Spark advertises the machine's first address "
        "(or SPARK_LOCAL_IP) to the executors; set --spark-conf spark.driver.host=ADDRESS if "
        "they cannot reach it"
    )
