#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine without systemd: munged, slurmctld and
# slurmd started by hand, their state, spool and logs under DIR (default
# /tmp/scanledger-slurm). Needs root and Debian's `slurm-wlm` and `munge` packages
# (`apt-get install -y slurm-wlm munge`). Running it again on a running cluster does nothing.
#
#   sudo bash scripts/slurm-one-node.sh [DIR]
#   sudo bash scripts/slurm-one-node.sh --stop [DIR]     stops slurmd, slurmctld and munged
#
# The node is declared with this machine's real CPUs and memory (`slurmd -C`), with
# `select/cons_tres` (`CR_Core_Memory`, 256 MB a CPU by default) and a partition that lets up to
# 8 jobs share a core (`OverSubscribe=FORCE:8`), so the jobs of a small test (a coordinator that
# mostly waits, a few shard tasks, a merge) run side by side on two cores. Requeued jobs may start again after 10 s (`cred_expire`; the
# default is 120 s) and the scheduler looks at pending jobs every 2 s: both only to keep a
# test short. The configuration goes to DIR/slurm.conf and, when /etc/slurm has none, is
# linked there so sbatch, squeue and scontrol find it without SLURM_CONF.
set -euo pipefail

stop=
if [ "${1:-}" = "--stop" ]; then stop=1; shift; fi
dir=${1:-/tmp/scanledger-slurm}
conf=$dir/slurm.conf

if [ -n "$stop" ]; then
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" /run/munge/munged.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  exit 0
fi

for tool in munged slurmctld slurmd sbatch scontrol; do
  command -v "$tool" >/dev/null || { echo "slurm-one-node: $tool is not installed (apt-get install -y slurm-wlm munge)" >&2; exit 1; }
done

export SLURM_CONF=$conf
if scontrol ping 2>/dev/null | grep -q 'is UP' && sinfo -h -o '%T' 2>/dev/null | grep -q -E '^(idle|mixed|allocated)'; then
  echo "slurm-one-node: already up ($conf)"
  exit 0
fi

mkdir -p "$dir/state" "$dir/spool"
chmod 0755 "$dir"

# munge: its key (made by the package) and its socket directory.
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
[ -f /etc/munge/munge.key ] || { mungekey --create; chown munge:munge /etc/munge/munge.key; }
if ! munge -n >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
fi
munge -n | unmunge >/dev/null || { echo "slurm-one-node: munged does not answer" >&2; exit 1; }

host=$(hostname -s)
# "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105"; keep CPUs and RealMemory.
hw=$(slurmd -C | head -n 1)
cpus=$(printf '%s\n' "$hw" | tr ' ' '\n' | sed -n 's/^CPUs=//p')
mem=$(printf '%s\n' "$hw" | tr ' ' '\n' | sed -n 's/^RealMemory=//p')
cat >"$conf" <<EOF
ClusterName=scanledger
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
ReturnToService=2
JobRequeue=1
MinJobAge=3600
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
if [ ! -e /etc/slurm/slurm.conf ]; then
  mkdir -p /etc/slurm
  ln -s "$conf" /etc/slurm/slurm.conf
fi

pgrep -F "$dir/slurmctld.pid" >/dev/null 2>&1 || slurmctld -f "$conf"
for _ in $(seq 1 50); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done
scontrol ping | grep -q 'is UP' || {
  echo "slurm-one-node: slurmctld is not up:" >&2
  tail -n 5 "$dir/slurmctld.log" >&2
  exit 1
}
pgrep -F "$dir/slurmd.pid" >/dev/null 2>&1 || slurmd -f "$conf"
for _ in $(seq 1 100); do
  state=$(sinfo -h -o '%T' 2>/dev/null | head -n 1)
  case "$state" in idle*|mixed*|allocated*) break ;; esac
  sleep 0.2
done
scontrol update NodeName="$host" State=RESUME 2>/dev/null || true
sinfo -h -o '%T' | grep -q -E '^(idle|mixed|allocated)' || {
  echo "slurm-one-node: the node is not up (see $dir/slurmctld.log, $dir/slurmd.log)" >&2
  sinfo >&2 || true
  exit 1
}
echo "slurm-one-node: up, node $host ($cpus CPUs, $mem MB), $conf"
