"""Mutation testing of the analysis modules: `make mutants` runs mutmut over them and
writes the kill rate per module to benchmarks/results/mutation.json.

    python benchmarks/mutation.py run [--jobs N] [--modules M ...] [--sample N]
                                                    # mutmut, module by module, then `report`
    python benchmarks/mutation.py report [--modules M ...]  # only rewrite their JSON entries
    python benchmarks/mutation.py recheck [--modules M ...]  # timeouts again, without the limit
    python benchmarks/mutation.py survivors         # list the mutants not killed, with diffs

mutmut's configuration is ``[tool.mutmut]`` in pyproject.toml: which files it mutates and which
unit tests it runs (the unit tests of these modules, no notebooks). Of dupbert/core/results.py and
dupbert/study/sweeps.py only the results-file and sweep code is mutated (``SELECTED``); the training
functions are covered by tests that fine-tune for real, a minute or more per mutant on two cores.

Counting: a mutant is *killed* when a test failed (mutmut's "killed") or ran past mutmut's time
limit ("timeout": the mutant made the tests hang, so they detect it); every other mutant of the
module counts as *survived*: mutmut's "survived", and also "no tests" (no selected test runs the
mutated function), "suspicious", "segfault" and "not checked" (a run that did not reach it), so
that ``killed + survived == total`` and nothing unexamined passes for killed. ``report`` prints
the status counts behind each number; benchmarks/results/mutation-survivors.md explains each
survivor.

Sampling, for modules whose every mutant costs a real model's tests (``probe``, ``duplicate``:
about 20 s a mutant, hours for all): ``run --sample N`` runs only the first ``N`` mutants of a
fixed random order of the module's mutants (:func:`sample_order`, seed 0), so what has been run
is a simple random sample, and a later, larger ``N`` extends it. The counts above stay
conservative (every mutant not run counts as survived); ``report`` adds ``not_checked`` and, for
a module run in part, the kill rate of the random sample run so far with its Wilson 95% interval
(``sample``).

Timeouts, re-checked: mutmut's wall-clock limit is (the tests' timed duration + 15 s) x 4, and
the timed durations leave out fixtures (a zoo model's loading), so on slow or busy cores an
equivalent mutant of ``probe`` can "time out" and pass for killed. ``recheck`` runs the tests of
every timed-out mutant again without that limit (:func:`recheck_timeouts`) and records what they
really do: pass (survived), fail (killed), or still run after ``RECHECK_FACTOR`` times the same
tests' clean duration (a real hang: it stays a timeout).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "benchmarks" / "results" / "mutation.json"
MODULES = ("core.significance", "core.results", "study.sweeps", "study.paper", "study.comparisons",
           "book.text", "book.rq3", "book.rq4", "study.glance", "study.ensemble", "study.rq5",
           "book.rq5", "tools.duplicate", "tools.probe", "book.rq1")
# mutmut's names of the functions counted in modules mutated only in part: the results file
# (dupbert/core/results.py), and the sweep and RQ5's smoke sweeps (dupbert/study/sweeps.py)
SELECTED = {"core.results": ("x_run_key", "xǁResultsFileǁ"),
            "study.sweeps": ("x_parse_shard", "x_sweep_configurations", "x_sweep", "x_merge_results",
                       "x__without_timings", "x_run_smoke_sweeps")}
KILLED = {"killed", "timeout"}
TIMEOUT_CODES = (-24, 24, 152, 255, 36)  # mutmut's exit codes for "timeout" (mutmut.stats)
RECHECK_FACTOR = 3.0  # a re-checked mutant's tests may take this many times their clean duration


def module_patterns(module: str) -> list[str]:
    """The ``mutmut run`` arguments that select the mutants counted for ``module``."""
    if module not in SELECTED:
        return [f"dupbert.{module}.*"]
    return [f"dupbert.{module}.{f}*" if f.endswith("ǁ") else f"dupbert.{module}.{f}__mutmut_*"
            for f in SELECTED[module]]


def meta_path(module: str, mutants: Path = REPO / "mutants") -> Path:
    """mutmut's record of ``module``'s mutants: ``mutants/dupbert/<folder>/<module>.py.meta``
    (``book.rq3``: ``book/rq3.py.meta``)."""
    return mutants / "dupbert" / f"{module.replace('.', '/')}.py.meta"


def exit_codes(module: str, mutants: Path = REPO / "mutants") -> dict[str, int | None] | None:
    """mutmut's exit code of every counted mutant of ``module`` (``None``: not run yet), read
    from :func:`meta_path`; ``None`` before mutmut has generated them."""
    meta = meta_path(module, mutants)
    if not meta.is_file():
        return None
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: code for name, code in codes.items() if counted(module, name)}


def _generated_codes(module: str, mutants: Path) -> dict[str, int | None]:
    """:func:`exit_codes`, or SystemExit when mutmut has not generated the module's mutants."""
    codes = exit_codes(module, mutants)
    if codes is None:
        raise SystemExit(f"no mutants of {module} in {mutants}: run `make mutants` first")
    return codes


