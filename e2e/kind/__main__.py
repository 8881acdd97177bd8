"""`python -m e2e.kind`: the article on kind clusters, on a host with Docker (docs/kind.md).

python -m e2e.kind all              # create, image, install, register, article, drill
python -m e2e.kind up               # create, image, install, register
python -m e2e.kind article          # the article's queues and jobs, placement checked
python -m e2e.kind drill            # kfed drill partition --cluster worker-1
python -m e2e.kind down             # delete the kind clusters
python -m e2e.kind plan [PHASE...]  # print the commands instead of running them
"""

from __future__ import annotations

import argparse
import shutil
import sys

from e2e.kind.scenario import KindScenario, environment_defaults
from e2e.kind.shell import CommandFailed, HostShell, PlanShell, Shell
from e2e.waiting import WaitTimeout

GROUPS: dict[str, tuple[str, ...]] = {
    "all": KindScenario.PHASES,
    "up": ("create", "image", "install", "register"),
    "article": ("article",),
    "drill": ("drill",),
    "down": ("delete",),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.kind",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=[*GROUPS, "plan"])
    phases = [*KindScenario.PHASES, "delete"]
    parser.add_argument(
        "phases", nargs="*", help=f"with plan: phases to print ({', '.join(phases)}; default: all)"
    )
    parser.add_argument("--name", default="article", help="kind clusters kfed-NAME-<cluster>")
    parser.add_argument("--image", default="kfed:0.1.0", help="tag of the image built and loaded")
    parser.add_argument("--node-image", help="kindest/node image (default: kind's own)")
    parser.add_argument("--timeout", type=float, default=300.0, help="per rollout / placement")
    args = parser.parse_args(argv)
    if args.phases and args.command != "plan":
        parser.error("phases are only for plan")
    unknown = [p for p in args.phases if p not in phases]
    if unknown:
        parser.error(f"unknown phase {unknown[0]!r} (choose from {', '.join(phases)})")
    return args


def scenario(args: argparse.Namespace, shell: Shell) -> KindScenario:
    tools = environment_defaults()
    return KindScenario(
        shell,
        name=args.name,
        image=args.image,
        node_image=args.node_image,
        timeout=args.timeout,
        kind=tools["kind"],
        docker=tools["docker"],
        kubectl=tools["kubectl"],
        kfed=tools["kfed"],
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "plan":
        plan = PlanShell()
        scenario(args, plan).run(tuple(args.phases) or KindScenario.PHASES)
        for path, text in plan.files.items():
            print(f"# {path}:\n" + "".join(f"#   {line}\n" for line in text.splitlines()))
        for command in plan.commands:
            print(command)
        return 0
    tools = environment_defaults()
    missing = [tools[t] for t in ("kind", "docker") if shutil.which(tools[t]) is None]
    if missing:
        print(
            f"python -m e2e.kind: {' and '.join(missing)} not found: this needs a host with "
            "Docker and kind (see docs/kind.md)",
            file=sys.stderr,
        )
        return 2
    try:
        scenario(args, HostShell()).run(GROUPS[args.command])
    except (CommandFailed, WaitTimeout) as err:
        print(f"python -m e2e.kind {args.command}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
