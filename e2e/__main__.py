"""`python -m e2e up|down|status|stop|start|kubeconfig|bin-dir`: local Kubernetes clusters for kfed.

python -m e2e up --name demo --workers 2 --full
python -m e2e up --name ops --full --operators jobset,trainer,kuberay   # + batch operators
python -m e2e up --name plain --full --no-dra       # without DRA (on by default with --full)
python -m e2e up --name rn --workers 1 --full --real-node --image kfed:0.1.0  # + real nodes
export PATH="$(python -m e2e bin-dir):$PATH"      # the built kubectl
kubectl --kubeconfig "$(python -m e2e kubeconfig --name demo --cluster worker-2)" get nodes
python -m e2e status --name demo
python -m e2e stop --name demo --cluster worker-1 --kill    # its kube-apiserver: an outage
python -m e2e start --name demo --cluster worker-1          # ... and back
python -m e2e down --name demo
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from e2e import binaries
from e2e.kind.provider import KindFederation
from e2e.local import operators
from e2e.local.federation import LocalFederation, cleanup_directory, state_root
from e2e.realnode import host as realnode_host
from e2e.realnode import node as realnode


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m e2e",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start a manager and N worker clusters")
    up.add_argument("--name", required=True)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument(
        "--full",
        action="store_true",
        help="add controller-manager, scheduler and kwok fake GPU nodes",
    )
    up.add_argument("--nodes", type=Path, help="node set YAML (default: e2e/local/nodes.yaml)")
    up.add_argument(
        "--dra",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Dynamic Resource Allocation for the kwok nodes' GPUs (the node set's `devices:`): "
        "DeviceClasses, a ResourceSlice per node, the resource-claim controller and the alpha "
        "DRA feature gates; on by default with --full (local provider), --no-dra leaves it out",
    )
    up.add_argument("--provider", choices=["local", "kind"], default="local")
    up.add_argument(
        "--versions",
        choices=binaries.VERSION_SETS,
        default=None,
        help="which set of e2e/binaries/versions.env every cluster runs: newest "
        "(NEWEST_K8S_VERSION) or pinned (K8S_VERSION); default: the bed's (BED_VERSIONS, "
        "$KFED_BED_VERSIONS), the other is built on demand (`make binaries-<set>`)",
    )
    up.add_argument(
        "--cluster-versions",
        default="",
        metavar="CLUSTER=SET,...",
        help="a mixed-version fleet: the set of some clusters, e.g. worker-1=pinned (the "
        "others run --versions)",
    )
    known = ",".join(operators.OPERATORS)
    up.add_argument(
        "--operators",
        default="",
        help=f"comma-separated batch operators every worker runs ({known}); needs --full "
        "and the operators built (`bash e2e/binaries/build-operators.sh` or `make binaries`)",
    )
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also run a real node (Debian's containerd + a kubelet, host-network Pods only) "
        "on the manager and on worker-1, for deploy/*/overlays/testbed; needs --full, root, "
        "containerd and runc (docs/kind.md, 'A real node')",
    )
    up.add_argument(
        "--image",
        action="append",
        default=[],
        help="with --real-node: a Docker image to import into the nodes (docker save | ctr "
        "import), e.g. kfed:0.1.0; repeatable",
    )

    down = sub.add_parser("down", help="stop every process of a federation, remove its state")
    down.add_argument("--name", required=True)
    down.add_argument("--provider", choices=["local", "kind"], default="local")

    status = sub.add_parser("status", help="clusters, endpoints, process health")
    status.add_argument("--name", required=True)
    status.add_argument("--json", action="store_true")

    kubeconfig = sub.add_parser("kubeconfig", help="print the path of a cluster's kubeconfig")
    kubeconfig.add_argument("--name", required=True)
    kubeconfig.add_argument("--cluster", required=True)
    kubeconfig.add_argument("--provider", choices=["local", "kind"], default="local")

    roles = (
        "kube-apiserver",
        "etcd",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        *operators.OPERATORS,
    )
    stop = sub.add_parser(
        "stop", help="stop one process of a cluster: a real control-plane outage for a drill"
    )
    start = sub.add_parser("start", help="start a stopped process again (same ports and data)")
    for command in (stop, start):
        command.add_argument("--name", required=True)
        command.add_argument("--cluster", required=True)
        command.add_argument("--role", choices=roles, default="kube-apiserver")
        command.add_argument(
            "--root",
            type=Path,
            help="the directory holding the federation (default: $KFED_STATE_DIR or the cache)",
        )
    stop.add_argument("--kill", action="store_true", help="SIGKILL at once, as a crash would")

    sub.add_parser("bin-dir", help="print the directory of the built kubectl (for $PATH)")
    return parser


def _cluster_versions(spec: str) -> dict[str, str]:
    """``worker-1=pinned,manager=newest`` -> {cluster: set}."""
    result = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        cluster, sep, chosen = part.partition("=")
        if not sep or chosen not in binaries.VERSION_SETS:
            raise ValueError(f"{part!r} is not CLUSTER=pinned or CLUSTER=newest")
        result[cluster.strip()] = chosen
    return result


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "up":
            wanted = [n.strip() for n in args.operators.split(",") if n.strip()]
            if wanted and (not args.full or args.provider != "local"):
                print("error: --operators needs --full (and the local provider)", file=sys.stderr)
                return 2
            if args.dra and (not args.full or args.provider != "local"):
                print("error: --dra needs --full (and the local provider)", file=sys.stderr)
                return 2
            if args.real_node and (not args.full or args.provider != "local"):
                print("error: --real-node needs --full (and the local provider)", file=sys.stderr)
                return 2
            if args.real_node:
                realnode_host.require()  # before anything starts: one line saying why not
            if args.provider == "kind":
                KindFederation(
                    args.name, workers=args.workers, full=args.full, nodes_file=args.nodes
                ).up()
                return 0
            try:
                per_cluster = _cluster_versions(args.cluster_versions)
            except ValueError as err:
                print(f"error: --cluster-versions: {err}", file=sys.stderr)
                return 2
            print("checking the Go-built binaries (first run builds them: ~5 minutes)", flush=True)
            for wanted_set in sorted({args.versions or binaries.bed_set(), *per_cluster.values()}):
                binaries.ensure_built(wanted_set)
            fed = LocalFederation(
                args.name,
                workers=args.workers,
                full=args.full,
                nodes_file=args.nodes,
                operators=wanted,
                dra=args.dra,
                versions=args.versions,
                cluster_versions=per_cluster,
            )
            seconds = fed.up(progress=True)
            print(f"federation {args.name!r} ready in {seconds:.1f}s")
            if args.real_node:
                _start_real_nodes(fed, args.image)
            for cluster in fed:
                print(f"  {cluster.name:<10} {cluster.server}  kubeconfig: {cluster.kubeconfig}")
            return 0
        if args.command == "down":
            if args.provider == "kind":
                KindFederation(args.name).down()
            else:
                realnode.cleanup_under(state_root() / args.name)  # containers, mounts, sysctls
                cleanup_directory(state_root() / args.name)
            print(f"federation {args.name!r} stopped and removed")
            return 0
        if args.command == "kubeconfig":
            if args.provider == "kind":
                print(KindFederation(args.name).kubeconfig(args.cluster))
            else:
                path = LocalFederation.load(args.name).kubeconfig(args.cluster)
                print(path)
            return 0
        if args.command in ("stop", "start"):
            fed = LocalFederation.load(args.name, root=args.root)
            if args.command == "stop":
                fed.stop_role(args.cluster, args.role, kill=args.kill)
                print(f"{args.cluster}: {args.role} stopped")
            else:
                fed.start_role(args.cluster, args.role)
                print(f"{args.cluster}: {args.role} started again")
            return 0
        if args.command == "bin-dir":
            print(binaries.path_of("kubectl").parent)
            return 0
        if args.command == "status":
            rows = LocalFederation.load(args.name).status()
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                for row in rows:
                    health = ", ".join(
                        f"{role}={'up' if p['alive'] else 'DOWN'}"
                        for role, p in row["processes"].items()
                    )
                    ready = "ready" if row["ready"] else "NOT READY"
                    print(f"{row['cluster']:<10} {row['server']:<26} {ready:<9} {health}")
            return 0
    except (
        FileNotFoundError,
        KeyError,
        ValueError,
        binaries.BinariesMissing,
        RuntimeError,
    ) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 2


def _start_real_nodes(fed: LocalFederation, images: list[str]) -> None:
    """A real node on the manager and on worker-1 (if there is one), images imported; on
    failure the whole federation is stopped, nodes included."""
    try:
        archives: list[Path] = []
        for image in images:
            archive = fed.directory / f"image-{len(archives)}.tar"
            archives.append(realnode.docker_save(image, archive))
        for name in ("manager", "worker-1"):
            if name not in fed.clusters:
                continue
            node = realnode.RealNode(fed.cluster(name))
            seconds = node.start()
            fed.save_state()
            print(f"  {name}: real node {node.name} Ready in {seconds:.1f}s "
                  f"(containerd {node.containerd.socket})")  # fmt: skip
            for image, archive in zip(images, archives, strict=True):
                node.import_image(archive)
                print(f"  {name}: imported {image}")
        for archive in archives:
            archive.unlink()
    except BaseException:
        realnode.cleanup_under(fed.directory)
        fed.down()
        raise


if __name__ == "__main__":
    sys.exit(main())