def unchecked(module: str, mutants: Path = REPO / "mutants") -> list[str] | None:
    """The counted mutants of ``module`` that mutmut has not run yet; ``None`` before mutmut
    has generated them (no ``.meta`` file)."""
    codes = exit_codes(module, mutants)
    return None if codes is None else [name for name, code in codes.items() if code is None]


def sample_order(module: str, mutants: Path = REPO / "mutants") -> list[str]:
    """Every counted mutant of ``module`` in one fixed random order (sorted names shuffled with
    seed 0): its first ``N`` are a simple random sample of the module's mutants.

    Raises:
        SystemExit: mutmut has not generated the module's mutants yet.
    """
    names = sorted(_generated_codes(module, mutants))
    random.Random(0).shuffle(names)
    return names


def counted(module: str, name: str) -> bool:
    """Whether mutant ``name`` (``dupbert.<module>.<function>__mutmut_<n>``) is one of those
    counted for ``module``."""
    function = name.removeprefix(f"dupbert.{module}.").rsplit("__mutmut_", 1)[0]
    if module not in SELECTED:
        return True
    return any(function == f or (f.endswith("ǁ") and function.startswith(f))
               for f in SELECTED[module])


def statuses(mutants: Path = REPO / "mutants") -> dict[str, collections.Counter]:
    """mutmut's status counts per module, read from its ``mutants/dupbert/<module>.py.meta``."""
    from mutmut.stats import status_by_exit_code

    return {module: collections.Counter(status_by_exit_code[code]
                                        for code in _generated_codes(module, mutants).values())
            for module in MODULES}


def sampled(module: str, mutants: Path = REPO / "mutants") -> collections.Counter:
    """mutmut's status counts over the longest run-through prefix of :func:`sample_order`: the
    random sample that ``run --sample`` has completed (mutants run outside that order, e.g. by
    an interrupted full run, are left out, so that it stays a simple random sample)."""
    from mutmut.stats import status_by_exit_code

    codes = exit_codes(module, mutants)
    prefix = itertools.takewhile(lambda name: codes[name] is not None, sample_order(module, mutants))
    return collections.Counter(status_by_exit_code[codes[name]] for name in prefix)


def kill_rates(counts: dict[str, collections.Counter],
               samples: dict[str, collections.Counter] | None = None) -> dict[str, dict]:
    """``{module: {"killed", "survived", "total", "not_checked"}}`` from status counts (see the
    module doc). A module run in part whose :func:`sampled` counts (``samples``) are not empty
    also gets ``"sample": {"checked", "killed", "kill_rate", "ci95"}``: the kill rate of that
    random sample with its Wilson 95% interval (:func:`dupbert.study.glance.wilson_interval`)."""
    from dupbert.study.glance import wilson_interval

    rates = {}
    for module, count in counts.items():
        total = sum(count.values())
        killed = sum(count[s] for s in KILLED)
        rates[module] = {"killed": killed, "survived": total - killed, "total": total,
                         "not_checked": count["not checked"]}
        sample = (samples or {}).get(module, collections.Counter())
        checked = sum(sample.values())
        if count["not checked"] and checked:
            hits = sum(sample[s] for s in KILLED)
            low, high = wilson_interval(hits / checked, checked)
            rates[module]["sample"] = {"checked": checked, "killed": hits,
                                       "kill_rate": round(hits / checked, 4),
                                       "ci95": [round(low, 4), round(high, 4)]}
    return rates


def merge_rates(recorded: dict[str, dict], rates: dict[str, dict], modules: tuple[str, ...],
                measured: str | None = None) -> dict[str, dict]:
    """``recorded`` (mutation.json as it stands) with the entries of ``modules`` replaced by
    their new ``rates``, each with ``measured`` (how the run was made) where given; every other
    module keeps its recorded entry, so that re-running some modules loses nothing of the
    others."""
    merged = dict(recorded)
    for module in modules:
        if module in rates:
            merged[module] = {**rates[module], **({"measured": measured} if measured else {})}
    return merged


