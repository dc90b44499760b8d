#!/usr/bin/env bash
# A private two-node Slurm cluster on this machine, on loopback only, for testing the sbatch recipe.
#
#   scripts/slurm_local.sh start DIR [PORT]   # then: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm_local.sh stop DIR
#
# `start` writes a munge key, slurm.conf and all state, spool and log files under DIR, and starts
# munged, slurmctld and two slurmd daemons (nodes "127.0.0.1" and "127.0.0.2", 2 CPUs each, one
# partition "debug"), then waits until both nodes are idle. The daemons listen on 127.0.0.1 only:
# slurmctld on PORT (default 16817), the two slurmd on PORT + 1 and PORT + 2. The recipe puts
# learner k alone on node k and the actors on the nodes after them, so even one learner needs two
# nodes; both names are loopback addresses, so the host lists the batch script builds from them
# work here. `stop` cancels every job of the cluster and stops its daemons (TERM, then KILL after
# 10 s).
#
# Needs root (SlurmUser=root), Slurm >= 20.11 and munge: `apt-get install slurm-wlm munge`. Set
# SLURM_CONF before any Slurm command: without it a client looks for the controller in DNS.
# See docs/clusters.md, "How the recipes are tested".
set -euo pipefail

NODES=(127.0.0.1 127.0.0.2)

usage() {
  echo "usage: $0 start DIR [PORT] | stop DIR" >&2
  exit 2
}

# stop_pids DIR FILE...: TERM the processes named in the pid FILEs whose command lines name DIR
# (a pid file can outlive its process), wait for them together, KILL those alive after 10 s.
stop_pids() {
  local dir=$1 file pid i pids=() alive=()
  shift
  for file in "$@"; do
    [[ -s $file ]] || continue
    pid=$(<"$file")
    if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"; then
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  for ((i = 0; i < 100; i++)); do
    alive=()
    for pid in "${pids[@]}"; do
      [[ -e /proc/$pid ]] && alive+=("$pid")
    done
    ((${#alive[@]})) || break
    sleep 0.1
  done
  for pid in "${alive[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$@"
}

start() {
  local dir=$1 port=$2 k
  if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1024 || port > 65533)); then
    echo "error: PORT must be a number from 1024 to 65533, not '$port'" >&2
    exit 2
  fi
  if [[ $(id -u) != 0 ]]; then
    echo "error: $0 needs root (the cluster runs with SlurmUser=root)" >&2
    exit 2
  fi
  for tool in munged slurmctld slurmd sinfo; do
    if ! command -v "$tool" >/dev/null; then
      echo "error: $tool not found; install Slurm and munge: apt-get install slurm-wlm munge" >&2
      exit 2
    fi
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)
  mkdir -p "$dir/state" "$dir/munge"
  chmod 700 "$dir" "$dir/munge"
  if [[ ! -s $dir/munge/munge.key ]]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
  fi
  : >"$dir/plugstack.conf"
  {
    echo "# Written by scripts/slurm_local.sh: a private test cluster, loopback only."
    echo "ClusterName=impalatest"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=$port"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool-%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/slurmctld.log"
    echo "SlurmdLogFile=$dir/slurmd-%n.log"
    echo "PlugStackConfig=$dir/plugstack.conf"
    echo "SlurmdParameters=config_overrides"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/linear"
    echo "SchedulerType=sched/builtin"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    echo "MailProg=/bin/true"
    echo "JobRequeue=0"
    echo "ReturnToService=2"
    echo "MinJobAge=3600"
    echo "KillWait=5"
    echo "InactiveLimit=0"
    for k in "${!NODES[@]}"; do
      echo "NodeName=${NODES[k]} NodeHostname=${NODES[k]} NodeAddr=127.0.0.1" \
        "Port=$((port + 1 + k)) CPUs=2 RealMemory=4000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf

  munged --force --origin=127.0.0.1 --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed"
  slurmctld -f "$SLURM_CONF" -i
  for node in "${NODES[@]}"; do
    slurmd -f "$SLURM_CONF" -N "$node"
  done
  local states=""
  for ((k = 0; k < 300; k++)); do
    states=$(sinfo -h -N -o "%N=%T" 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [[ $states == "127.0.0.1=idle 127.0.0.2=idle " ]]; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.1
  done
  echo "error: nodes not idle after 30 s (${states:-no answer}); logs in $dir; stop it with:" \
    "$0 stop $dir" >&2
  exit 1
}

stop() {
  local dir=$1 k
  [[ -d $dir ]] || return 0
  dir=$(cd "$dir" && pwd -P)
  if [[ -f $dir/slurm.conf && -s $dir/slurmctld.pid ]]; then
    export SLURM_CONF=$dir/slurm.conf
    scancel --quiet --user=root 2>/dev/null || true
    for ((k = 0; k < 100; k++)); do
      [[ -z $(squeue -h -o %i 2>/dev/null || true) ]] && break
      sleep 0.1
    done
  fi
  stop_pids "$dir" "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munged.pid"
}

case "${1:-}" in
  start) (($# == 2 || $# == 3)) || usage; start "$2" "${3:-16817}" ;;
  stop) (($# == 2)) || usage; stop "$2" ;;
  *) usage ;;
esac
