"""Code blocks of the README and docs/: found, parsed and (where they are sessions) run."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True, kw_only=True, slots=True)
class Block:
    """One fenced code block."""

    page: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One ``$ command`` of a shell session and the output shown under it."""

    command: str
    shown: str


def blocks(lang: str | None = None) -> list[Block]:
    """Every fenced block of the manual (``lang`` "" for unlabelled ones)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            if lang is None or match.group(1) == lang:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Block(page=page, line=line, lang=match.group(1), text=match.group(2)))
    return found


def session(block: Block) -> list[Step]:
    """The ``$ `` commands of a block (continuation lines joined) with the output under each."""
    steps: list[Step] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        steps.append(Step(command=command, shown="\n".join(shown)))
    return steps


def gpuyield_commands(text: str) -> list[list[str]]:
    """The ``gpuyield`` invocations in a command line: cut at pipes, ``&&``, ``||`` and ``;``
    outside quotes (a jq or grep program may hold a ``|``), comments dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    groups: list[list[str]] = [[]]
    for word in lexer:
        if word in ("|", "||", "&&", ";"):
            groups.append([])
        else:
            groups[-1].append(word)
    return [words[1:] for words in groups if words and words[0] == "gpuyield"]
