#!/usr/bin/env bash
# Stop the cluster of scripts/slurm-local-start.sh: cancel its jobs, kill slurmd, slurmctld and
# (if the start script started it) munged by the PIDs in their pidfiles, each checked against
# /proc/PID/comm first (a reused PID is never killed; a zombie counts as stopped), end the
# processes of its jobs that SLURM lost (below), and put back /etc/slurm/{slurm,gres}.conf. Safe
# to run when nothing is up.
#   usage: scripts/slurm-local-stop.sh [STATE_DIR]
# Environment knobs:
#   LOCAL_SLURM_DIR     state dir; default /tmp/attnsweep-slurm (as the start script)
#   LOCAL_SLURM_PURGE   1: delete the state dir afterwards (job ids restart at 1 next time)
set -euo pipefail
D=${1:-${LOCAL_SLURM_DIR:-/tmp/attnsweep-slurm}}
alive() {  # alive PID NAME: PID is a live (non-zombie) process called NAME
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}
stop() {  # stop NAME PIDFILE: TERM, then KILL after 10 s
  local pid; pid=$(cat "$2" 2>/dev/null) || return 0
  if alive "$pid" "$1"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$pid" "$1" || break; sleep 0.1; done
    if alive "$pid" "$1"; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$2"
}

ctld=$(cat "$D/run/slurmctld.pid" 2>/dev/null || true)
if [ -n "$ctld" ] && alive "$ctld" slurmctld && [ -L /etc/slurm/slurm.conf ]; then
  # Jobs still running: cancel them and give slurmd KillWait (5 s) to end their steps.
  timeout 10 scancel --quiet --user=root 2>/dev/null || true
  for _ in $(seq 70); do [ -z "$(timeout 5 squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.1; done
fi
stop slurmd "$D/run/slurmd.pid"
stop slurmctld "$D/run/slurmctld.pid"
stop munged "$D/run/munged.pid"

# Processes of this cluster's jobs that SLURM lost. proctrack/linuxproc (the start script's) finds a
# job's processes by their parent links: when a cancelled job's shell exits first, a process that
# outlives SIGTERM (a job that ignores it, a Snakemake shutting down) is reparented and no longer
# part of the job, which is reported done at once, and it runs on (tests/workflow/test_slurm.py makes one).
# (proctrack/pgid would find it, but the tests' pytest, a child subreaper, reaps orphans only at
# its end, and their zombies keep a finished job's process group alive: slurmd then drains the
# node, "Kill task failed".) Every job process carries its cluster in SLURM_WORKING_CLUSTER: TERM
# them, KILL what is left after 10 s, as the daemons above.
port=$(sed -n 's/^SlurmctldPort=//p' "$D/etc/slurm.conf" 2>/dev/null || true)
strays() {  # pids of the processes whose environment names this cluster, besides this script's own
  [ -n "$port" ] || return 0
  grep -lzx "SLURM_WORKING_CLUSTER=localcluster:127\.0\.0\.1:$port:.*" /proc/[0-9]*/environ 2>/dev/null \
    | sed -n 's#^/proc/\([0-9]*\)/environ$#\1#p' | grep -vx -e "$$" -e "$PPID" || true
}
left=$(strays)
if [ -n "$left" ]; then
  echo "slurm-local-stop: ending processes of its jobs that SLURM lost:" $left >&2
  kill -TERM $left 2>/dev/null || true
  end=$((SECONDS + 10))
  while [ -n "$left" ] && [ $SECONDS -lt $end ]; do sleep 0.1; left=$(strays); done
  if [ -n "$left" ]; then kill -KILL $left 2>/dev/null || true; fi
fi
for f in slurm.conf gres.conf; do
  if [ -L "/etc/slurm/$f" ] && [ "$(readlink "/etc/slurm/$f")" = "$D/etc/$f" ]; then rm -f "/etc/slurm/$f"; fi
  if [ -e "/etc/slurm/$f.pre-local-slurm" ] && [ ! -e "/etc/slurm/$f" ]; then
    mv "/etc/slurm/$f.pre-local-slurm" "/etc/slurm/$f"
  fi
done
if [ "${LOCAL_SLURM_PURGE:-0}" = 1 ]; then rm -rf "$D"; fi
echo "slurm-local-stop: stopped (state $D)"
