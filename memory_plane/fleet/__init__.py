"""The fleet side: a phone's tree exported as tables, read across phones by DuckDB or Spark, and lessons shared back.

Nothing here is imported by the phone's runtime: fsspec, s3fs, DuckDB and PySpark load inside these functions only
(the ``fleet`` extra), and ``memory_plane`` does not import this package."""

from ._dest import TABLES, FleetDest
from ._export import ExportResult, TreeExport, export_tree
from ._pack import FLEET_CONFIDENCE, PullResult, build_pack, fleet_id, pull_pack, read_pack, write_pack
from ._report import fleet_report, spark_session
from ._rows import FLEET_TYPES, fleet_key, lesson_row, personal_values, screen_class, shareable
from ._source import FleetSource

__all__ = ["FLEET_CONFIDENCE", "FLEET_TYPES", "TABLES", "ExportResult", "FleetDest", "FleetSource", "PullResult",
           "TreeExport", "build_pack", "export_tree", "fleet_id", "fleet_key", "fleet_report", "lesson_row",
           "personal_values", "pull_pack", "read_pack", "screen_class", "shareable", "spark_session", "write_pack"]
