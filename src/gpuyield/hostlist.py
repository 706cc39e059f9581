"""Slurm hostlists (``n[001-004,007],gpu-a1``): expansion in Python and as a DuckDB SQL macro."""

from __future__ import annotations

import re

from gpuyield.errors import InputError

# Top-level items of a hostlist: a name with at most one bracket group, then an optional suffix.
_ITEM = re.compile(r"([^,\[\]]*)(?:\[([^\]]*)\])?([^,\[\]]*)(?:,|$)")
_EMPTY_LISTS = frozenset({"", "None assigned", "(null)", "None"})
# The most names one hostlist may hold. The largest Slurm clusters have tens of thousands of nodes;
# a list of millions is a typo or an attack, and expanding it would take minutes and gigabytes.
# Checked by counting (``hostlist_size``), before anything is expanded.
MAX_HOSTLIST_NAMES = 1_000_000


def spaceless(text: str) -> str:
    """``text`` with whitespace dropped as Slurm's hostlist parser drops it: around commas
    (``c1, c[2-3]``), at the ends, and between names, where a blank separates like a comma."""
    text = text.strip()
    if text in _EMPTY_LISTS:  # "None assigned" is Slurm's word for no nodes, not two names
        return text
    return _BLANKS.sub(",", text) if _HAS_BLANK.search(text) else text


_BLANKS = re.compile(r"\s*[,\s]\s*")
_HAS_BLANK = re.compile(r"\s")


def hostlist_size(text: str) -> int:
    """How many names a hostlist holds, counted from its ranges without expanding them."""
    text = spaceless(text)
    if text in _EMPTY_LISTS:
        return 0
    total = 0
    pos = 0
    while pos < len(text):
        match = _ITEM.match(text, pos)
        if match is None or match.end() == pos:
            raise InputError(f"cannot read hostlist {text!r} at {text[pos:]!r}")
        ranges = match.group(2)
        total += 1 if ranges is None else _ranges_size(ranges, text)
        pos = match.end()
    return total


def _ranges_size(ranges: str, text: str) -> int:
    total = 0
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise InputError(f"bad range {part!r} in hostlist {text!r}")
        if int(high or low) < int(low):
            # Slurm refuses it; counted as no names it would leave GPU time on no node.
            raise InputError(f"descending range {part!r} in hostlist {text!r}")
        total += int(high or low) - int(low) + 1
    return total


def expand_hostlist(text: str, *, max_names: int = MAX_HOSTLIST_NAMES) -> list[str]:
    """Expand a Slurm hostlist into node names, keeping zero padding (``n[08-10]`` -> n08, n09, n10).

    A list of more than ``max_names`` names is an error, found before expanding anything.
    """
    text = spaceless(text)
    if text in _EMPTY_LISTS:
        return []
    size = hostlist_size(text)
    if size > max_names:
        raise InputError(
            f"hostlist {text[:60]!r} names {size:,} nodes, more than {max_names:,}",
            hint="a hostlist cannot name more nodes than the cluster has; check the range",
        )
    names: list[str] = []
    pos = 0
    while pos < len(text):
        match = _ITEM.match(text, pos)
        if match is None or match.end() == pos:
            raise InputError(f"cannot read hostlist {text!r} at {text[pos:]!r}")
        prefix, ranges, suffix = match.groups()
        if ranges is None:
            names.append(prefix + suffix)
        else:
            names.extend(prefix + n + suffix for n in _expand_ranges(ranges, text))
        pos = match.end()
    if any(not n for n in names):
        raise InputError(f"empty host name in hostlist {text!r}")
    return names


def _expand_ranges(ranges: str, text: str) -> list[str]:
    out: list[str] = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise InputError(f"bad range {part!r} in hostlist {text!r}")
        width = len(low)
        stop = int(high) if high else int(low)
        if stop < int(low):
            raise InputError(f"descending range {part!r} in hostlist {text!r}")
        out.extend(str(i).zfill(width) for i in range(int(low), stop + 1))
    return out


# The same expansion in SQL, so millions of job node lists expand inside DuckDB.
# Slurm prints one bracket group per name (n[01-04]-ib); a list with two (rack[1-2]-n[1-4]) is not
# read, and the sacct check names its record (ingest/sacct/typed.py, "cannot read node list").
HOSTLIST_MACRO_SQL = r"""
CREATE OR REPLACE TEMP MACRO hostlist_items(hl) AS
    regexp_extract_all(hl, '[^,\[\]]*(?:\[[^\]]*\])?[^,\[\]]*');
CREATE OR REPLACE TEMP MACRO hostlist_expand_item(item) AS
    CASE WHEN strpos(item, '[') = 0 THEN [item]
    ELSE flatten(list_transform(
        -- Each range with the name's prefix and suffix, taken once per range, not once per name.
        list_transform(
            string_split(regexp_extract(item, '\[([^\]]*)\]', 1), ','),
            lambda r: {'prefix': split_part(item, '[', 1), 'suffix': split_part(item, ']', 2),
                       'low': split_part(r, '-', 1),
                       'high': coalesce(nullif(split_part(r, '-', 2), ''), split_part(r, '-', 1))}
        ),
        lambda g: list_transform(
            range(CAST(g.low AS BIGINT), CAST(g.high AS BIGINT) + 1),
            lambda i: g.prefix
                 -- lpad would cut numbers longer than the padding width (n[95-100] -> n10)
                 || CASE WHEN length(CAST(i AS VARCHAR)) >= length(g.low)
                         THEN CAST(i AS VARCHAR)
                         ELSE lpad(CAST(i AS VARCHAR), CAST(length(g.low) AS INTEGER), '0')
                    END
                 || g.suffix
        )
    ))
    END;
-- How many names a list holds, from its ranges (no expansion; DOUBLE: digits past BIGINT count).
CREATE OR REPLACE TEMP MACRO hostlist_size(hl) AS
    coalesce(list_sum(list_transform(list_filter(hostlist_items(hl), lambda x: x <> ''),
        lambda item: CASE WHEN strpos(item, '[') = 0 THEN 1.0
            ELSE list_sum(list_transform(
                string_split(regexp_extract(item, '\[([^\]]*)\]', 1), ','),
                lambda r: greatest(0.0,
                    coalesce(TRY_CAST(nullif(split_part(r, '-', 2), '') AS DOUBLE),
                             TRY_CAST(split_part(r, '-', 1) AS DOUBLE))
                    - TRY_CAST(split_part(r, '-', 1) AS DOUBLE) + 1)))
            END)), 0);
CREATE OR REPLACE TEMP MACRO hostlist_expand(hl) AS
    flatten(list_transform(list_filter(hostlist_items(hl), lambda x: x <> ''), lambda x: hostlist_expand_item(x)));
"""
