"""Running a job: the simulate step's code path, its device, dtype and random numbers, the warm
fork server that keeps the heavy imports of a local run, and the results directory's lock."""
