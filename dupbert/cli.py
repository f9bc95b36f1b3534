"""The ``dupbert`` command line, for people who do not use notebooks.

    dupbert zoo                        list the offline zoo
    dupbert zoo fetch NAME [NAME ...]  download, check and convert zoo models into the cache
    dupbert probe --model NAME ...     RQ1 reconstruction table, printed and written as CSV
                                       (--corpus NAME|FILE|FOLDER|hub:..., --translator linear)
    dupbert lens --model NAME --text T the MLM head's top-1 token per hidden state and position
                                       (--text-file F, --html OUT.html, --translator linear)
    dupbert data download --to DIR     fetch the antibody and reaction corpora from their origins
    dupbert finetune --model NAME ...  RQ3: fine-tune configurations x seeds, rows appended to --results
    dupbert finetune --profile FILE    RQ3: the sweep of a parameter profile (as rq3.ipynb runs it)
    dupbert merge OUT IN [IN ...]      combine results files (e.g. shards) into OUT, every run once
    dupbert rerun RESULTS KEY [KEY..]  re-run committed runs from their rows; committed vs re-run metrics
"""

from __future__ import annotations

import argparse
import os
import sys

from .core.errors import DupbertError


def _zoo(args: argparse.Namespace) -> int:
    from .core.errors import ModelNotAvailable
    from .core.zoo import ZOO, zoo_folder

    if args.action == "fetch":
        for name in args.names or sorted(ZOO):
            try:
                print(f"{name}: {zoo_folder(name)}")
            except ModelNotAvailable as error:
                if args.names or not ZOO[name].bundled:
                    raise
                # every model: one trained here that is not published (or rebuilt) yet is named
                print(f"{name}: skipped: {error}")
        return 0
    rows = [(entry.name, entry.source,
             "MLM head" if entry.has_mlm_head else "encoder only", entry.description)
            for entry in ZOO.values()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:  # columns as wide as their longest entry, so they line up
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)), row[3])
    return 0


def _order(text: str) -> list[int]:
    """The 0-based blocks of ``--order`` (``0,0,1,2``); ValueError if empty, not comma-separated
    integers, or negative.
    """
    usage = (f"--order must be comma-separated 0-based block indices, e.g. 0,0,1,2,3 (block 0 "
             f"twice), got {text!r}")
    try:
        order = [int(block) for block in text.split(",")]
    except ValueError:
        raise ValueError(usage) from None
    if any(block < 0 for block in order):
        raise ValueError(f"{usage}: block indices start at 0")
    return order


def _check_numbers(args: argparse.Namespace, **rules: dict) -> None:
    """``dupbert.core.checks.check_number`` on each named option (``n_sequences=dict(minimum=1)``),
    named as typed (``--n-sequences``)."""
    from .core.checks import check_number

    for name, rule in rules.items():
        check_number("--" + name.replace("_", "-"), getattr(args, name), **rule)


def _probe(args: argparse.Namespace) -> int:
    from .study.params import option_parameters

    duplications = None
    if args.order is not None:  # "" is not "no order": it would silently probe the baseline
        duplications = {f"order {args.order}": _order(args.order)}
    # inputs first, in seconds: nothing is loaded before they are known to work; the options
    # that RQ1's notebook shares are read and checked through its declaration (dupbert.study.params)
    used = option_parameters(args, "rq1")
    translators = _translator_options(args)
    if args.translator == "linear" and translators is None and args.fit_sequences is None:
        raise ValueError("--translator linear needs --fit-sequences N (fit one per probed model "
                         "on the N sequences after the first --n-sequences) or --translators FILE")
    if translators is not None:
        translators = {name: translators for name in used["models"]}
    from .tools.probe import probe_models
    from .core.results import atomic_write_text

    frame = probe_models(**used, include_control=not args.no_control,
                         duplications=duplications, text_column=args.text_column,
                         translator=args.translator, fit_sequences=args.fit_sequences,
                         translators=translators)
    print(frame.round(4).to_string(index=False))
    if args.out:
        atomic_write_text(args.out, frame.to_csv(index=False))
        print(f"written to {args.out}", file=sys.stderr)
    return 0


