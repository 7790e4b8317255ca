"""``python -m bench plot``: decode and prefill ms/token per engine against the roofline.

Reads the results file: for the model of the latest non-smoke ``run`` record,
the latest measurement of every engine × threads × metric, and one ``probe``
record (same machine as the run preferred) for the rooflines. The probe is
the most recent *clean* one — every figure the rooflines use (read bandwidth,
``mul_add_f32x8`` and ``fma_f32x16``, at every thread count) had at least one
undisturbed pass (``clean_passes`` > 0, see :mod:`bench.probe`) — and, when
there is none, the probe taken nearest in time to the run (the in-run probe,
whose disturbed figures are lower bounds). The figure's caption says which:

* decode: f32 weight bytes / measured read bandwidth — no f32 engine that
  reads every weight once per token can be faster;
* prefill: matmul FLOPs per token / peak f32 arithmetic, both for separate
  multiply and add (``mul_add_f32x8``: the bitwise schedules' arithmetic) and
  for AVX-512 FMA (``fma_f32x16``: what a BLAS may use).

Without a probe record the lines are left out and the figure says so. Bars
are medians; the whiskers run from the minimum to the maximum round.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench import BenchError, command, results
from bench.engines import ALL_ENGINE_NAMES

DEFAULT_OUT = results.REPO_ROOT / "docs" / "bench_results.png"
PREFILL_PEAKS = (("mul_add_f32x8", ":"), ("fma_f32x16", "-."))


def latest_run(records: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[tuple, dict]]:
    """The latest non-smoke run's model facts and, for that model, the latest
    measurement per (engine, threads, metric) with the record it came from."""
    runs = [r for r in records if r.get("kind") == "run"
            and not r.get("payload", {}).get("settings", {}).get("smoke")]
    if not runs:
        raise BenchError("no benchmark run recorded yet: python -m bench run")
    runs.sort(key=lambda r: r.get("unix_time", 0))
    model = runs[-1]["payload"]["model"]
    latest: dict[tuple, dict] = {}
    for record, m in results.iter_measurements(runs):
        if record["payload"].get("model", {}).get("id") != model["id"]:
            continue
        latest[(m["engine"], m["threads"], m["metric"])] = m | {"_record": record}
    return model, latest


def probe_is_clean(record: dict[str, Any]) -> bool:
    """Whether every figure the rooflines use had a clean pass (none is a lower bound).

    Those figures are the read bandwidth and the ``PREFILL_PEAKS`` kernels at
    every thread count; a record without ``clean_passes`` (older probes) or
    from a quick probe is not clean.
    """
    limits = record.get("payload", {}).get("machine_limits", {})
    clean = limits.get("clean_passes")
    if not isinstance(clean, dict) or limits.get("probe", {}).get("quick"):
        return False
    used = {"bandwidth": limits.get("bandwidth_gbs", {})} | {
        name: per_thread for name, per_thread in limits.get("peak_gops", {}).items()
        if name in dict(PREFILL_PEAKS)}
    return bool(used["bandwidth"]) and all(
        clean.get(kind, {}).get(t, 0) > 0 for kind, per_thread in used.items()
        for t in per_thread)


def choose_probe(records: list[dict[str, Any]], machine_id: str | None,
                 run_time: float) -> tuple[dict | None, str]:
    """The probe record for the rooflines and how it was chosen ("clean" or "in-run").

    Only the run's machine's probes count when it has any. The most recent
    clean one wins; without one, the probe nearest ``run_time`` (unix seconds).
    """
    probes = sorted((r for r in records if r.get("kind") == "probe"),
                    key=lambda r: r.get("unix_time", 0))
    same = [r for r in probes if r.get("machine", {}).get("id") == machine_id]
    candidates = same or probes
    clean = [r for r in candidates if probe_is_clean(r)]
    if clean:
        return clean[-1], "clean"
    if not candidates:
        return None, ""
    return min(candidates, key=lambda r: abs(r.get("unix_time", 0) - run_time)), "in-run"


def probe_note(probe: dict | None, how: str) -> str:
    """The caption line naming the probe behind the rooflines."""
    if probe is None:
        return "no probe record (python -m bench probe): roofline omitted"
    bw = probe["payload"]["machine_limits"]["bandwidth_gbs"]
    which = ("latest clean probe" if how == "clean" else
             "probe nearest the run (no clean probe on record: its figures may be lower bounds)")
    return (f"roofline: {which}, {probe['time'][:16]}Z, read bandwidth "
            + ", ".join(f"{g:.1f} GB/s @ {t} thr" for t, g in sorted(bw.items())))


def rooflines(probe: dict | None, model: dict[str, Any],
              flops_per_token: dict[str, float]) -> dict[str, dict[str, dict[str, float]]]:
    """``{metric: {label: {threads: ms/token}}}`` from a probe record."""
    if probe is None:
        return {}
    limits = probe["payload"]["machine_limits"]
    out: dict[str, dict[str, dict[str, float]]] = {
        "decode_ms_per_token": {"f32 weights / bandwidth": {
            t: 1e3 * model["f32_weight_bytes"] / (gbs * 1e9)
            for t, gbs in limits["bandwidth_gbs"].items()}},
    }
    for metric, flops in flops_per_token.items():
        out[metric] = {
            f"FLOPs / {name}": {t: 1e3 * flops / (g * 1e9) for t, g in per_thread.items()}
            for name, per_thread in limits["peak_gops"].items()
            if name in dict(PREFILL_PEAKS)
        }
    return out


def _metric_order(metric: str) -> tuple[int, int]:
    if metric == "decode_ms_per_token":
        return (0, 0)
    return (1, int(metric.rsplit("@", 1)[1]))


def draw(latest: dict[tuple, dict], lines: dict[str, dict], model: dict[str, Any],
         probe_note: str, out: Path) -> None:
    """Grouped bars (engine × threads) per metric, log scale, roofline lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = sorted({k[2] for k in latest}, key=_metric_order)
    engines = [e for e in ALL_ENGINE_NAMES if any(k[0] == e for k in latest)]
    engines += sorted({k[0] for k in latest} - set(engines))
    threads = sorted({k[1] for k in latest})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 6.0), squeeze=False)
    width = 0.8 / len(threads)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for j, t in enumerate(threads):
            xs, med, lo, hi = [], [], [], []
            for i, engine in enumerate(engines):
                m = latest.get((engine, t, metric))
                if m is None:
                    continue
                xs.append(i + (j - (len(threads) - 1) / 2) * width)
                med.append(m["median"])
                lo.append(m["median"] - m["min"])
                hi.append(m["spread"]["maximum"] - m["median"])
            ax.bar(xs, med, width, yerr=[lo, hi], capsize=3, color=colors[j % len(colors)],
                   label=f"{t} thread{'s' if t > 1 else ''}")
        styles = dict(PREFILL_PEAKS) | {"f32 weights / bandwidth": "--"}
        for label, per_thread in lines.get(metric, {}).items():
            for j, t in enumerate(threads):
                if str(t) in per_thread:
                    ax.axhline(per_thread[str(t)], color=colors[j % len(colors)],
                               linestyle=styles.get(label.split("/ ")[-1], "--"), linewidth=1,
                               label=f"roofline {label} ({t} thr)")
        ax.set_yscale("log")
        ax.set_xticks(range(len(engines)), engines, rotation=20)
        ax.set_ylabel("ms / token (median; whiskers min..max)")
        ax.set_title(metric.replace("_ms_per_token", "").replace("@", " @ ") + " tokens"
                     if "@" in metric else "decode")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        ax.grid(axis="y", which="both", alpha=0.3)
    any_record = next(iter(latest.values()))["_record"]
    fig.suptitle(f"nanocompile bench: {model['label']}, {any_record['machine']['cpu_model']}, "
                 f"{any_record['time'][:10]}, git {str(any_record['git']['commit'])[:8]}"
                 + (f"\n{probe_note}" if probe_note else ""), fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", default=str(results.RESULTS_PATH),
                        help="results file to read (default: %(default)s)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="PNG to write (default: "
                        "%(default)s)")


@command("plot", help="PNG of decode and prefill ms/token per engine against the roofline",
         arguments=_arguments)
def plot_command(args: argparse.Namespace) -> int:
    """Draw the latest run's medians and the chosen probe's rooflines."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BenchError("matplotlib is not installed: pip install -e '.[bench]'") from None
    records = results.load_records(Path(args.results))
    model, latest = latest_run(records)
    any_record = next(iter(latest.values()))["_record"]
    run_time = max(m["_record"].get("unix_time", 0) for m in latest.values())
    probe, how = choose_probe(records, any_record["machine"].get("id"), run_time)
    flops = {k[2]: m["flops_per_token"] for k, m in latest.items() if "flops_per_token" in m}
    note = probe_note(probe, how)
    out = Path(args.out)
    draw(latest, rooflines(probe, model, flops), model, note, out)
    print(note)
    print(f"wrote {out}")
    return 0
