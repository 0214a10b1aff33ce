"""`fleet report`: per app, across devices, the same SQL on DuckDB (embedded) or Spark (local or a cluster)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory_plane.lifecycle import UsageError

from ._source import FleetSource

SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "episodes": [("episode_id", "string"), ("device", "string"), ("export_id", "string"), ("app", "string"),
                 ("outcome", "string"), ("failure_cause", "string"), ("steps", "bigint"),
                 ("memory_followed", "boolean")],
    "lessons": [("id", "string"), ("device", "string"), ("export_id", "string"), ("type", "string"),
                ("app", "string"), ("lesson_key", "string"), ("status", "string"), ("verified", "boolean"),
                ("source", "string")],
    "tombstones": [("id", "string"), ("device", "string")],
}
"""The columns the report reads of each table (the rest of a row is for other readers)."""

_DUCK = {"string": "VARCHAR", "bigint": "BIGINT", "boolean": "BOOLEAN"}

_EPISODES = ("SELECT * FROM (SELECT e.*, ROW_NUMBER() OVER (PARTITION BY device, episode_id ORDER BY export_id) "
             "AS n FROM episodes e) x WHERE n = 1")
_WIN = "CASE WHEN outcome = 'success' THEN 1.0 ELSE 0.0 END"
PER_APP = f"""
SELECT app, COUNT(DISTINCT device) AS devices, COUNT(*) AS episodes,
       AVG({_WIN}) AS success_rate,
       AVG(CASE WHEN memory_followed THEN {_WIN} END) AS success_rate_with_memory,
       AVG(CASE WHEN NOT memory_followed THEN {_WIN} END) AS success_rate_without_memory,
       MEDIAN(CASE WHEN memory_followed THEN steps END) AS median_steps_with_memory,
       MEDIAN(CASE WHEN NOT memory_followed THEN steps END) AS median_steps_without_memory
FROM ({_EPISODES}) e
WHERE app IS NOT NULL
GROUP BY app ORDER BY app
"""
FAILURES = f"""
SELECT app, failure_cause AS cause, COUNT(*) AS episodes, COUNT(DISTINCT device) AS devices
FROM ({_EPISODES}) e
WHERE app IS NOT NULL AND outcome <> 'success'
GROUP BY app, failure_cause ORDER BY app, episodes DESC, cause
"""
VERIFIED = """
SELECT app, lesson_key, COUNT(DISTINCT device) AS devices
FROM (SELECT l.*, ROW_NUMBER() OVER (PARTITION BY device, id ORDER BY export_id DESC) AS newest
      FROM lessons l) l
WHERE newest = 1 AND status = 'active' AND verified AND COALESCE(source, 'device') <> 'fleet'
  AND NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.device = l.device AND t.id = l.id)
GROUP BY app, lesson_key HAVING COUNT(DISTINCT device) >= {min_devices}
ORDER BY app, devices DESC, lesson_key
"""
"""The report's SQL, run as is by both engines (an episode two manifests name is counted once; a lesson a phone
only pulled from the fleet is no device's evidence for it)."""

Rows = list[dict[str, Any]]
TOP_FAILURES = 3


def _duckdb(src: FleetSource) -> Callable[[str], Rows]:
    import duckdb

    con = duckdb.connect()
    for table, cols in SCHEMAS.items():
        spec = ", ".join(f"'{c}': '{_DUCK[t]}'" for c, t in cols)
        files = src.files.get(table) or []
        if files:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_json([{listed}], format='newline_delimited', "
                        f"columns={{{spec}}}, compression='gzip')")
        else:
            empty = ", ".join(f"CAST(NULL AS {_DUCK[t]}) AS {c}" for c, t in cols)
            con.execute(f"CREATE VIEW {table} AS SELECT {empty} WHERE false")

    def run(sql: str) -> Rows:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    return run


_SPARK: dict[str, Any] = {}


def spark_session(master: str | None = None) -> Any:
    """One Spark session for this process (``local[2]`` unless a master URL is given); its UI is off."""
    from pyspark.sql import SparkSession

    key = master or "local[2]"
    if key not in _SPARK:
        _SPARK[key] = (SparkSession.builder.master(key).appName("memplane-fleet")
                       .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                       .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    return _SPARK[key]


def _spark(src: FleetSource, master: str | None) -> Callable[[str], Rows]:
    spark = spark_session(master)
    for table, cols in SCHEMAS.items():
        ddl = ", ".join(f"{c} {t.upper()}" for c, t in cols)
        files = src.files.get(table) or []
        df = spark.read.schema(ddl).json(files) if files else spark.createDataFrame([], ddl)
        df.createOrReplaceTempView(table)

    def run(sql: str) -> Rows:
        return [r.asDict() for r in spark.sql(sql).collect()]

    return run


def _num(v: Any) -> Any:
    # Both engines' numbers as the same JSON: a decimal or float rounded, a whole count as an int.
    if v is None or isinstance(v, (bool, int)):
        return v
    return round(float(v), 4)


def fleet_report(src: FleetSource, *, engine: str = "duckdb", min_devices: int = 2,
                 master: str | None = None) -> dict[str, Any]:
    """Per app: devices, episodes, success rate with and without a followed memory, median steps with and without,
    the top failure modes by cause, and the lessons verified on at least ``min_devices`` devices."""
    if engine not in ("duckdb", "spark"):
        raise UsageError(f"unknown engine {engine!r}: duckdb or spark")
    try:
        run = _duckdb(src) if engine == "duckdb" else _spark(src, master)
    except ImportError as exc:
        raise UsageError(f"--engine {engine} needs the fleet extra ({exc}): pip install 'memory-plane[fleet]'") \
            from None
    apps: dict[str, dict[str, Any]] = {}
    for row in run(PER_APP):
        apps[str(row["app"])] = {k: _num(v) for k, v in row.items() if k != "app"}
        apps[str(row["app"])].update(top_failures=[], verified_lessons=0)
    for row in run(FAILURES):
        entry = apps.get(str(row["app"]))
        if entry is not None and len(entry["top_failures"]) < TOP_FAILURES:
            entry["top_failures"].append({"cause": row["cause"], "episodes": row["episodes"],
                                          "devices": row["devices"]})
    for row in run(VERIFIED.format(min_devices=int(min_devices))):
        entry = apps.setdefault(str(row["app"]), {"top_failures": [], "verified_lessons": 0})
        entry["verified_lessons"] += 1
    return {"engine": engine, "manifests": src.manifests, "min_devices": int(min_devices), "apps": apps}
