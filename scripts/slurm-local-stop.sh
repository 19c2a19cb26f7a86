#!/usr/bin/env bash
# Stop the cluster of scripts/slurm-local-start.sh: cancel its jobs, kill slurmd, slurmctld and
# (if the start script started it) munged by the PIDs in their pidfiles, each checked against
# /proc/PID/comm first (a reused PID is never killed; a zombie counts as stopped), and put back
# /etc/slurm/{slurm,gres}.conf. Safe to run when nothing is up.
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
for f in slurm.conf gres.conf; do
  if [ -L "/etc/slurm/$f" ] && [ "$(readlink "/etc/slurm/$f")" = "$D/etc/$f" ]; then rm -f "/etc/slurm/$f"; fi
  if [ -e "/etc/slurm/$f.pre-local-slurm" ] && [ ! -e "/etc/slurm/$f" ]; then
    mv "/etc/slurm/$f.pre-local-slurm" "/etc/slurm/$f"
  fi
done
if [ "${LOCAL_SLURM_PURGE:-0}" = 1 ]; then rm -rf "$D"; fi
echo "slurm-local-stop: stopped (state $D)"
