"""How each benchmark's figures read in docs/benchmarks.md: one renderer per benchmark, from its
``bench/out/<name>.json`` to the Markdown between its markers (``bench/docs.py`` writes them).

Every number shown is one the JSON carries (rounded here, never computed from a guess); the line
above each table says which command measured it, when, at which commit and under what load. A
figure the JSON lacks is a ``KeyError``: the benchmark has to record it, not the page invent it.
"""

from __future__ import annotations

import re

from bench.docs_format import Figures, jobs, megs, met, millis, page, secs, table, times


def _ledger_verdict(figures: Figures) -> str:
    """The issues' targets, met or not at each size, from the figures' own booleans."""
    goal = figures["targets"]
    lines = []
    for size in figures["sizes"]:
        lines.append(
            f"At {jobs(size['jobs'])} jobs: (ingest + report) at most {goal['ratio_to_count']:g}x "
            f"the `count(*)` and {megs(goal['peak_rss_mb'])} peak: {met(size['meets_targets'])}; "
            f"the ingest at most {goal['ingest_to_into_file']:g}x DuckDB's load into a file and "
            f"{megs(goal['ingest_rss_over_into_file_mb'])} above its peak: "
            f"{met(size['meets_ingest_targets'])}."
        )
    return "\n".join(lines)


_READS = ("count", "all_fields", "materialise", "into_file", "floor_store")
_LEDGER_HEADS = (
    [
        "jobs",
        "sacct",
        "`count(*)`",
        "every field",
        "CTAS",
        "into a file",
        "floor of a store",
        "ingest",
        "report",
    ],
    [
        "jobs",
        "(ingest + report) / count",
        "/ every field",
        "/ CTAS",
        "/ into a file",
        "/ floor",
        "floor / count",
        "ingest / into a file",
        "same, CPU",
    ],
    [
        "jobs",
        "into a file CPU",
        "ingest CPU",
        "report CPU",
        "into a file peak RSS",
        "ingest peak RSS",
        "report peak RSS",
        "yield",
        "load (1m) before",
    ],
)


def _ledger_rows(size: Figures) -> tuple[list[str], list[str], list[str]]:
    """One size's row of each of the three tables: wall times, ratios, CPU and peaks."""
    bare, n = size["bare_read"], jobs(size["jobs"])
    walls = [n, f"{size['sacct_mb']:,.1f} MB", *(secs(bare[r]["wall_s"]) for r in _READS)]
    walls += [secs(size["ingest"]["wall_s"], 1), secs(size["report"]["wall_s"], 1)]
    keys = ("ratio_to_count", "ratio_to_all_fields", "ratio_to_materialise", "ratio_to_into_file")
    ratios = [n, *(times(size[k], 1) for k in (*keys, "ratio_to_floor_store"))]
    ratios += [times(size["floor_store_to_count"], 1), f"**{times(size['ingest_to_into_file'])}**"]
    ratios.append(times(size["ingest_cpu_to_into_file"]))
    cpu = [n, secs(bare["into_file"]["cpu_s"], 1), secs(size["ingest"]["cpu_s"], 1)]
    cpu += [secs(size["report"]["cpu_s"], 1), megs(bare["into_file"]["peak_rss_mb"])]
    cpu += [megs(size["ingest"]["peak_rss_mb"]), megs(size["report"]["peak_rss_mb"])]
    cpu += [f"{size['report_json']['yield']:.4f}", str(size["load_avg_1m_before"])]
    return walls, ratios, cpu


def ledger(figures: Figures) -> str:
    """Per size: the five bare reads, ingest and report, their ratios, CPU and peaks."""
    rows = [_ledger_rows(size) for size in figures["sizes"]]
    tables = [
        table(head, "l" + "r" * (len(head) - 1), [row[i] for row in rows])
        for i, head in enumerate(_LEDGER_HEADS)
    ]
    return page(figures, *tables, _ledger_verdict(figures))


