"""Path and URL helpers for the Stores (:mod:`horovod.spark.common.store`).

Stores hand out two forms of every path: the *full* path, a URI that Spark's readers and writers
resolve (``file:///tmp/x``, ``hdfs://nn:8020/x``, ``dbfs:/x``), and the *localized* path that the
store's :mod:`pyarrow.fs` filesystem wants (``/tmp/x``, ``/x``). These helpers parse and build
them without :func:`urllib.parse.urlsplit`, which would cut a file name at a ``#`` or ``?``.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

# `scheme://authority/path`, `scheme:///path` and the single-slash `scheme:/path` that Hadoop prints
# (`file:/tmp/x`) and Databricks uses (`dbfs:/x`). Anything else (`a:b`, a plain path) is no URL.
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?://(?P<authority>[^/]*))?(?P<path>/.*)?$")


@dataclass(frozen=True)
class SplitPath:
    """A path split into its URI parts; ``scheme`` is None for a plain path."""

    scheme: str | None
    authority: str | None  # None when the URI has no `//` part; "" for `hdfs:///x`
    path: str


def split_url(path: str) -> SplitPath:
    """Split ``path`` into scheme, authority and path; a plain path keeps ``scheme=None``."""
    match = _URL.match(path)
    if match is None or (match["authority"] is None and not match["path"]):
        return SplitPath(None, None, path)
    return SplitPath(match["scheme"].lower(), match["authority"], match["path"] or "/")


def split_host_port(authority: str | None) -> tuple[str | None, int | None]:
    """``"nn:8020"`` -> ``("nn", 8020)``; ``"nameservice1"`` -> ``("nameservice1", None)``."""
    if not authority:
        return None, None
    host, sep, port = authority.rpartition(":")
    if sep and port.isdigit():
        return host or None, int(port)
    return authority, None


def join_path(base: str, *parts: str) -> str:
    """Join with ``/``, for plain paths and URIs alike (``hdfs://nn:8020/a`` + ``b``)."""
    return posixpath.join(base, *parts)


def as_absolute_like(query: str, found: str) -> str:
    """Give ``found`` the leading ``/`` that ``query`` has.

    Some pyarrow filesystems (SubTreeFileSystem) list paths relative to their root ("user/x")
    even when asked about "/user/x"; callers want the form they asked in.
    """
    if query.startswith("/") and not found.startswith("/"):
        return "/" + found
    return found


def short_reason(error: BaseException) -> str:
    """The first line of an error's message: pyarrow's libjvm/libhdfs errors list every path tried."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    return f"{type(error).__name__}: {lines[0].strip()}{more}"
