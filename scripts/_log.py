"""Route logging and stderr of a Snakemake script to its log file."""

import logging
import sys


def to_log(path: str) -> None:
    handle = open(path, "a", buffering=1)
    sys.stderr = handle
    logging.basicConfig(stream=handle, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
