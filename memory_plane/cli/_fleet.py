"""`memplane fleet export | report | pack | pull`: many phones' trees as tables, and lessons shared back."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import EXIT_OK, open_plane, positive_int, print_json


def add_fleet_command(command: Any, actions: Any) -> None:
    """The fleet command and its four actions (``command`` and ``actions``: the parser's helpers)."""
    s = command("fleet", "export this phone's lessons and episodes as tables, report across phones (DuckDB or "
                         "Spark), build a pack of lessons verified on many phones and pull it (needs the fleet extra)")
    acts = actions(s)
    a = acts("export", "write what the tree learned since the last export to DEST (a folder or s3://bucket/prefix)")
    a.add_argument("dest", metavar="DEST", help="a folder or an fsspec URL (s3:// uses AWS_ENDPOINT_URL and the "
                                               "usual AWS credentials)")
    a.add_argument("--device", help="the device id the rows carry (default: the tree's one device, else default)")
    a.add_argument("--include-text", action="store_true", help="also the goals' text and the lessons' own words")
    a.add_argument("--include-long-term", action="store_true", help="also the user's long-term memories")
    a.add_argument("--json", action="store_true", help="print the export (rows, files, manifest) as JSON")
    a = acts("report", "per app across devices: success with and without memory, steps, failure modes, lessons")
    a.add_argument("src", metavar="SRC", help="the fleet folder or URL the phones export to")
    a.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb", help="the SQL engine (default duckdb)")
    a.add_argument("--master", help="spark: the master URL (default local[2]; the workers must see SRC's files)")
    a.add_argument("--min-devices", type=positive_int, default=2,
                   help="count lessons verified on at least N devices (default 2)")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a = acts("pack", "write PACK: the lessons active and verified on at least N devices, none forgotten on any")
    a.add_argument("src", metavar="SRC", help="the fleet folder or URL")
    a.add_argument("pack", metavar="PACK", help="the pack file to write (a path or an fsspec URL)")
    a.add_argument("--min-devices", type=positive_int, default=2, help="devices a lesson must hold on (default 2)")
    a.add_argument("--json", action="store_true", help="print what the pack holds as JSON")
    a = acts("pull", "add a pack's lessons to this tree as lessons from the fleet (pulling twice changes nothing)")
    a.add_argument("pack", metavar="PACK", help="the pack file (a path or an fsspec URL)")
    a.add_argument("--device", help="the device id the lessons are for (default: the tree's one device)")
    a.add_argument("--json", action="store_true", help="print what was added and left out as JSON")
    s.set_defaults(func=cmd_fleet)


def cmd_fleet(args: argparse.Namespace) -> int:
    """Run one fleet action and print its result."""
    from .. import fleet

    if args.action == "export":
        with open_plane(args) as plane:
            device = args.device or plane.device.profiles.sole_device_id() or "default"
            tree = fleet.TreeExport(plane.device, plane.episodes, plane.clock, include_text=args.include_text,
                                    long_term=plane.long_term if args.include_long_term else None)
            out = fleet.export_tree(tree, args.dest, device).as_dict()
        line = f"exported {sum(out['rows'].values())} rows" + (f" ({out['manifest']})" if out["manifest"] else
                                                              " (nothing new)")
    elif args.action == "report":
        with fleet.FleetSource.open(args.src) as src:
            out = fleet.fleet_report(src, engine=args.engine, min_devices=args.min_devices, master=args.master)
        line = _report_text(out)
    elif args.action == "pack":
        from datetime import datetime, timezone

        with fleet.FleetSource.open(args.src) as src:
            out = fleet.build_pack(src, min_devices=args.min_devices, now=datetime.now(timezone.utc))
        fleet.write_pack(out, args.pack)
        out = {"pack": args.pack, "pack_id": out["pack_id"], "lessons": len(out["lessons"]),
               "min_devices": out["min_devices"]}
        line = f"{out['lessons']} lessons verified on at least {out['min_devices']} devices -> {args.pack}"
    else:
        pack = fleet.read_pack(args.pack)
        with open_plane(args) as plane:
            device = args.device or plane.device.profiles.sole_device_id() or "default"
            out = fleet.pull_pack(plane.device, pack, device, plane.episodes).as_dict()
        line = (f"added {len(out['added'])} lessons from the fleet; left out: {out['already_here']} already here, "
                f"{out['forgotten']} forgotten here, {out['own_lesson']} learned here, {len(out['invalid'])} invalid")
    if args.json:
        print_json(out)
    else:
        print(line)
    return EXIT_OK


def _report_text(rep: dict[str, Any]) -> str:
    lines = [f"{'app':<20} {'devices':>7} {'episodes':>8} {'success':>7} {'w/ mem':>7} {'w/o mem':>7} "
             f"{'steps w/':>8} {'steps w/o':>9} {'lessons':>7}  top failure"]

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    for app, r in rep["apps"].items():
        top = r.get("top_failures") or []
        lines.append(f"{app[:20]:<20} {f(r.get('devices')):>7} {f(r.get('episodes')):>8} {f(r.get('success_rate')):>7} "
                     f"{f(r.get('success_rate_with_memory')):>7} {f(r.get('success_rate_without_memory')):>7} "
                     f"{f(r.get('median_steps_with_memory')):>8} {f(r.get('median_steps_without_memory')):>9} "
                     f"{r.get('verified_lessons', 0):>7}  {top[0]['cause'] if top else ''}")
    return "\n".join(lines)
