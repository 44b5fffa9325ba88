"""Column names in Spark SQL: an attribute may be called anything Spark accepts (a keyword, a
name with a dot), so the store and the bulk load always quote it."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def quoted(name: str) -> str:
    """`name` as a quoted identifier of Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column called `name`, whatever characters it holds."""
    return F.col(quoted(name))
