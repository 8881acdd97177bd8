"""`make demo`: start a full local federation and show it.

Today: a manager and two workers with fake GPU nodes (worker-1: rtx-a1000, worker-2: h100),
their clusters and nodes printed, then everything stopped again (``--keep`` leaves it running
for you to explore with kubectl).
"""

from __future__ import annotations

import argparse
import sys

from e2e.local.federation import LocalFederation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.demo", description=__doc__)
    parser.add_argument("--name", default="demo")
    parser.add_argument("--keep", action="store_true", help="leave the federation running")
    args = parser.parse_args(argv)

    fed = LocalFederation(args.name, workers=2, full=True)
    print(f"== starting local federation {args.name!r}: manager + 2 workers, full mode", flush=True)
    seconds = fed.up(progress=True)
    try:
        print(f"== ready in {seconds:.1f}s\n")
        for cluster in fed:
            print(f"-- {cluster.name}  {cluster.server}")
            print(f"   kubeconfig: {cluster.kubeconfig}")
            nodes = cluster.kubectl("get", "nodes", "-L", "gpu.model", "-L", "type").stdout.strip()
            print(
                "   "
                + (
                    nodes.replace("\n", "\n   ")
                    if nodes
                    else "(no nodes: the manager runs no pods)"
                )
            )
            print()
        if args.keep:
            print(f"left running; stop it with: python -m e2e down --name {args.name}")
            return 0
    except BaseException:
        fed.down()
        raise
    fed.down()
    print("== stopped everything it started")
    return 0


if __name__ == "__main__":
    sys.exit(main())