def collect(figures: Figures) -> str:
    """Per size: the day's jobs, collect against the day alone (each best of its runs), the
    report before and after, collect's peak RSS."""
    rows = []
    for key, size in figures.items():
        if key == "recorded":
            continue
        walls = {
            k: ", ".join(f"{s:.2f}" for s in size[k]["all_wall_s"])
            for k in ("collect", "day_alone")
        }
        before, after = size["report_before"]["wall_s"], size["report_after"]["wall_s"]
        rows.append(
            [
                f"{size['history_rows']:,} ({jobs(size['jobs'])} set)",
                f"{size['jobs_new']:,} / {size['jobs_updated']:,} / {size['jobs_unchanged']:,}",
                f"{secs(size['collect']['wall_s'])} ({walls['collect']})",
                f"{secs(size['day_alone']['wall_s'])} ({walls['day_alone']})",
                f"**{times(size['collect_over_day_alone'])}**",
                f"{before:.2f} -> {after:.2f} s ({size['report_growth']:+.1%})",
                megs(size["collect"]["peak_rss_mb"]),
            ]
        )
    verdicts = []
    for key, size in figures.items():
        if key != "recorded":
            goal, ok = size["targets"], size["targets_met"]
            verdicts.append(
                f"At {jobs(size['jobs'])} jobs: collect within {goal['collect_s']:g} s: "
                f"{met(ok['collect_at_most_5_s'])}; within {goal['collect_over_day_alone']:g}x "
                f"the day alone: {met(ok['collect_at_most_2x_day_alone'])}; the report within "
                f"{goal['report_growth']:.0%} of before: {met(ok['report_growth_at_most_10_percent'])}."
            )
    head = ["jobs in store", "day: new / updated / unchanged", "collect (runs)", "day alone (runs)"]
    head += ["collect / alone", "report before -> after", "peak RSS (collect)"]
    return page(figures, table(head, "llrrrll", rows), "\n".join(verdicts))


def collect_output(figures: Figures) -> str:
    """Per output size: peak RSS streamed and held in memory, and over the output."""
    base = figures["interpreter"]["peak_rss_mb"]
    rows = []
    for key, size in figures.items():
        if not key.endswith("MB"):
            continue
        over = size["peak_over_output"]
        rows.append(
            [
                key.replace("MB", " MB"),
                f"{megs(size['streamed']['peak_rss_mb'])} ({over['streamed']:.2f}x)",
                f"{megs(size['in_memory']['peak_rss_mb'])} ({over['in_memory']:.2f}x)",
                megs(base),
            ]
        )
    head = ["output", "streamed: peak RSS (x the output above the interpreter)"]
    head += ["in memory (the old way): peak RSS", "interpreter alone"]
    return page(figures, table(head, "rrrr", rows))


def serve(figures: Figures) -> str:
    """Per size: ingest, first snapshot, memory, and ``/metrics`` under load against the two
    servers of the same bytes."""
    rows = []
    for size in figures["sizes"]:
        ours = size["gpuyield"]
        static, exporter = size["baseline_static"], size["baseline_exporter"]
        rows.append(
            [
                jobs(size["jobs"]),
                secs(size["ingest"]["wall_s"], 1),
                secs(size["first_snapshot_s"], 1),
                megs(size["serve_peak_rss_mb_building"]),
                megs(size["serve_rss_mb_after_load"]),
                f"{ours['requests_per_s']:,.0f}",
                millis(ours["p50_ms"]),
                f"**{millis(ours['p99_ms'])}**",
                millis(static["p99_ms"]),
                f"**{times(size['p99_ratio_to_static'])}**",
                f"{millis(exporter['p99_ms'])} ({exporter['requests_per_s']:,.1f} req/s)",
                str(ours["errors"]),
                str(size["load_average_1m"]),
            ]
        )
    head = ["jobs", "ingest", "first snapshot", "serve peak RSS (building)", "RSS serving"]
    head += ["`/metrics` req/s", "p50", "**p99**", "stdlib p99", "ratio", "exporter p99"]
    head += ["errors", "load (1m)"]
    clients = f"{figures['clients']} keep-alive clients for {figures['load_s']:g} s each."
    return page(figures, clients, table(head, "lrrrrrrrrrrrr", rows))