def _translator_options(args: argparse.Namespace):
    """The translator of ``--translators FILE`` (loaded), or None; ValueError unless
    ``--translator``, ``--translators`` and ``--fit-sequences`` agree.
    """
    if args.translator == "identity":
        given = [flag for flag, value in (("--translators", args.translators),
                                          ("--fit-sequences", args.fit_sequences))
                 if value is not None]
        if given:
            raise ValueError(f"{' and '.join(given)} need --translator linear")
        return None
    if args.translators is not None and args.fit_sequences is not None:
        raise ValueError("give --translators FILE (a saved translator) or --fit-sequences N "
                         "(fit one), not both")
    if args.fit_sequences is not None:
        _check_numbers(args, fit_sequences=dict(integer=True, minimum=1))
    if args.translators is None:
        return None
    from .tools.translators import LinearTranslator

    if not os.path.isfile(args.translators):
        raise FileNotFoundError(f"--translators {args.translators}: no such file (write one "
                                f"with dupbert.fit_translators(...).save(PATH))")
    return LinearTranslator.load(args.translators)


def _lens_text(args: argparse.Namespace) -> str:
    """The text of ``--text`` or ``--text-file`` (the whole file, stripped; ``.gz`` too)."""
    if args.text_file is None:
        if not args.text.strip():
            raise ValueError(f"--text must be a non-empty sequence, got {args.text!r}")
        return args.text
    from pathlib import Path

    from .core.data import _decoded

    path = Path(args.text_file).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"--text-file {args.text_file}: no such file")
    text = _decoded(path).strip()
    if not text:
        raise ValueError(f"--text-file {args.text_file} is empty: it must hold the one text "
                         f"to read through the lens")
    return text


def _lens(args: argparse.Namespace) -> int:
    """The lens grid of one text: hidden states x positions, the head's top-1 token per cell."""
    import pandas as pd

    from .core import checks
    from .core import zoo
    from .core.data import check_text_source

    text = _lens_text(args)
    _check_numbers(args, k=dict(integer=True, minimum=1), max_length=dict(integer=True, minimum=3))
    checks.check_device(args.device)
    translator = _translator_options(args)
    if args.translator == "linear" and translator is None:
        from .core.data import default_corpus

        check_text_source(args.fit_corpus or default_corpus(args.model))
    zoo.check_model(args.model, mlm_head=True)
    from .tools.lens import lens, lens_grid
    from .tools.models import load_mlm
    from .core.results import atomic_write_text

    model, tokenizer = load_mlm(args.model, device=args.device)
    if args.translator == "linear" and translator is None:
        translator = _fit_for_lens(args, model, tokenizer, text)
    frame = lens(model, tokenizer, text, k=args.k, max_length=args.max_length,
                 translator=translator or "identity")
    grid = lens_grid(frame, value=args.value, include_special=args.special)
    if args.value != "token":
        grid = grid.round(3)
    grid.columns = [token for _, token in grid.columns]
    grid.index = [f"h{layer}" for layer in grid.index]
    with pd.option_context("display.width", None, "display.max_columns", None):
        print(grid.to_string())
    print(f"{args.value} of the MLM head's top-1 guess per hidden state (h0 = embedding output) "
          f"and position; columns are the input tokens", file=sys.stderr)
    if args.out:
        atomic_write_text(args.out, frame.to_csv(index=False))
        print(f"top-{args.k} lens written to {args.out}", file=sys.stderr)
    if args.html:
        from .book.lens_figures import lens_html

        title = f"{args.model}, {args.translator} translator"
        atomic_write_text(args.html, lens_html(frame, title=title).document(title))
        print(f"interactive lens written to {args.html}", file=sys.stderr)
    return 0


def _fit_for_lens(args: argparse.Namespace, model, tokenizer, text: str):
    """A linear translator fitted on ``--fit-sequences`` texts of ``--fit-corpus`` (default: the
    model's domain corpus), the lens text left out.
    """
    from .core.data import default_corpus, load_texts
    from .tools.translators import fit_translators

    corpus = args.fit_corpus or default_corpus(args.model)
    n_fit = args.fit_sequences or 200
    texts = [t for t in load_texts(corpus, n_fit + 1, text_column=args.text_column) if t != text]
    translator = fit_translators(model, tokenizer, texts[:n_fit], max_length=args.max_length)
    print(f"linear translator fitted on {translator.n_sequences} sequences ({translator.n_tokens} "
          f"tokens) of {corpus}", file=sys.stderr)
    return translator


