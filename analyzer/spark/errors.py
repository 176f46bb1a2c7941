"""pyspark's and the JVM's errors as one line that says what to fix (the CLI prints it, with the README's exit code):
no Java, a path that does not exist, a bad URI, a filesystem without its connector or its credentials. What is not
recognised still becomes one line: the Java exception's class and the first line of its message."""

from __future__ import annotations

import re

from analyzer.errors import LoopscopeError, UsageError

HADOOP = "3.4.1"  # the Hadoop that pyspark 4.0 ships: its connectors must match
CONNECTORS = {
    "s3a": f"--packages org.apache.hadoop:hadoop-aws:{HADOOP}",
    "gs": "--packages com.google.cloud.bigdataoss:gcs-connector:hadoop3-2.2.26 (or its shaded jar with --jars)",
    "abfs": f"--packages org.apache.hadoop:hadoop-azure:{HADOOP}",
    "abfss": f"--packages org.apache.hadoop:hadoop-azure:{HADOOP}",
    "wasbs": f"--packages org.apache.hadoop:hadoop-azure:{HADOOP}",
}
CREDENTIALS = {
    "s3a": "fs.s3a.access.key/secret.key, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an instance role",
    "gs": "google.cloud.auth.service.account.json.keyfile or the machine's service account",
    "abfss": "fs.azure.account.key.<account>.dfs.core.windows.net or an OAuth client",
    "hdfs": "a Kerberos ticket (kinit) on a secured cluster",
}


class SparkJobError(LoopscopeError):
    """A Spark job failed for a reason that is not the input's (an executor lost, out of memory)."""

    exit_code = 5


def _java(exc: BaseException) -> tuple[str, str]:
    """(Java class name, message) of a Py4J error's Java exception (its root cause), else ("", str(exc))."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return "", str(exc)
    try:
        cause = java
        while cause.getCause() is not None and cause.getCause() != cause:
            cause = cause.getCause()
        return str(cause.getClass().getName()), str(cause.getMessage() or "")
    except Exception:  # noqa: BLE001 - the gateway may be gone: describe what we have
        return "", str(exc)


def _scheme(where: str) -> str:
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+)://", where)
    return m.group(1).lower() if m else "file"


def explain(exc: BaseException, where: str) -> str:
    """One line for an error met while reading or writing ``where`` (a path or URI)."""
    cls, msg = _java(exc)
    first = (msg.strip().splitlines() or [""])[0][:300]
    scheme = _scheme(where)
    if (
        "UnsupportedFileSystemException" in cls
        or "No FileSystem for scheme" in msg
        or ("ClassNotFoundException" in cls and "FileSystem" in msg)  # a scheme Hadoop maps to a jar not here
    ):
        fix = CONNECTORS.get(scheme, "its Hadoop connector jar (--packages or --jars)")
        return f"{where}: Spark has no filesystem for {scheme}:// here: add its connector, {fix}"
    if cls.endswith("FileNotFoundException") or "does not exist" in msg:
        return f"no such file or folder: {where}"
    if (
        "AccessDenied" in cls
        or "AccessControlException" in cls
        or "NoAuthWith" in cls
        or "CredentialInitializationException" in cls
        or re.search(r"\b(403|401)\b|Forbidden|credential|Unauthori[sz]ed|permission denied", msg, re.I)
    ):
        how = CREDENTIALS.get(scheme, "the filesystem's credentials")
        return f"{where}: access refused ({first}): check the credentials for {scheme}:// ({how})"
    if cls.endswith("UnknownHostException") or "UnknownHost" in msg:
        return f"{where}: unknown host {first!r}: check the URI's bucket or host name"
    if "URISyntaxException" in cls or "IllegalArgumentException" in cls or "Relative path in absolute URI" in msg:
        return f"{where}: not a valid path or URI ({first})"
    if not cls:
        return f"{where}: {first}"
    return f"{where}: {cls.rsplit('.', 1)[-1]}: {first}"


def spark_error(exc: BaseException, out: str) -> LoopscopeError:
    """The error to raise for an exception out of a Spark job: a problem with the input or ``out`` is a
    ``UsageError`` (exit 2), Java that does not start too; anything else a ``SparkJobError`` (exit 5)."""
    text = str(exc)
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return UsageError(
            "Spark could not start its Java process: check `java -version` (Java 17 or later) and JAVA_HOME"
        )
    line = explain(exc, out)
    if line.startswith("no such file") or "access refused" in line or "no filesystem for" in line:
        return UsageError(line)
    if "not a valid path or URI" in line or "unknown host" in line:
        return UsageError(line)
    cls, msg = _java(exc)
    first = (msg.strip().splitlines() or [""])[0][:300] if msg else (text.strip().splitlines() or [""])[0][:300]
    name = cls.rsplit(".", 1)[-1] or type(exc).__name__
    return SparkJobError(f"the Spark job failed ({name}: {first}); see the Spark logs for the failed task")
