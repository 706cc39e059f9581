#!/bin/bash
# typed-gres.sh -- turn a running slurm-lab (../shared/slurm-lab/start-slurm.sh, 4 nodes) into a
# mixed fleet with typed GPUs, the way a site declares them:
#   n1, n2  Gres=gpu:h100:8  Feature=h100,sxm5     gres.conf  NodeName=n[1-2] Name=gpu Type=h100 ...
#   n3, n4  Gres=gpu:a100:4  Feature=a100,sxm4     gres.conf  NodeName=n[3-4] Name=gpu Type=a100 ...
#   slurm.conf  AccountingStorageTRES=gres/gpu,gres/gpu:h100,gres/gpu:a100
#
# start-slurm.sh generates /etc/slurm and is read-only, so this overlay edits the generated files
# after it ran, then restarts slurmctld and every slurmd (munged, MariaDB and slurmdbd keep
# running). The daemons it starts carry the lab's SLURMLAB_TAG marker and pid files under
# $SLURMLAB/run, so the lab's stop-slurm.sh stops them as its own. About 15 s.
#
# Usage (as root, lab running):  SLURMLAB=/tmp/gpuyield-slurmlab-XXXX tests/slurm/typed-gres.sh
# The test session applies it in tests/slurm/typed_lab.py (the typed phase of the lab fixture,
# and `python -m tests.slurm.typed_lab record DIR`, which recorded tests/ingest/fixtures/slurm-typed).
# Running start-slurm.sh again afterwards writes the untyped config back (and warns).
set -euo pipefail
LAB=${SLURMLAB:?SLURMLAB must name the running lab}
RUN=$LAB/run
export SLURMLAB_TAG="$LAB"   # stop-slurm.sh stops only processes carrying this marker
log() { echo "$(date +%FT%T) typed-gres: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
ours() { [ -n "${1:-}" ] && [ -d "/proc/$1" ] && grep -qz "^SLURMLAB_TAG=$LAB\$" "/proc/$1/environ" 2>/dev/null; }

stop() { # stop NAME: the lab's daemon with pid file NAME.pid, if it is ours
  local f=$RUN/$1.pid p
  [ -s "$f" ] || return 0
  p=$(cat "$f")
  ours "$p" || { log "$1 (pid $p) not running or not ours: left alone"; return 0; }
  kill -TERM "$p"
  for _ in $(seq 1 30); do [ -d "/proc/$p" ] || return 0; sleep 1; done
  die "$1 (pid $p) did not stop"
}
launch() { # launch NAME CMD...: as start-slurm.sh does (setsid, log, pid file)
  local name=$1; shift
  setsid "$@" </dev/null >>"$LAB/log/$name.stdout" 2>&1 &
  echo $! > "$RUN/$name.pid"
  log "started $name pid $!"
}

squeue -h -o %i | grep -q . && die "jobs are queued; the overlay restarts the nodes: run it on an empty queue"
for i in 1 2 3 4; do stop "slurmd-n$i"; done
stop slurmctld

conf=/etc/slurm/slurm.conf
grep -q '^NodeName=n4 ' "$conf" || die "$conf does not declare n1..n4 (SLURMLAB_NODES=4)"
sed -i \
  -e 's|^AccountingStorageTRES=.*|AccountingStorageTRES=gres/gpu,gres/gpu:h100,gres/gpu:a100|' \
  -e 's|^\(NodeName=n[12] .*\)$|\1 Gres=gpu:h100:8 Feature=h100,sxm5|' \
  -e 's|^\(NodeName=n[34] .*\)$|\1 Gres=gpu:a100:4 Feature=a100,sxm4|' \
  "$conf"
cat > /etc/slurm/gres.conf <<EOF
# written by gpuyield tests/slurm/typed-gres.sh: fake typed GPUs, no autodetection
AutoDetect=off
NodeName=n[1-2] Name=gpu Type=h100 File=$LAB/fakedev/nvidia[0-7]
NodeName=n[3-4] Name=gpu Type=a100 File=$LAB/fakedev/nvidia[0-3]
EOF
log "wrote typed GRES into $conf and /etc/slurm/gres.conf"

launch slurmctld /usr/sbin/slurmctld -D -i
for _ in $(seq 1 60); do scontrol ping >/dev/null 2>&1 && break; sleep 1; done
for i in 1 2 3 4; do launch "slurmd-n$i" /usr/sbin/slurmd -D -N "n$i"; done
for _ in $(seq 1 90); do
  states=$(sinfo -h -N -p gpu -o '%N=%T' | sort -u)
  if [ "$(grep -c '=idle$' <<<"$states")" = 4 ]; then
    log "typed fleet up: $(sinfo -h -N -p gpu -o '%N:%G' | sort -u | xargs)"
    exit 0
  fi
  sleep 1
done
die "nodes did not come back idle: $(echo $states)"