def _finetune(args: argparse.Namespace) -> int:
    """The runs of an RQ3 ``--profile`` file (the runs notebooks/rq3.ipynb makes with it, planned
    by ``dupbert.study.profiles.plan_sweep``), or of the options."""
    from .study import params, profiles, sweeps

    if not args.profile:
        return _finetune_options(args)
    # --model filters the profile's models; where results go and the device may be overridden
    given = [option for name, option in params.given_options(args, "rq3").items()
             if name not in ("models", "results_path", "outputs_dir", "device")]
    if given:
        raise ValueError(f"--profile takes the sweep from the profile; drop {', '.join(given)} "
                         f"(or edit a copy of {args.profile})")
    # the profile's inputs first, in seconds, as the notebook checks them
    parameters = profiles.read_profile(args.profile, device=args.device, models=args.model)
    # the profile's paths are relative to the repository root, as in the notebook
    from .core.results import repository_path

    results = args.results or (parameters.results_path
                               and repository_path(parameters.results_path))
    if not results:
        raise ValueError(f"{args.profile} names no results_path: give --results FILE")
    outputs_dir = args.outputs_dir or (parameters.outputs_dir
                                       and repository_path(parameters.outputs_dir))
    _quiet_loading(args.progress)
    plan, notes = profiles.plan_sweep(parameters)
    for note in notes:
        print(note, file=sys.stderr)
    # the shard, the results path and the outputs folder: checked by the first sweep before its
    # first run; write permission by each sweep with runs to do (a finished study reads from a
    # read-only checkout)
    frame = sweeps.run_plan(plan, results, device=parameters.device, outputs_dir=outputs_dir,
                            shard=args.shard, progress=args.progress)
    _print_runs(frame, results)
    return 0


def _finetune_options(args: argparse.Namespace) -> int:
    """``dupbert finetune --model ... --task ... --results ...``: the options read by RQ3's
    declaration (``dupbert.study.params.RQ3Parameters``: forms, bounds, defaults), then one sweep, which
    loads a model only if one of its runs is missing from the results file."""
    from .study import params
    from .core.errors import ParameterError

    if not args.model or not args.task or not args.results:
        raise ValueError("dupbert finetune needs --model, --task and --results, or --profile FILE")
    used = params.option_parameters(args, "rq3", check_models=False)
    if used["duplications"] == "all":
        raise ParameterError("--duplication all is for --profile files and the notebook (each "
                             "model its own configurations); name them here, e.g. --duplication "
                             "baseline --duplication 'copy first 3'")
    overrides = {name: used[name] for name in params.TRAINING if used[name] is not None}
    _quiet_loading(args.progress)
    from .study.sweeps import sweep

    frame = sweep(used["models"], used["tasks"], used["duplications"], used["seeds"],
                  used["results_path"], hyperparameters={"classification": overrides,
                                                         "qa": overrides},
                  max_train_samples=used["max_train_samples"],
                  max_eval_samples=used["max_eval_samples"], device=used["device"],
                  outputs_dir=used["outputs_dir"], shard=args.shard, progress=args.progress)
    _print_runs(frame, used["results_path"])
    return 0


def _quiet_loading(progress: bool) -> None:
    """No model-loading or data-mapping progress bars on stderr unless --progress."""
    if progress:
        return
    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()


def _print_runs(frame, results) -> None:
    from .core.results import is_main_process

    if not is_main_process():  # under torchrun every process runs the sweep; one table is enough
        return
    columns = [c for c in ("model", "task", "duplication", "seed", "metrics.accuracy",
                           "metrics.macro_f1", "metrics.f1", "metrics.exact", "train_time_s")
               if c in frame.columns]
    if columns:
        print(frame[columns].round(4).to_string(index=False))
    print(f"{len(frame)} runs in {results}", file=sys.stderr)


