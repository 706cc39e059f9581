#!/bin/bash
# workload.sh ROLES_TSV -- the integration test's own workload for the slurm-lab cluster
# (../shared/slurm-lab/start-slurm.sh: nodes n1..n4, 8 fake GPUs each, partitions gpu / scavenger /
# urgent, ReturnToService=1). About 2 minutes. Run as root with SLURMLAB set to the running lab.
#
# Node plan (why each node): n3 never has a node event, so the failure causes of the jobs there
# (software, timeout) cannot be turned into "hardware" by the ledger's event-proximity rule.
#   n1  pt-main-1 (release lineage) dies NODE_FAIL when an admin sets n1 DOWN; later ft-main-2;
#       requeue-victim is requeued by an admin and runs again (two sacct -D rows, one job id).
#   n2  scavenger job PREEMPTED by an urgent job; then n2 is DRAINED (idle) for maintenance, the
#       one planned down time (no MAINT reservation: 22.05's rollup miscounts Down next to one).
#   n3  TIMEOUT, lineage TIMEOUT chunk (ft-main-1), FAILED, CANCELLED, array, diverged run,
#       and pt-main-2, which continues the lineage after pt-main-1's NODE_FAIL.
#   n4  slurmd killed under a non-lineage job: NODE_FAIL plus a DOWN* "Not responding" event.
#   n1+n2  a two-node job once both are back; n2 also keeps one job RUNNING for the capture and
#       one PENDING behind it (it asks for all 8 GPUs of n2);
#       n3 runs a CPU-only job (AllocTRES without gres/gpu: zero GPUs, not an unknown count).
#
# ROLES_TSV gets one line per job or node action, for the test to check that the scenario it
# relies on really happened:  job<TAB>ROLE<TAB>JOBID   or   node<TAB>ACTION<TAB>NODE<TAB>EPOCH_S
set -u
OUT=${1:?usage: workload.sh ROLES_TSV}
LAB=${SLURMLAB:?SLURMLAB must name the running lab}
J=$LAB/jobs
cd "$J" || exit 1
: > "$OUT"
log() { echo "$(date +%FT%T) workload: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

sb() { # sb ROLE SBATCH_ARGS... : submit, record the role
  local role=$1 id; shift
  id=$(sbatch --parsable --chdir="$J" -o '%x-%j.out' "$@") || die "sbatch failed for $role: $*"
  id=${id%%;*}
  printf 'job\t%s\t%s\n' "$role" "$id" >> "$OUT"
  log "submitted $role = $id: $*"
  echo "$id"
}
node_action() { # node_action ACTION NODE [SCONTROL_ARGS...]
  local action=$1 node=$2; shift 2
  if [ $# -gt 0 ]; then scontrol update nodename="$node" "$@" || die "scontrol update $node $* failed"; fi
  printf 'node\t%s\t%s\t%s\n' "$action" "$node" "$(date +%s)" >> "$OUT"
  log "$action $node $*"
}
state_of() { squeue -h -j "$1" -o %T 2>/dev/null; }
waitstate() { # waitstate JOBID STATE TIMEOUT_S
  for _ in $(seq 1 "$3"); do [ "$(state_of "$1")" = "$2" ] && return 0; sleep 1; done
  die "job $1 not $2 after $3 s (now: $(state_of "$1"))"
}
gone() { # gone JOBID TIMEOUT_S : wait until the job has left the queue
  for _ in $(seq 1 "$2"); do [ -z "$(state_of "$1")" ] && return 0; sleep 1; done
  die "job $1 still queued after $2 s ($(state_of "$1"))"
}
node_is() { # node_is NODE REGEX TIMEOUT_S : wait until sinfo's long state matches REGEX
  for _ in $(seq 1 "$3"); do sinfo -h -n "$1" -o %T | head -1 | grep -Eq "$2" && return 0; sleep 1; done
  die "node $1 not /$2/ after $3 s (now: $(sinfo -h -n "$1" -o %T | head -1))"
}
elapsed_of() { squeue -h -j "$1" -o %M 2>/dev/null | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'; }
ran_for() { # ran_for JOBID SECONDS : wait until the running job has run at least SECONDS
  waitstate "$1" RUNNING 30
  for _ in $(seq 1 120); do [ "$(elapsed_of "$1")" -ge "$2" ] 2>/dev/null && return 0; sleep 1; done
  die "job $1 did not reach $2 s of run time"
}
log "start"

# ---- everything that can start at once
PT1=$(sb pt-main-1 -J pt-main-1 -w n1 --no-requeue --gres=gpu:4 -c 1 --comment=run=pt-main --wrap='sleep 300') || exit 1
sb exp-ok -J exp-ok -w n1 --gres=gpu:2 -c 1 --comment=run=exp1 --wrap='sleep 4' >/dev/null
RQ=$(sb requeue-victim -J requeue-victim -w n1 --gres=gpu:1 -c 1 --comment=run=rq1 \
  --wrap='if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 3; else sleep 300; fi') || exit 1
SCAV=$(sb scav-victim -J scav-victim -p scavenger -w n2 --gres=gpu:8 -c 1 --comment=run=scav1 --wrap='sleep 300') || exit 1
TO=$(sb timeout -J timeout-1min -w n3 --time=1 --gres=gpu:1 -c 1 --comment=run=to1 --wrap='sleep 300') || exit 1
FT1=$(sb ft-main-1 -J ft-main-1 -w n3 --time=1 --gres=gpu:2 -c 1 --comment=run=ft-main --wrap='sleep 300') || exit 1
sb fail-exit1 -J fail-exit1 -w n3 --gres=gpu:1 -c 1 --comment=run=bad1 --wrap='sleep 3; exit 1' >/dev/null
CX=$(sb to-cancel -J to-cancel -w n3 --gres=gpu:1 -c 1 --comment=run=cx1 --wrap='sleep 300') || exit 1
sb sweep -J sweep -w n3 --array=0-1 --gres=gpu:1 -c 1 --comment=run=sweep \
  --wrap='sleep $((3 + SLURM_ARRAY_TASK_ID * 2))' >/dev/null
sb div-wide -J div-wide -w n3 --gres=gpu:1 -c 1 --comment=run=div1 --wrap='sleep 5' >/dev/null
NF=$(sb nodefail-victim -J nodefail-victim -w n4 --no-requeue --gres=gpu:2 -c 1 --comment=run=nf1 --wrap='sleep 300') || exit 1

# ---- n4: kill its slurmd under the running job (declared DOWN* about 40 s later)
waitstate "$NF" RUNNING 30; sleep 2
P4=$(cat "$LAB/run/slurmd-n4.pid")
node_action kill-slurmd n4
kill -KILL "$P4" || die "could not kill slurmd-n4 pid $P4"

# ---- n1: requeue a running job: a REQUEUED run, then (Slurm holds it ~2 min) a second run, same id
ran_for "$RQ" 2
scontrol requeue "$RQ" || die "scontrol requeue $RQ failed"; log "scontrol requeue $RQ"

# ---- n2: an urgent job preempts the scavenger job (PreemptMode=CANCEL there -> PREEMPTED)
waitstate "$SCAV" RUNNING 30
URG=$(sb urgent -J urgent-n2 -p urgent -w n2 --gres=gpu:8 -c 1 --comment=run=urg1 --wrap='sleep 5') || exit 1

# ---- n3: scancel a running job
ran_for "$CX" 4
scancel "$CX"; log "scancel $CX"

# ---- n1: admin DOWN while pt-main-1 runs: NODE_FAIL (--no-requeue); pt-main-2 continues the run
ran_for "$PT1" 12
node_action down n1 state=down reason="PSU fault (gpuyield test)"
gone "$PT1" 30
PT2=$(sb pt-main-2 -J pt-main-2 -w n3 --gres=gpu:4 -c 1 --comment=run=pt-main --wrap='sleep 20') || exit 1

# ---- n2: drain once the urgent job is done (idle -> DRAINED at once), resume later
gone "$URG" 60
node_action drain n2 state=drain reason="scheduled maintenance (gpuyield test)"
sleep 15
node_action resume n2 state=resume
node_action resume n1 state=resume

# ---- ft-main: its first chunk hits the time limit (planned in a lineage); the second is cancelled
gone "$FT1" 120
FT2=$(sb ft-main-2 -J ft-main-2 -w n1 --gres=gpu:2 -c 1 --comment=run=ft-main --wrap='sleep 300') || exit 1
ran_for "$FT2" 7
scancel "$FT2"; log "scancel $FT2 (ft-main-2)"

# ---- n4: once declared DOWN*, bring its slurmd back (ReturnToService=1 returns it to service)
node_is n4 '^down' 90
node_action slurmd-declared-down n4
sleep 2
(
  export SLURMLAB_TAG="$LAB"   # stop-slurm.sh only stops processes carrying this marker
  setsid /usr/sbin/slurmd -D -N n4 </dev/null >>"$LAB/log/slurmd-n4.stdout" 2>&1 &
  echo $! > "$LAB/run/slurmd-n4.pid"
)
node_action restart-slurmd n4
node_is n4 '^idle' 60

# ---- after the node events: a two-node job, and one job left RUNNING for the capture
sb multi-node -J multi-node -N 2 -w n1,n2 --ntasks-per-node=1 --gres=gpu:2 --comment=run=mn1 \
  --wrap='srun sleep 5' >/dev/null
sb cpu-only -J cpu-only -w n3 -c 2 --comment=run=cpu1 --wrap='sleep 3' >/dev/null  # no GPUs: 0 GPU-s
LIVE=$(sb still-running -J still-running -w n2 --gres=gpu:1 -c 1 --comment=run=live --wrap='sleep 1800') || exit 1
waitstate "$LIVE" RUNNING 30
# ... and one left waiting for GPUs (n2 has 7 free while LIVE runs): pending GPUs for collect.
QUEUED=$(sb queued -J queued -w n2 --gres=gpu:8 -c 1 --comment=run=queued --wrap='sleep 5') || exit 1
waitstate "$QUEUED" PENDING 30
gone "$PT2" 60; gone "$TO" 60
for _ in $(seq 1 180); do  # the requeued job's second run starts about 2 min after the requeue
  left=$(squeue -h -o %i | grep -vx -e "$LIVE" -e "$QUEUED" | xargs)
  [ -z "$left" ] && break
  sleep 1
done
[ -z "$left" ] || die "jobs still queued: $left"
log "done; still running: $LIVE; waiting: $QUEUED"