def preflight(figures: Figures) -> str:
    """The floor, the fast path and the full CLI for a refused and an allowed check."""

    def row(label: str, timed: Figures, bold: bool = False) -> list[str]:
        cpu = f"{timed['cpu_median_s']:.2f} s"
        return [
            label,
            f"{timed['wall_median_s']:.3f} s ({timed['wall_min_s']:.3f} s)",
            f"**{cpu}**" if bold else cpu,
        ]

    refused, allowed = figures["refused_by_family"], figures["allowed_by_run"]
    rows = [
        row("`python -c pass` (the floor)", figures["interpreter"]),
        row("fast path, a family refused 4,096 GPUs", refused["fast"], bold=True),
        row("fast path, a run allowed through the manifest's patterns", allowed["fast"], True),
    ]
    # Runs since the ladder cache (gpuyield.ladder_cache) also time the first check after the
    # store changed, which opens the store and writes the cache.
    if "first_after_a_change" in refused:
        rows.append(row("first check after a change, refused", refused["first_after_a_change"]))
        rows.append(row("first check after a change, allowed", allowed["first_after_a_change"]))
    rows.append(row("full CLI (baseline), refused", refused["baseline_full_cli"]))
    rows.append(row("full CLI (baseline), allowed", allowed["baseline_full_cli"]))
    ratios = [refused["baseline_over_fast_cpu"], allowed["baseline_over_fast_cpu"]]
    rows.append(["baseline / fast path (CPU)", f"{min(ratios)}x to {max(ratios)}x", ""])
    store = (
        f"{figures['jobs']:,} jobs ({figures['store_mb']} MB store), load average "
        f"{figures['load_average_1min_before']} before, {figures['load_average_1min_after']} after"
    )
    imports = figures["importtime_fast"]
    said = (
        f"`python -X importtime`: the fast path imports {imports['modules']} modules whose own "
        f"times sum to {imports['total_ms']} ms, the full CLI's {figures['importtime_full_cli_total_ms']} ms."
    )
    target = (
        f"Target {figures['target_s']:g} s: by the wall median "
        f"{met(figures['under_target_wall'])}, by the CPU median {met(figures['under_target_cpu'])}."
    )
    return page(
        figures, table([store, "wall median (min)", "CPU median"], "lll", rows), said, target
    )


def report_html(figures: Figures) -> str:
    """The page's size, ``report --html`` against ``report --json`` on the same store."""
    best = figures["html_wall_s"].index(min(figures["html_wall_s"]))
    row = [
        f"`{figures['store']}`",
        f"{figures['page_bytes'] / 1e6:.2f} MB",
        f"{figures['html_wall_s'][best]:.1f} s ({figures['html_cpu_s'][best]:.1f} s)",
        secs(min(figures["json_wall_s"]), 1),
        times(figures["ratio_html_to_json"], 1),
        megs(figures["html_peak_rss_mb"]),
        "met" if figures["within_targets"] else "not met",
    ]
    head = ["store", "page", "`report --html` best wall (its CPU)", "`report --json` best wall"]
    head += ["html / json", "peak RSS (html)", "targets (15 s, 1 MB)"]
    return page(figures, table(head, "lrlrrrl", [row]))


def weights(figures: Figures) -> str:
    """The typed (priced, two GPU classes) and untyped reports of the same scenario."""
    shape, typed, untyped = figures["shape"], figures["typed"], figures["untyped"]
    row = [
        f"{shape['num_nodes']} nodes, {shape['days']} days",
        f"{typed['research_jobs']:,}",
        f"{secs(untyped['wall_s'], 1)}, {megs(untyped['peak_rss_mb'])}",
        f"{secs(typed['wall_s'], 1)}, {megs(typed['peak_rss_mb'])}",
        f"{times(figures['ratio_wall'])} time, {times(figures['ratio_peak_rss'])} RSS",
    ]
    head = ["shape", "research jobs", "untyped", "typed", "typed / untyped"]
    note = f"Each report the median of {figures['repeats']} fresh processes."
    return page(figures, table(head, "lrlll", [row]), note)


