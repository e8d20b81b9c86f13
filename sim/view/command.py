"""``dragonet view``: the web page of a live pool, from a dump of the cluster's objects.

The parser imports nothing heavy: plotly and the renderer load when the command runs, so
``--help`` and a refused argument answer at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DUMP = "kubectl get nodes,pods,trainingpools,tfjobs,mxjobs,admissions -A -o json"

EXAMPLES = f"""\
examples:
  {DUMP} > state.json
  dragonet view state.json --html pool.html

The same page as `dragonet simulate --html` draws for a run: every job's timeline (waiting,
admitted with its workers, preempted, moved) and story (its Admission's phase, reason and
message, its pods and their nodes, its conditions), and each node's allocation per resource.
A dump has no clock: "now" is its latest timestamp.

exit status: 0 when the page was written; 2 for a file that is not a readable List of
objects or an output that cannot be written (one line naming the file and field);
3 for an internal error.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "view",
        help="write a web page of a live pool from a dump of its objects",
        description="Render a Kubernetes List of a cluster's objects (Nodes, Pods,\n"
        "TrainingPools, TFJobs, MXJobs, Admissions) as one static HTML page.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("dump", help=f"the cluster's objects as a List ({DUMP})")
    v.add_argument("--html", required=True, metavar="HTML", help="the page to write")


def run(args: argparse.Namespace) -> int:
    from sim.cli import output_problem

    if problem := output_problem("--html", args.html, ".html"):
        print(f"dragonet view: {problem}", file=sys.stderr)
        return 2
    from sim.view.pool import DumpError, load, write_html

    try:
        dump = load(args.dump)
    except DumpError as err:
        print(f"dragonet view: {err}", file=sys.stderr)
        return 2
    size = write_html(dump, args.html, Path(args.dump).name)
    print(
        f"wrote {args.html} ({size / 2**20:.1f} MiB): {len(dump.jobs)} jobs on "
        f"{len(dump.nodes)} nodes",
        file=sys.stderr,
    )
    return 0
