#!/bin/bash
# Refuse a job that skips a rung of the scaling ladder (docs/ladder.md), before it burns GPU-hours.
#
# As Slurm's PrologSlurmctld (slurm.conf: PrologSlurmctld=/etc/slurm/preflight-prolog.sh): reads the
# job's run=/family= comment and its GPUs with scontrol; a non-zero exit makes Slurm requeue and
# hold the job, with this script's message in slurmctld's log.
# As a CI or launcher step: GPUYIELD_GPUS=512 GPUYIELD_RUN=llama3-70b-r2 preflight-prolog.sh
# (or GPUYIELD_FAMILY=... instead of GPUYIELD_RUN). GPUYIELD_DB: the store; GPUYIELD: the command.
#
# Exit 0: allowed, or the ladder does not apply (no family, no GPUs); 3: refused, the missing rung
# named on stderr. A check that cannot run (no database, gpuyield missing) follows GPUYIELD_ON_ERROR:
# "allow" (default: never stop the cluster because the ledger is down) or "refuse".
set -u
GPUYIELD=${GPUYIELD:-gpuyield}
DB=${GPUYIELD_DB:-/var/lib/gpuyield/gpuyield.duckdb}
ON_ERROR=${GPUYIELD_ON_ERROR:-allow}
family=${GPUYIELD_FAMILY:-}
run=${GPUYIELD_RUN:-}
gpus=${GPUYIELD_GPUS:-}
at=${GPUYIELD_AT:+--at=$GPUYIELD_AT}  # check as of another instant (replays, tests)

broken() {
  echo "preflight-prolog: $1; GPUYIELD_ON_ERROR=$ON_ERROR" >&2
  [ "$ON_ERROR" = refuse ] && exit 1
  exit 0
}

if [ -z "$gpus" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
  job=$(scontrol show job -o "$SLURM_JOB_ID") || broken "scontrol show job $SLURM_JOB_ID failed"
  field() { tr ' ' '\n' <<<"$job" | sed -n "s/^$1=//p" | head -1; }
  comment=$(field Comment)
  # Allocated GPUs at prolog time; requested ones for a job not started yet.
  gpus=$( { field TRES; field ReqTRES; } | grep -o 'gres/gpu=[0-9]*' | head -1 | cut -d= -f2)
  family=$(grep -o 'family=[^,]*' <<<"$comment" | head -1 | cut -d= -f2)
  run=$(grep -o 'run=[^,]*' <<<"$comment" | head -1 | cut -d= -f2)
fi
if [ -z "$gpus" ] || [ "$gpus" -eq 0 ] || { [ -z "$family" ] && [ -z "$run" ]; }; then
  exit 0  # no GPUs or no run/family tag: nothing the ladder speaks about
fi
if [ -n "$family" ]; then who=(--family "$family"); else who=(--run "$run"); fi
"$GPUYIELD" preflight --db "$DB" --gpus "$gpus" "${who[@]}" ${at:+"$at"}
status=$?
case $status in
  0|3) exit $status ;;
  *) broken "gpuyield preflight exited $status" ;;
esac