def report(modules: tuple[str, ...] = MODULES, measured: str | None = None) -> None:
    """Rewrite the entries of ``modules`` in benchmarks/results/mutation.json from mutants/ (the
    others stay as recorded, :func:`merge_rates`) and print the status counts behind them."""
    counts = {m: c for m, c in statuses().items() if m in modules}
    rates = kill_rates(counts, {module: sampled(module) for module in counts})
    recorded = json.loads(RESULT.read_text()) if RESULT.is_file() else {}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(merge_rates(recorded, rates, modules, measured), indent=2) + "\n")
    for module, rate in rates.items():
        share = rate["killed"] / rate["total"] if rate["total"] else float("nan")
        detail = ", ".join(f"{s} {n}" for s, n in sorted(counts[module].items()))
        print(f"{module:13s} {rate['killed']:5d}/{rate['total']:<5d} killed ({share:.1%}): {detail}")
        if "sample" in rate:
            sample = rate["sample"]
            print(f"{'':13s} random sample of {sample['checked']}: {sample['kill_rate']:.1%} killed "
                  f"(95% CI {sample['ci95'][0]:.1%} to {sample['ci95'][1]:.1%})")
    print(f"wrote {RESULT.relative_to(REPO)}")


def not_killed(module: str, mutants: Path = REPO / "mutants") -> list[tuple[str, str]]:
    """``(name, status)`` of every counted mutant of ``module`` that is not killed."""
    from mutmut.stats import status_by_exit_code

    return [(name, status_by_exit_code[code]) for name, code in exit_codes(module, mutants).items()
            if status_by_exit_code[code] not in KILLED]