def _rerun(args: argparse.Namespace) -> int:
    from .core.checks import check_device

    check_device(args.device)  # before torch and the results are loaded
    from .core.checks import check_number

    check_number("--tolerance", args.tolerance, minimum=0)
    if not os.path.isfile(args.results):
        raise FileNotFoundError(f"no results file {args.results}")
    from .core.results import ResultsFile
    from .study.sweeps import rerun_table

    rows = dict(ResultsFile(args.results).keyed_rows())
    if not rows:
        raise ValueError(f"{args.results} holds no runs")
    missing = [key for key in args.run_keys if key not in rows]
    if missing:
        raise ValueError(f"run keys {missing} are not in {args.results}; it has {len(rows)} runs, "
                         f"e.g. {list(rows)[:3]}")
    _quiet_loading(args.progress)
    table = rerun_table([rows[key] for key in args.run_keys], device=args.device,
                        progress=args.progress)
    print(table.to_string(index=False))
    worst = float(table["difference"].abs().max())
    agree = worst <= args.tolerance
    print(f"largest difference {worst:.4f} points: "
          f"{'agrees' if agree else 'DISAGREES'} within {args.tolerance} points", file=sys.stderr)
    return 0 if agree else 1


def _merge(args: argparse.Namespace) -> int:
    missing = [path for path in args.inputs if not os.path.isfile(path)]
    if missing:  # merge_results would read a missing file as empty and write a short file
        raise FileNotFoundError(f"no results file {', '.join(missing)}; nothing was written")
    from .study.sweeps import merge_results

    frame = merge_results(args.inputs, args.out)
    print(f"{len(frame)} runs from {len(args.inputs)} files written to {args.out}")
    return 0