def _phase(run: Figures, phase: str) -> str:
    return f"{run[f'{phase}_s']:.1f} s ({run[f'{phase}_cpu_s']:.1f} s CPU)"


def _simulate_row(label: str, run: Figures) -> list[str]:
    utilization = "-"
    if "utilization_s" in run:
        utilization = f"{_phase(run, 'utilization')} for {megs(run['utilization_mb'])}"
    return [
        label,
        _phase(run, "simulate"),
        f"{_phase(run, 'write')} for {megs(run['written_mb'])}",
        utilization,
        f"**{run['write_over_simulate']:.2f}** ({run['write_over_simulate_cpu']:.2f} in CPU)",
        megs(run["simulate_peak_rss_mb"]),
        f"{megs(run['write_peak_rss_mb'])} (from {run['write_start_rss_mb']:,.0f})",
        f"{run['write_mb_per_s']:,.0f} MB/s (a plain copy {run['copy_mb_per_s']:,.0f} MB/s)",
    ]


def simulate(figures: Figures) -> str:
    """The cluster run (and the one written with ``--utilization``): each phase's wall and CPU
    time, peak RSS, and the current code against a baseline checkout where one ran."""
    rows = []
    for key in ("cluster_year", "cluster_utilization"):
        if key not in figures:
            continue
        case = figures[key]
        for side in ("baseline", "current"):
            if side in case:
                run = case[side]
                label = f"{run['gpus']:,} GPUs, {case['days']:g} days"
                label += ", `--utilization`" if case["utilization"] else ""
                label += f", {side}" if "baseline" in case else ""
                rows.append(_simulate_row(label, run))
    verdicts = []
    for key in ("cluster_year", "cluster_utilization"):
        if key in figures and "targets" in figures[key]:
            case, goal, run = figures[key], figures[key]["targets"], figures[key]["current"]
            within = run["write_over_simulate"] <= goal["write_over_simulate"]
            verdicts.append(
                f"{case['days']:g} days{', `--utilization`' if case['utilization'] else ''}: "
                f"written in no longer than simulated: {met(within)}; simulated within "
                f"{goal['simulate_s']:.3g} s (a minute a year, scaled): "
                f"{met(run['simulate_s'] <= goal['simulate_s'])}."
            )
    head = ["run (medians of the rounds)", "simulate", "write (Slurm files)", "write utilization"]
    head += ["write / simulate", "peak RSS simulating", "peak RSS writing", "writing speed"]
    return page(figures, table(head, "lrrrrrrl", rows), "\n".join(verdicts))


def ladder(figures: Figures) -> str:
    """The check from the summary tables against the same check scanning the jobs."""
    blocks = []
    for size in figures["sizes"]:
        n = size["repeats"]
        rows = [
            [
                "summary rebuild (each ingest pays it when a ladder is declared)",
                secs(size["summary_refresh_s"]),
                "-",
            ],
            [
                f"check from the summary tables, median of {n['summary']} (max)",
                f"**{size['check_summary_median_s']:.3f} s** ({size['check_summary_max_s']:.3f} s)",
                secs(size["check_summary_cpu_median_s"], 3),
            ],
            [
                f"check scanning the jobs (baseline), median of {n['scan']}",
                secs(size["check_scan_median_s"]),
                secs(size["check_scan_cpu_median_s"]),
            ],
            [
                "baseline / summary",
                times(size["scan_over_summary"], 0),
                times(size["scan_over_summary_cpu"], 0),
            ],
            [
                f"`gpuyield preflight` in a fresh process, median of {n['cli']}",
                secs(size["cli_median_s"]),
                "-",
            ],
            ["of which `import gpuyield.cli` alone", secs(size["cli_import_only_s"]), "-"],
        ]
        head = f"{jobs(size['jobs'])} jobs, {size['store_mb']} MB store, load {size['load_average_1min']}"
        blocks.append(table([head, "wall", "CPU"], "lrr", rows))
        blocks.append(
            f"Peak RSS of the bench process (it also generated the store): "
            f"{megs(size['peak_rss_mb'])}. The check from the summary within "
            f"{figures['target_s']:g} s (median): {met(size['under_target'])}."
        )
    return page(figures, *blocks)


