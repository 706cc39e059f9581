"""The ladder's verdict on a launch, as ``gpuyield preflight`` prints it.

What the submit-time check answers (``rungs.preflight`` from the store, ``ladder_cache`` from the
file beside it): the evidence that lets a family climb, the verdict and its wording. Apart from
the ladder's policy this imports only the standard library, so the check that answers from the
cache never loads the manifest's model or DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyield.families import LadderPolicy
from gpuyield.safetext import visible
from gpuyield.times import iso_utc


@dataclass(frozen=True, kw_only=True, slots=True)
class Evidence:
    """The completed run that lets a family climb (or the highest one, when it is not enough)."""

    run: str
    """Run name."""
    gpus: int
    """GPUs of its completed job."""
    end_s: int
    """When that job completed (epoch seconds)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PreflightResult:
    """Whether the ladder lets a family launch a run on ``gpus`` GPUs at ``at_s``."""

    family: str
    """The family asked about."""
    gpus: int
    """GPUs of the run to launch."""
    at_s: int
    """The instant checked (epoch seconds)."""
    policy: LadderPolicy
    """The ladder of the stored manifest."""
    required_gpus: int | None
    """GPUs of the completed run needed first (None on the first rung)."""
    evidence: Evidence | None
    """The largest completed run of the family within ``within_days`` before ``at_s``."""
    from_summary: bool
    """True when answered from ``ladder_completed``; False when the jobs were scanned."""
    known_family: bool
    """False when neither the manifest nor any job names this family."""
    elapsed_s: float
    """Time the check took (for the record; benchmarks measure it properly)."""

    @property
    def allowed(self) -> bool:
        """True when the run may launch."""
        if self.required_gpus is None:
            return True
        return self.evidence is not None and self.evidence.gpus >= self.required_gpus

    @property
    def missing_rungs(self) -> tuple[int, ...]:
        """Rungs below the run that no recent completed run reached."""
        reached = None if self.evidence is None else self.evidence.gpus
        return self.policy.missing_rungs(self.gpus, reached)

    def to_dict(self) -> dict[str, object]:
        """The verdict as ``gpuyield preflight --json`` prints it (docs/ladder.md)."""
        evidence = self.evidence
        return {
            "family": self.family,
            "gpus": self.gpus,
            "at": iso_utc(self.at_s),
            "allowed": self.allowed,
            "required_gpus": self.required_gpus,
            "missing_rungs": list(self.missing_rungs),
            "evidence": None
            if evidence is None
            else {"run": evidence.run, "gpus": evidence.gpus, "completed": iso_utc(evidence.end_s)},
            "known_family": self.known_family,
            "ladder": {"rungs": list(self.policy.rungs), "within_days": self.policy.within_days},
            "from_summary": self.from_summary,
        }

    def verdict(self) -> str:
        """One line: ``ok: ...`` (the launch may go) or ``refused: ...`` naming the missing rung."""
        family, evidence = visible(self.family), self.evidence
        if self.allowed:
            why = (
                "the first rung needs nothing before it"
                if self.required_gpus is None or evidence is None
                else f"run {visible(evidence.run)} completed on {evidence.gpus} GPUs at "
                f"{iso_utc(evidence.end_s)}"
            )
            return f"ok: family {family} may launch on {self.gpus} GPUs: {why}"
        best = (
            "nothing completed then"
            if evidence is None
            else f"the largest completed is {evidence.gpus} GPUs (run {visible(evidence.run)})"
        )
        return (
            f"refused: family {family} on {self.gpus} GPUs needs a completed run on "
            f"{self.required_gpus} GPUs within {self.policy.within_days:g} days; {best}; "
            f"missing rung(s) {', '.join(map(str, self.missing_rungs))}"
        )

    def note(self) -> str | None:
        """A refused family that no job and no ``[[families]]`` names: a typo?"""
        if self.allowed or self.known_family:
            return None
        return (
            f"note: no job and no [[families]] entry names family {visible(repr(self.family))}: "
            "a typo?"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Printed:
    """What a command prints: each stream's text, empty or ending in a newline."""

    stdout: str
    stderr: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchCheck:
    """``gpuyield preflight``'s answer: the ladder's verdict, or a run in no family."""

    result: PreflightResult | None
    """The verdict; None when ``run`` belongs to no family (the ladder does not apply)."""
    run: str | None
    """The run asked about (None when asked by family)."""

    @property
    def allowed(self) -> bool:
        """True when the launch may go."""
        return self.result is None or self.result.allowed

    @property
    def stdout_text(self) -> str | None:
        """What ``gpuyield preflight`` prints on stdout: the verdict of an allowed launch."""
        if self.result is None:
            return (
                f"ok: run {visible(self.run or '')} belongs to no family: the ladder does not apply"
            )
        return self.result.verdict() if self.result.allowed else None

    @property
    def stderr_text(self) -> str | None:
        """What it prints on stderr: a refusal, and a note when the family may be a typo."""
        if self.result is None or self.result.allowed:
            return None
        note = self.result.note()
        return self.result.verdict() + ("" if note is None else "\n" + note)

    def printed(self, *, as_json: bool) -> Printed:
        """What ``gpuyield preflight [--json]`` prints: one line per message, never re-wrapped
        (hooks pass them on to logs and terminals); JSON as every ``--json`` is written."""
        if as_json and self.result is not None:
            import json

            return Printed(stdout=json.dumps(self.result.to_dict(), indent=2) + "\n", stderr="")
        out, err = self.stdout_text, self.stderr_text
        return Printed(
            stdout="" if out is None else out + "\n", stderr="" if err is None else err + "\n"
        )
