#!/bin/bash
# typed-workload.sh ROLES_TSV -- jobs on the typed fleet of typed-gres.sh (n1, n2: 8 x h100;
# n3, n4: 4 x a100), every way a job asks for GPUs there. About a minute. Run as root with
# SLURMLAB set to the running lab. ROLES_TSV gets `job<TAB>ROLE<TAB>JOBID` per job.
#
#   pt-typed    --gres=gpu:h100:4 on n1, the release lineage (run=pt-typed), 8 s
#   a100-exp    --gres=gpu:a100:2 on n3, an experiment, 5 s
#   untyped     --gres=gpu:2 (no type) on n4: AllocTRES still names the type it got
#   span        -N 2 on n2 + n3, --gres=gpu:2: two GPUs of each kind
#   uneven      -N 2 on n1 + n4, --gpus=12: Slurm gives 8 H100 + 4 A100 (not 6 + 6)
#   h100-fail   --gres=gpu:h100:8 on n2, exits 1 (FAILED), 3 s
#   a100-cancel --gres=gpu:a100:4 on n4, cancelled while running
#   exclusive   --exclusive --gres=gpu:h100:2 on n1: ReqTRES says 2, AllocTRES 8
#   live        --gres=gpu:a100:1 on n3, still running at the capture (GresUsed, scontrol -d)
set -u
OUT=${1:?usage: typed-workload.sh ROLES_TSV}
LAB=${SLURMLAB:?SLURMLAB must name the running lab}
J=$LAB/jobs
cd "$J" || exit 1
: > "$OUT"
log() { echo "$(date +%FT%T) typed-workload: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
sb() { # sb ROLE SBATCH_ARGS... : submit, record the role
  local role=$1 id; shift
  id=$(sbatch --parsable --chdir="$J" -o /dev/null -c 1 -J "$role" "$@") || die "sbatch failed for $role: $*"
  id=${id%%;*}
  printf 'job\t%s\t%s\n' "$role" "$id" >> "$OUT"
  log "submitted $role = $id: $*"
  echo "$id"
}
state_of() { squeue -h -j "$1" -o %T 2>/dev/null; }
waitstate() { # waitstate JOBID STATE TIMEOUT_S
  for _ in $(seq 1 "$3"); do [ "$(state_of "$1")" = "$2" ] && return 0; sleep 1; done
  die "job $1 not $2 after $3 s (now: $(state_of "$1"))"
}
gone() { # gone JOBID TIMEOUT_S
  for _ in $(seq 1 "$2"); do [ -z "$(state_of "$1")" ] && return 0; sleep 1; done
  die "job $1 still queued after $2 s ($(state_of "$1"))"
}

PT=$(sb pt-typed -w n1 --gres=gpu:h100:4 --comment=run=pt-typed --wrap='sleep 8') || exit 1
EXP=$(sb a100-exp -w n3 --gres=gpu:a100:2 --comment=run=a100-exp --wrap='sleep 5') || exit 1
UNT=$(sb untyped -w n4 --gres=gpu:2 --comment=run=untyped --wrap='sleep 4') || exit 1
SPAN=$(sb span -N 2 -w n2,n3 --gres=gpu:2 --comment=run=span --wrap='sleep 5') || exit 1
gone "$PT" 60; gone "$SPAN" 60; gone "$EXP" 60; gone "$UNT" 60
# Whole nodes of both kinds now free: 8 H100 on n1, 4 A100 on n4.
UNEVEN=$(sb uneven -N 2 -w n1,n4 --gpus=12 --comment=run=uneven --wrap='sleep 5') || exit 1
FAIL=$(sb h100-fail -w n2 --gres=gpu:h100:8 --comment=run=h100-fail --wrap='sleep 3; exit 1') || exit 1
gone "$UNEVEN" 60
CX=$(sb a100-cancel -w n4 --gres=gpu:a100:4 --comment=run=a100-cancel --wrap='sleep 300') || exit 1
EXCL=$(sb exclusive -w n1 --exclusive --gres=gpu:h100:2 --comment=run=exclusive --wrap='sleep 3') || exit 1
waitstate "$CX" RUNNING 30; sleep 4
scancel "$CX"; log "scancel $CX"
gone "$CX" 30; gone "$EXCL" 60; gone "$FAIL" 60
LIVE=$(sb live -w n3 --gres=gpu:a100:1 --comment=run=live --wrap='sleep 1800') || exit 1
waitstate "$LIVE" RUNNING 30
log "done; still running: $LIVE"
