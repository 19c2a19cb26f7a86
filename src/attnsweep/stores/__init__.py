"""The stores: how a job's and a sweep's results are written (atomically, with provenance), their
two layouts as seen from outside, the running marker beside a store being written, and the
checks of stores at rest."""
