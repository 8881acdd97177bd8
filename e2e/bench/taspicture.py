"""The picture in docs/tas.md: the racks of one worker with the pods of two gangs, as a real
run placed them (the record ``test_two_gangs_on_one_worker_each_get_a_rack_of_their_own``
saves in artifacts/tas-racks.json: each host's rack and GPUs, each job's pods' nodes).

    .venv/bin/python -m e2e.bench.taspicture [--record artifacts/tas-racks.json]
        [--output docs/img/tas-racks.png]

One column per rack, one box per host, one square per GPU: coloured by the job whose pod
holds it, grey when free.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def draw(record: dict[str, Any], output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    racks: dict[str, list[dict[str, Any]]] = {}
    for host in record["hosts"]:
        racks.setdefault(host["rack"], []).append(host)
    jobs = sorted(record["jobs"])
    colour = {job: COLOURS[i % len(COLOURS)] for i, job in enumerate(jobs)}
    used = {job: Counter(nodes) for job, nodes in record["jobs"].items()}
    tallest = max(len(hosts) for hosts in racks.values())
    width = max(h["gpus"] for h in record["hosts"])
    fig, ax = plt.subplots(figsize=(2.6 * len(racks) + 1, 1.3 * tallest + 1.2))
    for column, (rack, hosts) in enumerate(sorted(racks.items())):
        x0 = column * (width + 2)
        ax.text(x0 + width / 2, tallest * 1.5 + 0.2, f"rack {rack}", ha="center", weight="bold")
        for row, host in enumerate(sorted(hosts, key=lambda h: h["host"])):
            y0 = (tallest - 1 - row) * 1.5
            ax.add_patch(Rectangle((x0 - 0.2, y0 - 0.2), width + 0.4, 1.4, fill=False, lw=1))
            ax.text(x0 - 0.1, y0 + 1.25, host["host"].rsplit("-", 1)[-1], fontsize=7)
            owners = [j for j in jobs for _ in range(used[j].get(host["host"], 0))]
            for slot in range(host["gpus"]):
                fill = colour[owners[slot]] if slot < len(owners) else "#dddddd"
                ax.add_patch(Rectangle((x0 + slot, y0), 0.9, 0.9, color=fill))
    ax.set_xlim(-1, len(racks) * (width + 2))
    ax.set_ylim(-0.5, tallest * 1.5 + 0.8)
    ax.set_axis_off()
    handles = [Patch(color=colour[j], label=f"{j} ({len(record['jobs'][j])} pods)") for j in jobs]
    handles.append(Patch(color="#dddddd", label="free GPU"))
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, -0.15), ncol=3)
    ax.set_title(f"{record['worker']}: racks, hosts and GPUs (one square each)")
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path, default=Path("artifacts/tas-racks.json"))
    parser.add_argument("--output", type=Path, default=Path("docs/img/tas-racks.png"))
    args = parser.parse_args()
    draw(json.loads(args.record.read_text()), args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
