"""The demo's plot: per-cycle acceptance of its jobs, one panel each (matplotlib, optional)."""

from __future__ import annotations

from pathlib import Path


def save_acceptance_plot(reports: list, path: Path) -> Path | None:
    """Bars of accepted/γ per cycle and the job's α, for each (label, JobReport); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # plotting is a bonus; the demo does not fail without it
        return None
    fig, axes = plt.subplots(len(reports), 1, figsize=(9, 2.6 * len(reports)), squeeze=False)
    for ax, (label, report) in zip(axes[:, 0], reports):
        xs = [c.cycle for c in report.cycles]
        ax.bar(xs, [c.acceptance for c in report.cycles], color="tab:blue", alpha=0.8, label="accepted / γ")
        if report.alpha is not None:
            ax.axhline(
                report.alpha,
                color="tab:red",
                linestyle="--",
                label=f"α = {report.alpha:.2f} (Σ accepted / Σ (accepted + rejected))",
            )
        ax.set_ylim(0, 1.35)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_ylabel("acceptance")
        ax.set_title(
            f"job {report.job_id} ({label}): {len(report.tokens)} tokens in {len(report.cycles)} cycles, "
            f"γ = {report.gamma}"
        )
        ax.legend(loc="upper center", fontsize=8, ncol=2, frameon=False)
    axes[-1, 0].set_xlabel("cycle")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
