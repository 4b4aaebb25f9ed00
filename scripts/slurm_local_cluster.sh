#!/usr/bin/env bash
# A two-node Slurm cluster on this one machine, for trying albertkit's Slurm support without a
# real cluster: munged, one slurmctld and two slurmd ("node1", "node2") that share the host
# and differ only in their ports. Needs root and Debian's packages:
#
#     apt-get install -y slurmd slurmctld munge slurm-client
#     bash scripts/slurm_local_cluster.sh start
#     srun -N2 -n2 albertkit doctor --run-dir /tmp/doctor --backend tf_multiworker
#     bash scripts/slurm_local_cluster.sh stop
#
# Both "nodes" are this machine, so node1 and node2 are added to /etc/hosts as 127.0.0.1
# (the TF_CONFIG built from the allocation names them). Not a production setup: no cgroups,
# no accounting, root runs the daemons.
set -euo pipefail

CONF_DIR=${SLURM_CONF_DIR:-/etc/slurm}
STATE=${SLURM_LOCAL_STATE:-/var/spool/slurm-local}
LOGS=${SLURM_LOCAL_LOGS:-/var/log/slurm-local}
NODES=(node1 node2)
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-16817}
FIRST_SLURMD_PORT=${SLURM_LOCAL_SLURMD_PORT:-16818}
CPUS=$(nproc)

write_conf() {
  mkdir -p "$CONF_DIR" "$STATE/ctld" "$LOGS"
  {
    echo "ClusterName=albertkit-local"
    echo "SlurmctldHost=$(hostname)(127.0.0.1)"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "SlurmUser=root"
    echo "AuthType=auth/munge"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "ReturnToService=2"
    echo "StateSaveLocation=$STATE/ctld"
    echo "SlurmdSpoolDir=$STATE/%n"
    echo "SlurmctldPidFile=$STATE/slurmctld.pid"
    echo "SlurmdPidFile=$STATE/slurmd-%n.pid"
    echo "SlurmctldLogFile=$LOGS/slurmctld.log"
    echo "SlurmdLogFile=$LOGS/slurmd-%n.log"
    local port=$FIRST_SLURMD_PORT
    for node in "${NODES[@]}"; do
      echo "NodeName=$node NodeHostname=$(hostname) NodeAddr=127.0.0.1 Port=$port CPUs=$CPUS State=UNKNOWN"
      port=$((port + 1))
    done
    echo "PartitionName=local Nodes=node[1-${#NODES[@]}] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
  } > "$CONF_DIR/slurm.conf"
  for node in "${NODES[@]}"; do mkdir -p "$STATE/$node"; done
}

add_hosts() {
  local node
  for node in "${NODES[@]}"; do
    grep -qE "^127\.0\.0\.1[[:space:]].*\b$node\b" /etc/hosts || echo "127.0.0.1 $node" >> /etc/hosts
  done
}

start_munge() {
  mkdir -p /run/munge
  chown munge:munge /run/munge
  chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  if ! munge -n >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
  fi
  munge -n | unmunge >/dev/null
}

start() {
  write_conf
  add_hosts
  start_munge
  /usr/sbin/slurmctld
  for node in "${NODES[@]}"; do /usr/sbin/slurmd -N "$node"; done
  for _ in $(seq 60); do
    if [ "$(sinfo -h -o '%t' -p local 2>/dev/null | sort -u)" = "idle" ]; then
      sinfo
      return 0
    fi
    sleep 1
  done
  echo "the nodes did not become idle; see $LOGS" >&2
  sinfo || true
  return 1
}

stop() {
  local pidfile
  for pidfile in "$STATE"/slurmd-*.pid "$STATE/slurmctld.pid"; do
    [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
