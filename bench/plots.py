"""PNG plots of benchmark series (matplotlib, drawn off-screen with its Agg backend).

freshness_png(series, path): one panel per case (e.g. "1 view", "10 views"), each
sample's freshness (ms, log scale) at the time it was taken, a line per system.
"""

from __future__ import annotations

from pathlib import Path

Series = dict[str, dict[str, list[tuple[float, float]]]]  # case -> label -> [(s, seconds)]

STYLES = {  # label prefix -> matplotlib style
    "Headwater": {"color": "#2a7ae2", "marker": "o"},
    "PostgreSQL REFRESH": {"color": "#c62828", "marker": "s"},
    "PostgreSQL triggers": {"color": "#9a6700", "marker": "^", "linestyle": "--"},
}


def freshness_png(series: Series, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    cases = [c for c in series if any(series[c].values())]
    fig, axes = plt.subplots(
        1, max(len(cases), 1), figsize=(6.0 * max(len(cases), 1), 4.2), squeeze=False
    )
    for ax, case in zip(axes[0], cases, strict=False):
        for label, points in series[case].items():
            if not points:
                continue
            style = next((s for p, s in STYLES.items() if label.startswith(p)), {})
            xs = [t for t, _ in points]
            ys = [max(v * 1000.0, 0.1) for _, v in points]  # ms; log scale needs > 0
            ax.plot(xs, ys, label=label, markersize=3, linewidth=1, **style)
        ax.set_yscale("log")
        ax.set_title(case)
        ax.set_xlabel("seconds into the run")
        ax.set_ylabel("write to visible in the view (ms)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