def _add_translator_options(command: argparse.ArgumentParser, fit_help: str) -> None:
    command.add_argument("--translator", default="identity", choices=["identity", "linear"],
                         help="identity: the head reads each hidden state as it is (the paper); "
                              "linear: each hidden state is first mapped to the last one by a "
                              "fitted affine map (Din et al. 2023, dupbert.fit_translators)")
    command.add_argument("--fit-sequences", type=int, default=None, metavar="N", help=fit_help)
    command.add_argument("--translators", default=None, metavar="FILE",
                         help="a translator saved with LinearTranslator.save, instead of fitting")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``dupbert`` command."""
    parser = argparse.ArgumentParser(prog="dupbert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    zoo = commands.add_parser("zoo", help="list or fetch the offline model zoo")
    zoo.add_argument("action", nargs="?", choices=["list", "fetch"], default="list")
    zoo.add_argument("names", nargs="*", help="zoo names to fetch (default: all)")
    zoo.set_defaults(func=_zoo)

    _add_probe_command(commands)
    _add_lens_command(commands)
    _add_finetune_commands(commands)

    from .tools.sources import add_data_commands

    add_data_commands(commands)
    return parser


def _add_probe_command(commands) -> None:
    """``dupbert probe``: RQ1 from the command line."""
    from .study.params import add_options

    probe = commands.add_parser("probe", help="RQ1: reconstruction accuracy per hidden state")
    add_options(probe, "rq1")  # --model, --corpus, --n-sequences, ...: RQ1's declaration
    probe.add_argument("--text-column", default="text",
                       help="the column holding the texts in a table or dataset (default: text)")
    probe.add_argument("--no-control", action="store_true", help="skip the random-init control")
    probe.add_argument("--order", default=None,
                       help="probe the model duplicated to this layer order of 0-based blocks, "
                            "e.g. 0,0,1,1,2,2,3,4,5,6,7,8,9,10,11 (first three copied)")
    probe.add_argument("--out", default=None, help="CSV file to write the table to")
    _add_translator_options(probe, fit_help="fit a translator for every probed model on the N "
                            "sequences after the first --n-sequences of the corpus")
    probe.set_defaults(func=_probe)


def _add_lens_command(commands) -> None:
    """``dupbert lens``: the lens of one text."""
    lens = commands.add_parser(
        "lens", help="the MLM head's top-1 token at every hidden state and position of one text",
        description="Run one text unmasked through the model and print a grid: one row per hidden "
                    "state (h0 = embedding output), one column per input token, each cell the MLM "
                    "head's top-1 token (or its probability, or the input token's rank).")
    lens.add_argument("--model", required=True, help="zoo name, local folder or Hub id")
    given = lens.add_mutually_exclusive_group(required=True)
    given.add_argument("--text", help="the input sequence, e.g. a reaction SMILES")
    given.add_argument("--text-file", default=None,
                       help="a file holding the one input sequence (stripped; .gz too)")
    lens.add_argument("--k", type=int, default=5, help="guesses kept per cell in --out (default 5)")
    lens.add_argument("--value", default="token", choices=["token", "probability", "input_rank"],
                      help="what each cell shows (default: the top-1 token)")
    lens.add_argument("--special", action="store_true", help="also show CLS/SEP positions")
    lens.add_argument("--max-length", type=int, default=512)
    lens.add_argument("--device", default="cpu")
    lens.add_argument("--out", default=None, help="CSV file for the tidy top-k lens frame")
    lens.add_argument("--html", default=None,
                      help="write the lens as a self-contained interactive HTML page (hover a "
                           "cell for its top-k)")
    _add_translator_options(lens, fit_help="fit the translator on N sequences of --fit-corpus "
                            "(default 200), the lens text left out")
    lens.add_argument("--fit-corpus", default=None,
                      help="corpus to fit the translator on (as probe --corpus; default: the "
                           "model's domain corpus)")
    lens.add_argument("--text-column", default="text",
                      help="the column holding the texts of --fit-corpus (default: text)")
    lens.set_defaults(func=_lens)


def _add_finetune_commands(commands) -> None:
    """``dupbert finetune``, ``rerun`` and ``merge``: RQ3 runs, re-runs of committed ones, shard
    files combined."""
    from .study.params import add_options

    finetune = commands.add_parser(
        "finetune", help="RQ3: fine-tune baseline and duplicated configurations over seeds",
        description="Fine-tune every (task, model, seed, duplication) that --results lacks, with "
                    "identical hyper-parameters for all configurations (run_glue.py/run_qa.py "
                    "defaults unless overridden), appending one JSON row per run.")
    finetune.add_argument("--profile", default=None,
                          help="an RQ3 parameter file, e.g. notebooks/params/gpu/rq3.yaml: run its "
                               "sweep (the runs rq3.ipynb makes with it, same run keys) instead of "
                               "--task/--seed/...; --results, --outputs-dir, --shard, --device apply, and "
                               "--model keeps only the models named")
    add_options(finetune, "rq3")
    finetune.add_argument("--shard", default=None,
                          help="i/n: run only configurations i, i+n, ... (0-based); merge later")
    finetune.add_argument("--progress", action="store_true", help="show training progress")
    finetune.set_defaults(func=_finetune)

    rerun = commands.add_parser(
        "rerun", help="re-run committed runs from their rows and compare the metrics",
        description="Re-run each named run from its row of RESULTS (same model, task, "
                    "configuration, seed, hyper-parameters and subsets) and print the committed "
                    "and the re-run metrics in points. Exit status 1 when any metric differs by "
                    "more than --tolerance points.")
    rerun.add_argument("results", help="JSON-lines results file, e.g. results/cpu/rq3.jsonl")
    rerun.add_argument("run_keys", nargs="+", metavar="RUN_KEY", help="run_key of a row")
    rerun.add_argument("--device", default="cpu")
    rerun.add_argument("--tolerance", type=float, default=0.5, help="points (default 0.5)")
    rerun.add_argument("--progress", action="store_true", help="show training progress")
    rerun.set_defaults(func=_rerun)

    merge = commands.add_parser("merge", help="combine results files, every run once")
    merge.add_argument("out", help="the combined results file to write")
    merge.add_argument("inputs", nargs="+", help="results files, e.g. one per shard")
    merge.set_defaults(func=_merge)


def main(argv: list[str] | None = None) -> int:
    """Run the command line. dupbert errors, ``OSError`` and ``ValueError`` print one line
    ``dupbert: error: ...`` and exit with status 2 (``DUPBERT_DEBUG=1``: the traceback instead).
    """
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (DupbertError, OSError, ValueError) as error:
        if os.environ.get("DUPBERT_DEBUG", "").strip() not in ("", "0"):
            raise
        print(f"dupbert: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
