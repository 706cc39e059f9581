"""Sweep plots: PNG (matplotlib, extra ``html``) and a self-contained HTML page embedding it."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from gpuyield.errors import MissingExtraError
from gpuyield.simulate.sweep import SweepParam, SweepResult, value_label


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:
        raise MissingExtraError("html", "matplotlib") from error
    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt

    return plt


def write_plots(result: SweepResult, out_dir: Path) -> list[Path]:
    """Write ``sweep.png`` and ``sweep.html``; returns their paths."""
    plt = _pyplot()
    sizes = result.spec.param is SweepParam.CLUSTER_GPUS
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for policy in result.spec.policies:
        mine = [p for p in result.points if p.policy is policy]
        xs = [p.value for p in mine]
        axes[0].plot(xs, [p.ettr_mean for p in mine], marker="o", label=policy.value)
        axes[1].plot(xs, [p.yield_mean for p in mine], marker="o", label=policy.value)
    xlabel = "cluster size (GPUs)" if sizes else "checkpoint interval (s)"
    for ax, ylabel in zip(
        axes, ("effective training time", "yield (kept / installed)"), strict=True
    ):
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1)
        ax.grid(True, alpha=0.3)
        ax.legend()
    if not sizes:
        opt = next(iter(result.optimum.values()), None)
        if opt is not None:
            axes[0].axvline(opt.young_s, color="grey", linestyle="--", label="Young")
            axes[0].axvline(opt.daly_s, color="black", linestyle=":", label="Daly")
            axes[0].legend()
    fig.suptitle("gpuyield simulate sweep (failure-only model, mean over seeds)")
    fig.tight_layout()
    png = out_dir / "sweep.png"
    # Fixed metadata so the same sweep writes the same bytes.
    fig.savefig(png, dpi=110, metadata={"Software": None})
    plt.close(fig)
    page = out_dir / "sweep.html"
    page.write_text(_html(result, png.read_bytes()), encoding="utf-8")
    return [png, page]


def _html(result: SweepResult, png: bytes) -> str:
    param = result.spec.param.value
    rows = "".join(
        f"<tr><td>{html.escape(p.policy.value)}</td><td>{p.value:g}</td>"
        f"<td>{p.ettr_mean:.4f}</td><td>{p.ettr_std:.4f}</td><td>{p.yield_mean:.4f}</td>"
        f"<td>{p.interruptions_mean:.1f}</td><td>{p.mttf_h:.3g}</td></tr>"
        for p in result.points
    )
    optimum = "".join(
        f"<li>{html.escape(pol)}: best {o.best_s:g} s (ETTR {o.best_ettr:.4f}); "
        f"Young {o.young_s:.0f} s; Daly {o.daly_s:.0f} s; MTBF {o.mtbf_s:.0f} s</li>"
        for pol, o in result.optimum.items()
    )
    image = base64.b64encode(png).decode("ascii")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpuyield sweep</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "</style></head><body>"
        f"<h1>Sweep over {html.escape(param)}</h1>"
        f"<img alt='sweep plot' src='data:image/png;base64,{image}'>"
        + _assumptions_html(result)
        + (f"<h2>Best checkpoint interval</h2><ul>{optimum}</ul>" if optimum else "")
        + "<h2>Points</h2><table><tr><th>policy</th><th>"
        + html.escape(param)
        + "</th>"
        "<th>ETTR</th><th>std</th><th>yield</th><th>interruptions</th><th>MTTF h</th></tr>"
        f"{rows}</table></body></html>\n"
    )


def _assumptions_html(result: SweepResult) -> str:
    """What the numbers assumed: the scenario's costs and policies, and each value's costs."""
    spec = result.spec
    items = (
        ""
        if spec.assumptions is None
        else "".join(f"<li>{html.escape(line)}</li>" for line in spec.assumptions.lines())
    )
    costs = {value_label(v): spec.costs_at(v) for v in spec.values}
    keys = list(next(iter(costs.values())))
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    body = "".join(
        f"<tr><td>{html.escape(v)}</td>" + "".join(f"<td>{c[k]:g}</td>" for k in keys) + "</tr>"
        for v, c in costs.items()
    )
    return (
        f"<h2>Assumptions</h2><ul>{items}</ul><h2>Costs at each value</h2>"
        f"<table><tr><th>{html.escape(spec.param.value)}</th>{head}</tr>{body}</table>"
    )
