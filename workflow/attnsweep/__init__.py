"""attnsweep: parameter sweeps of self-attention dynamics as a Snakemake workflow."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnsweep")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"
