"""Reducing a sweep: the run stores collected into ``sweep.zarr``, statistics over seeds, the
boundaries' crossings with their bootstrap intervals, and the figures."""
