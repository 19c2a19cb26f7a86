#!/usr/bin/env bash
# Start a single-node SLURM cluster on 127.0.0.1 (munge + slurmctld + slurmd) for tests and demos.
# Root only, no systemd needed; the pitfalls it avoids are in the comments below.
#   usage: scripts/slurm-local-start.sh [STATE_DIR]        stop: scripts/slurm-local-stop.sh [STATE_DIR]
# No accounting (starts in ~0.5 s): run snakemake with `--slurm-status-command squeue`; that works
# because MinJobAge >= 3 * --slurm-init-seconds-before-status-checks (sacct is unavailable).
# MinJobAge=3600: slurmctld keeps a finished job an hour, so a test that reads the job history
# at its end (tests/workflow/test_slurm.py) still finds it when a busy machine slows the module past 300 s.
# The config is symlinked at /etc/slurm/slurm.conf (and gres.conf): the slurm jobstep plugin drops
# SLURM_CONF inside jobs, so only the compiled-in path works. A real file there is kept as
# *.pre-local-slurm and put back by the stop script. Running it again while up does nothing.
# Environment knobs:
#   LOCAL_SLURM_DIR         state dir (config, spool, logs, pidfiles); default /tmp/attnsweep-slurm
#   LOCAL_SLURM_INSTALL     1 (default): apt-get install the Debian packages if binaries are missing
#   LOCAL_SLURM_CPUS        CPUs the node advertises (default: the real count, `slurmd -C`)
#   LOCAL_SLURM_MEM_MB      memory the node advertises (default: 90 % of the real memory)
#   LOCAL_SLURM_GPUS        GPUs (gres gpu, no device files) the node advertises; default 0. With
#                           1 or more, jobs asking `--gpus` run here, which is what a GPU profile needs
#   LOCAL_SLURM_CTLD_PORT   slurmctld port (default 6817);  LOCAL_SLURM_SLURMD_PORT  slurmd (6818)
#   LOCAL_SLURM_TIMEOUT     seconds to wait for each daemon (default 30)
set -euo pipefail
D=${1:-${LOCAL_SLURM_DIR:-/tmp/attnsweep-slurm}}
CTLD_PORT=${LOCAL_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${LOCAL_SLURM_SLURMD_PORT:-6818}
TIMEOUT=${LOCAL_SLURM_TIMEOUT:-30}
GPUS=${LOCAL_SLURM_GPUS:-0}
die() { echo "slurm-local-start: $*" >&2; exit 1; }
alive() {  # alive PIDFILE NAME: the pid in PIDFILE is a live (non-zombie) process called NAME
  local pid; pid=$(cat "$1" 2>/dev/null) || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null
}
wait_for() {  # wait_for WHAT COMMAND...: poll COMMAND until it succeeds or TIMEOUT passes
  local what=$1 end=$((SECONDS + TIMEOUT)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "$what did not come up in ${TIMEOUT}s (logs: $D/log)"
    sleep 0.1
  done
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

[ "$(id -u)" -eq 0 ] || die "needs root (daemons run as root, config goes to /etc/slurm)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  [ "${LOCAL_SLURM_INSTALL:-1}" = 1 ] && command -v apt-get >/dev/null \
    || die "SLURM binaries missing: apt-get install slurmctld slurmd slurm-client munge"
  echo "slurm-local-start: installing slurmctld slurmd slurm-client munge" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends \
         slurmctld slurmd slurm-client munge >/dev/null; } || die "apt-get install failed"
fi

if alive "$D/run/slurmctld.pid" slurmctld && alive "$D/run/slurmd.pid" slurmd; then
  echo "slurm-local-start: already running (state $D)"; exit 0
fi
for port in "$CTLD_PORT" "$SLURMD_PORT"; do
  listening "$port" && die "port $port is busy (another SLURM?); set LOCAL_SLURM_CTLD_PORT/SLURMD_PORT"
done

H=$(hostname -s)
read -r cpus real_mem < <(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*RealMemory=\([0-9]*\).*/\1 \2/p')
CPUS=${LOCAL_SLURM_CPUS:-$cpus}
MEM=${LOCAL_SLURM_MEM_MB:-$((real_mem * 9 / 10))}
mkdir -p "$D"/{etc,spool/ctld,spool/d,run,log}
gres_line="" node_gres=""
: > "$D/etc/gres.conf"
if [ "$GPUS" -gt 0 ]; then
  gres_line="GresTypes=gpu" node_gres="Gres=gpu:$GPUS"
  # slurmd drops GPUs without device files: give it /dev/null twins (nothing opens them).
  mkdir -p "$D/dev"
  for i in $(seq 0 $((GPUS - 1))); do [ -e "$D/dev/gpu$i" ] || mknod "$D/dev/gpu$i" c 1 3; done
  echo "NodeName=$H Name=gpu File=$D/dev/gpu[0-$((GPUS - 1))]" > "$D/etc/gres.conf"
fi
cat > "$D/etc/slurm.conf" <<EOF
ClusterName=localcluster
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/d
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
DefMemPerCPU=$((MEM / CPUS))
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=3600
KillWait=5
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$gres_line
NodeName=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM $node_gres State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOF
mkdir -p /etc/slurm
for f in slurm.conf gres.conf; do
  if [ -e "/etc/slurm/$f" ] && [ ! -L "/etc/slurm/$f" ]; then mv "/etc/slurm/$f" "/etc/slurm/$f.pre-local-slurm"; fi
  ln -sfn "$D/etc/$f" "/etc/slurm/$f"
done

# munge: reuse one that works; otherwise start ours and remember its pid for the stop script.
if ! (munge -n | unmunge) >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
  runuser -u munge -- munged
  wait_for munged sh -c 'munge -n | unmunge'
  cp /run/munge/munged.pid "$D/run/munged.pid"
fi
alive "$D/run/slurmctld.pid" slurmctld || slurmctld
wait_for slurmctld listening "$CTLD_PORT"
wait_for slurmctld sh -c 'scontrol ping | grep -q UP'
alive "$D/run/slurmd.pid" slurmd || slurmd
wait_for slurmd sh -c "sinfo -h -N -n $H -o %T | grep -qE '^(idle|mixed|allocated)'"
echo "slurm-local-start: up on 127.0.0.1 (node $H: $CPUS CPUs, $MEM MB, $GPUS GPUs; partition debug; state $D)"
