"""Check that a Snakemake report holds every figure of a run, each byte for byte as on disk.

usage: python scripts/check-report.py [REPORT] [CONFIG]   (defaults: report.html, config/config.yaml)

The figures expected are those the config plans (``Experiment.figures``); the report embeds each
PNG as a base64 ``data_uri`` under its path. Exits 1 with one line naming what is missing or
different; `.ci/run` runs it after the README's main command.
"""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

from attnsweep.plan.config import load_sweep, load_yaml

ENTRY = re.compile(r'"([^"]+\.png)": \{"name".*?"data_uri": "data:image/png;[^,"]*base64,([^"]*)"', re.DOTALL)


def main() -> int:
    report = Path(sys.argv[1] if len(sys.argv) > 1 else "report.html")
    sweep = load_sweep(load_yaml(sys.argv[2] if len(sys.argv) > 2 else "config/config.yaml"))
    embedded = dict(ENTRY.findall(report.read_text()))
    wanted = [f"{sweep.results}/{name}/figures/{fig.name}.png" for name, plan in sweep.plans.items()
              for fig in plan.experiment.figures(plan.grid, plan.options)]
    for path in wanted:
        if path not in embedded:
            print(f"{report}: no figure {path} ({len(embedded)} embedded)", file=sys.stderr)
            return 1
        if base64.b64decode(embedded[path]) != Path(path).read_bytes():
            print(f"{report}: {path} differs from the file on disk", file=sys.stderr)
            return 1
    print(f"{report}: all {len(wanted)} figures of the run, each equal to its file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