def diff_summary(name: str, module: str) -> str:
    """The changed lines of mutant ``name`` as one line: ``old`` -> ``new`` (stripped)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    path = Path("dupbert", *module.split(".")).with_suffix(".py")  # dupbert/core/results.py
    diff = get_diff_for_mutant(name, path=path).splitlines()
    removed = " / ".join(line[1:].strip() for line in diff
                         if line.startswith("-") and not line.startswith("---"))
    added = " / ".join(line[1:].strip() for line in diff
                       if line.startswith("+") and not line.startswith("+++"))
    return f"`{removed}` -> `{added}`".replace("|", "\\|")


def survivors() -> None:
    """Print every counted mutant that was run and not killed, one Markdown list line each (name,
    status, diff), grouped by module: the raw list that mutation-survivors.md explains. Mutants
    not run (outside a sample) are only counted."""
    for module in MODULES:
        rows = not_killed(module)
        run = [(name, status) for name, status in rows if status != "not checked"]
        print(f"\n## {module} ({len(run)} run and not killed; {len(rows) - len(run)} not run)\n")
        for name, status in run:
            print(f"- `{name.removeprefix(f'dupbert.{module}.')}` ({status}): "
                  f"{diff_summary(name, module)}")


def one_thread_environment() -> dict[str, str]:
    """This process's environment with one torch intra-op thread (``OMP_NUM_THREADS`` and
    ``MKL_NUM_THREADS`` 1 unless already set), for mutmut's children and ``recheck``'s tests:
    with two children on two cores, torch's default of a thread per core made them spin against
    each other, and probe's mutants ran 4-5 times slower (benchmarks/README.md).

    ``DUPBERT_DATA_DIR`` is set to the checkout's ``../shared/data`` and ``DUPBERT_MODELS`` to its
    ``models/`` unless given: mutmut runs the tests in ``mutants/``, one folder deeper, where the
    defaults reach neither, so every test that reads data would skip and its mutants pass for
    survived, and every test that loads a model trained here would fail mutmut's clean run.

    Raises:
        SystemExit: no data folder (neither ``DUPBERT_DATA_DIR`` nor ``../shared/data``).
    """
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    if not env.get("DUPBERT_DATA_DIR"):
        default = REPO.parent / "shared" / "data"
        if not default.is_dir():
            raise SystemExit(f"no data folder at {default}: set DUPBERT_DATA_DIR to the shared data "
                             "folder; without it the mutants' tests that read data would skip")
        env["DUPBERT_DATA_DIR"] = str(default)
    env.setdefault("DUPBERT_MODELS", str(REPO / "models"))
    return env


def _pytest(tests: list[str], mutant: str | None, timeout: float | None,
            mutants: Path = REPO / "mutants") -> int | None:
    """Run ``tests`` (pytest node ids) in ``mutants/`` with ``mutant`` active (``None``: the
    original code) and mutmut's pytest arguments; pytest's exit code, or ``None`` past
    ``timeout`` seconds (wall clock)."""
    import tomllib  # Python 3.11+

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    env = {k: v for k, v in one_thread_environment().items() if k != "MUTANT_UNDER_TEST"}
    if mutant is not None:
        env["MUTANT_UNDER_TEST"] = mutant
    command = [sys.executable, "-m", "pytest", "-x", "-q", *config.get("pytest_add_cli_args", []),
               *tests]
    try:
        return subprocess.run(command, cwd=mutants, env=env, timeout=timeout,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        return None


def recheck_timeouts(module: str, mutants: Path = REPO / "mutants", run_tests=_pytest,
                     factor: float = RECHECK_FACTOR) -> dict[str, str]:
    """Run again, without mutmut's time limit, the tests of every timed-out mutant of
    ``module`` (those mutmut ran for its function, read from ``mutants/mutmut-stats.json``) and
    write what they did into ``mutants/dupbert/<module>.py.meta``: exit code 0 (survived) when
    they pass, 1 (killed) when one fails; a mutant still running after ``factor`` times the
    duration of the same tests on the original code keeps its timeout (it hangs).

    Args:
        run_tests: ``(tests, mutant or None, timeout s or None) -> exit code or None``
            (``None``: ran past the timeout); default pytest in ``mutants/`` (:func:`_pytest`).

    Returns:
        ``{mutant: "survived" | "killed" | "timeout"}`` for every timed-out mutant.

    Raises:
        SystemExit: no mutants of ``module``, or its tests fail on the original code (nothing
            can be judged then).
    """
    meta_file = meta_path(module, mutants)
    codes = _generated_codes(module, mutants)
    tests_by_function = json.loads((mutants / "mutmut-stats.json").read_text())[
        "tests_by_mangled_function_name"]
    clean_seconds: dict[tuple[str, ...], float] = {}
    outcomes = {}
    for name in [n for n, code in codes.items() if code in TIMEOUT_CODES]:
        tests = tuple(sorted(tests_by_function.get(name.rsplit("__mutmut_", 1)[0], ())))
        if tests not in clean_seconds:
            start = time.monotonic()
            if run_tests(list(tests), None, None) != 0:
                raise SystemExit(f"the tests of {name} fail without any mutant: fix them first")
            clean_seconds[tests] = time.monotonic() - start
            print(f"{len(tests)} tests of {name.rsplit('__mutmut_', 1)[0]}: "
                  f"{clean_seconds[tests]:.0f} s without any mutant", flush=True)
        code = run_tests(list(tests), name, factor * clean_seconds[tests])
        outcomes[name] = "timeout" if code is None else "survived" if code == 0 else "killed"
        if code is not None:
            meta = json.loads(meta_file.read_text())
            meta["exit_code_by_key"][name] = 0 if code == 0 else 1
            partial = meta_file.with_suffix(".meta.partial")
            partial.write_text(json.dumps(meta))
            os.replace(partial, meta_file)  # atomic: an interrupted recheck loses nothing
        print(f"{name}: {outcomes[name]}", flush=True)
    return outcomes


def run(jobs: int, modules: tuple[str, ...] = MODULES, sample: int | None = None,
        batch: int = 20) -> None:
    """``mutmut run`` module by module (``modules``, default all) over every counted mutant not
    run yet (so an interrupted run resumes: mutmut itself re-runs every mutant named on its
    command line); with ``sample``, only those among the first ``sample`` of
    :func:`sample_order`, in batches of ``batch`` mutants per mutmut call."""
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    for module in modules:
        names = unchecked(module)
        if sample is not None:
            waiting = set(names or ())
            names = [n for n in sample_order(module)[:sample] if n in waiting]
        if names == []:
            continue
        print(f"mutating {module}", flush=True)
        selection = module_patterns(module) if names is None else names
        # a sample goes in batches, in its random order, so that an interrupted run still leaves
        # a run-through prefix of that order (what `sampled` counts)
        batches = [selection] if sample is None else [selection[i:i + batch]
                                                      for i in range(0, len(selection), batch)]
        for names_in_batch in batches:
            subprocess.run([mutmut, "run", "--max-children", str(jobs), *names_in_batch],
                           cwd=REPO, env=one_thread_environment(), check=True)


def main(argv: list[str] | None = None) -> None:
    """Command line: ``run``, ``report``, ``survivors`` or ``recheck`` (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run", "report", "survivors", "recheck"])
    parser.add_argument("--jobs", type=int, default=1, help="mutmut worker processes (default 1)")
    parser.add_argument("--modules", nargs="+", choices=MODULES, default=list(MODULES),
                        help="run only these modules (default: all)")
    parser.add_argument("--sample", type=int, default=None, metavar="N",
                        help="run only the first N of each module's mutants in a fixed random "
                             "order (default: all)")
    parser.add_argument("--batch", type=int, default=20, metavar="N",
                        help="with --sample, mutants per mutmut call (default 20); each call "
                             "first runs their tests on the clean code, so larger batches cost "
                             "less, and an interrupted call loses its batch")
    parser.add_argument("--measured", default=None, metavar="TEXT",
                        help="how this run was made (date, sample, workers), recorded beside "
                             "each re-run module's numbers")
    arguments = parser.parse_args(argv)
    if arguments.command == "survivors":
        return survivors()
    if arguments.command == "recheck":
        for module in arguments.modules:
            recheck_timeouts(module)
    if arguments.command == "run":
        run(arguments.jobs, tuple(arguments.modules), arguments.sample, arguments.batch)
    report(tuple(arguments.modules), arguments.measured)


if __name__ == "__main__":
    main()
