"""Showing the work: each result is a ``Step`` (formula, numbers substituted, result) on a sheet.

Ranges go through formulas by ``propagate``: every formula here is monotonic in each input, so
its extremes lie at corners of the input box, and the caller says in which direction each input
pushes the result. The low result takes every input at the end that lowers it; the high result
takes the other end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gpuyield.estimate.numbers import Range, format_number, format_percent, format_range


class Direction(Enum):
    """How the result moves when an input grows."""

    UP = 1
    DOWN = -1


UP = Direction.UP
DOWN = Direction.DOWN


def propagate(
    fn: Callable[..., float], directions: Mapping[str, Direction], **inputs: Range
) -> Range:
    """Evaluate ``fn`` on low, central and high corners; exact for functions monotonic per input."""
    assert set(directions) == set(inputs), f"directions {sorted(directions)} != {sorted(inputs)}"

    def corner(want_high: bool) -> float:
        args = {
            name: (value.high if (directions[name] is UP) == want_high else value.low)
            for name, value in inputs.items()
        }
        return fn(**args)

    central = fn(**{name: value.central for name, value in inputs.items()})
    low, high = corner(False), corner(True)
    # A declared direction that is wrong shows up here, not as a silently swapped range.
    assert low <= central <= high, (
        f"{fn.__name__} is not monotonic as declared: {low} {central} {high}"
    )
    return Range(low=low, central=central, high=high)


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One line of shown work."""

    #: Key of the result (``flops``, ``gpu_hours``); also its JSON key.
    name: str
    #: What it is, in words.
    label: str
    #: The formula in symbols (``C = 6 * N * D``); ``input`` for a given value.
    formula: str
    #: The formula with numbers in place of symbols, so a reader can redo it by hand.
    substituted: str
    #: The result.
    value: Range
    #: Unit of the result (``FLOP``, ``GPU-h``, ``days``); ``%`` shows a fraction as a percentage.
    unit: str = ""
    #: Where a given value comes from (catalog source, the essay, the user).
    source: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("step.name must not be empty")

    @property
    def shown(self) -> str:
        """The value formatted with its unit."""
        return show(self.value, self.unit)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        data: dict[str, Any] = {
            "name": self.name,
            "label": self.label,
            "formula": self.formula,
            "substituted": self.substituted,
            "value": self.value.to_dict(),
            "unit": self.unit,
        }
        if self.source:
            data["source"] = self.source
        return data


def show(value: Range, unit: str = "") -> str:
    """Format a value with its unit; ``%`` means the value is a fraction."""
    return format_percent(value) if unit == "%" else format_range(value, unit)


def given(name: str, label: str, value: Range, unit: str = "", source: str = "") -> Step:
    """A step for an input value, shown with where it came from."""
    return Step(
        name=name,
        label=label,
        formula="input",
        substituted=show(value, unit),
        value=value,
        unit=unit,
        source=source or "given",
    )


def term(value: Range, unit: str = "") -> str:
    """A value as it appears inside a substituted formula: bare number or ``[low .. high]``."""
    if unit == "%":
        return format_percent(value) if value.is_point else f"[{format_percent(value)}]"
    if value.is_point:
        return format_number(value.central)
    return f"[{format_range(value)}]"


@dataclass(frozen=True, kw_only=True, slots=True)
class Worksheet:
    """A titled list of steps, plus notes a reader needs (assumptions, caveats)."""

    #: Heading of the worksheet.
    title: str
    #: Inputs and computed steps in the order they were done.
    steps: tuple[Step, ...]
    #: Caveats and assumptions, one sentence each.
    notes: tuple[str, ...] = field(default=())

    def step(self, name: str) -> Step:
        """The step called ``name``."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "title": self.title,
            "steps": [step.to_dict() for step in self.steps],
            "notes": list(self.notes),
        }


def to_markdown(sheet: Worksheet) -> str:
    """The worksheet as a Markdown table, for pasting into a post."""
    lines = [
        f"### {sheet.title}",
        "",
        "| step | formula | substituted | result | source |",
        "|---|---|---|---|---|",
    ]
    for step in sheet.steps:
        cells = (step.label, step.formula, step.substituted, step.shown, step.source)
        lines.append("| " + " | ".join(_md_cell(cell) for cell in cells) + " |")
    if sheet.notes:
        lines.append("")
        lines.extend(f"- {note}" for note in sheet.notes)
    return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    # `|` would end the cell and `*` would start emphasis in most renderers.
    return text.replace("|", "\\|").replace("*", "\\*")


def compute(
    name: str,
    label: str,
    formula: str,
    template: str,
    fn: Callable[..., float],
    directions: Mapping[str, Direction],
    unit: str = "",
    **inputs: Range,
) -> Step:
    """A computed step: ``fn`` propagated over ``inputs``; ``template`` names them in braces."""
    value = propagate(fn, directions, **inputs)
    substituted = template.format(**{key: term(val) for key, val in inputs.items()})
    return Step(
        name=name, label=label, formula=formula, substituted=substituted, value=value, unit=unit
    )