def _outcome(said: str) -> str:
    """An outcome as a table cell: the case's file by its name (its temporary directory differs
    every run), a ``|`` escaped."""
    return re.sub(r"/\S*/(case\d+[^/:\s]*)", r"\1", said).replace("|", "\\|")


def hostile(figures: Figures) -> str:
    """Each hostile input: what became of it, its wall time and peak RSS against the sample's."""
    rows = []
    for case, found in figures.items():
        if not isinstance(found, dict) or case in ("recorded", "slowest") or "wall_s" not in found:
            continue
        size = f"{found['input_mb']:,.2f} MB" if "input_mb" in found else "-"
        rows.append(
            [
                case,
                _outcome(found["outcome"]),
                size,
                f"{found['wall_s']:.2f}",
                f"{found['peak_rss_mb']:,.0f}",
                str(found.get("ratio", "-")),
                "yes" if found["within_limits"] else "**no**",
            ]
        )
    head = ["case", "outcome", "input", "wall s", "peak RSS MB", "ratio", "within limits"]
    match = figures["preflight: 12-star glob, 41-character name"]
    said = (
        f"preflight's family match of a 41-character run name against a 12-`*` glob: "
        f"{match['hostile_ms']:.1f} ms, against {match['plain_ms']:.1f} ms for a plain glob and name "
        f"({times(match['ratio'])}). All within limits: {'yes' if figures['all_within_limits'] else '**no**'}."
    )
    return page(figures, table(head, "llrrrrl", rows), said)


def ft(figures: Figures) -> str:
    """Per mode, means over seeds: times, lost GPU-seconds per failure by kind, held-out loss;
    then the held-out loss curve."""
    modes = figures["modes"]
    rows = []
    for name, f in modes.items():
        rows.append(
            [name, f"{f['wall_s']:.1f}", f"{f['to_last_step_s']:.1f}", f"{f['steps_per_s']:.2f}"]
            + [f"{f[k]:.1f}" for k in ("lost_gpu_s_per_failure", "stall_gpu_s_per_failure")]
            + [f"{f[k]:.1f}" for k in ("lost_work_gpu_s_per_failure", "heal_gpu_s_per_failure")]
            + [f"{f['restart_gpu_s_per_failure']:.1f}", f"{f['final_loss_mean']:.4f}"]
        )
    head = ["mode", "wall s", "to last step s", "steps/s", "lost GPU-s / failure", "stall"]
    head += ["lost work", "heal", "restart", "held-out loss"]
    setup = (
        f"{figures['replicas']} replica groups; seeds: {', '.join(map(str, figures['seeds']))}; "
        f"a budget of {figures['steps']} clean-run steps, a failure every "
        f"{figures['failure_every']} steps; means over the seeds."
    )
    ratio = f"**Ratio drop/restart of lost GPU-seconds per failure: {figures['ratio_drop_to_restart']:.3f}**"
    steps = [int(step) for step, _ in modes["clean"]["curve"]]
    curve = [[name] + [f"{loss:.3f}" for _, loss in f["curve"]] for name, f in modes.items()]
    curves = table(["step", *map(str, steps)], "l" + "r" * len(steps), curve)
    return page(figures, setup, table(head, "lrrrrrrrrr", rows), ratio, curves)
