"""Reducing a sweep: the run stores collected into ``sweep.zarr``, statistics over seeds, the
boundaries' crossings with their confidence intervals (docs/statistics.md), and the figures."""
