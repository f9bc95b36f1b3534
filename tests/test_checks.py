"""Every entry point checks its inputs up front and fails with one clear message.

Each test uses an input that failed before (raw OSError, an AssertionError after 20-35 s, a
half-parsed list) and asserts the message or value that comes now.
"""

import http.server
import threading
from pathlib import Path

import re

import pytest
import torch

from dupbert.core import checks
from dupbert.core import zoo
from dupbert.tools import duplicate
from dupbert.study import params
from dupbert.core.errors import (ConfigurationNotAvailable, DeviceNotAvailable, MLMHeadMissing,
                            ModelNotAvailable, ParameterError)

REPO = Path(__file__).resolve().parents[1]

ALBERT_OFFLINE = (
    "could not load model 'albert-base-v2'.\n"
    f"Tried: zoo names {sorted(zoo.ZOO)} (no match); a local folder 'albert-base-v2' (does not "
    "exist); the Hugging "
    "Face Hub id 'albert-base-v2' (HF_HUB_OFFLINE is set).\n"
    "transformers said: We couldn't connect to 'https://huggingface.co' to load the files, and "
    "couldn't find them in the cached files.\n"
    "Fix: use a zoo name, a folder with config.json and weights, or a Hub id on a machine with "
    "access to the Hub.")


@pytest.fixture
def zoo_env(monkeypatch, zoo_cache, shared_data_dir):
    monkeypatch.setenv("DUPBERT_CACHE", str(zoo_cache))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))


# -- 1. a model that cannot be loaded ------------------------------------------------------------


def test_load_config_gives_the_message_of_the_loader():
    with pytest.raises(ModelNotAvailable) as from_checks:
        zoo.load_config("albert-base-v2")
    assert str(from_checks.value) == ALBERT_OFFLINE
    from dupbert import load_mlm

    with pytest.raises(ModelNotAvailable) as from_loader:
        load_mlm("albert-base-v2")
    assert str(from_loader.value) == str(from_checks.value)  # one wording for both


def test_the_rq3_parameters_raise_the_loader_message_not_an_oserror(zoo_env):
    # papermill notebooks/rq3.ipynb out.ipynb -p model albert-base-v2 (the mission's command)
    with pytest.raises(ModelNotAvailable) as error:
        params.profile_parameters({"model": "albert-base-v2", "models": ["rxnmapper-albert"]})
    assert str(error.value) == ALBERT_OFFLINE
    # a misspelled zoo name
    with pytest.raises(ModelNotAvailable, match=r"^could not load model 'rxnmapper-albret'\.\n"):
        params.profile_parameters({"models": ["rxnmapper-albret"]})


def test_an_encoder_only_zoo_model_is_refused_where_the_mlm_head_is_needed(zoo_env):
    with pytest.raises(MLMHeadMissing, match=r"^zoo model 'all-MiniLM-L6-v2' has no MLM head"):
        zoo.check_model("all-MiniLM-L6-v2", mlm_head=True)
    assert zoo.check_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"


@pytest.fixture
def hub_env(monkeypatch):
    """No HF_HUB_OFFLINE; whatever the check switches is put back afterwards."""
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE",
                        huggingface_hub.constants.HF_HUB_OFFLINE)
    zoo._hub_answers.cache_clear()
    yield monkeypatch
    zoo._hub_answers.cache_clear()


def test_an_unreachable_hub_switches_the_process_offline_at_once(hub_env):
    import os

    import huggingface_hub.constants

    hub_env.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: no answer
    with pytest.raises(ModelNotAvailable) as error:
        zoo.load_config("albert-base-v2")
    assert "(the Hub did not answer within 3 s, so this process runs offline).\n" in str(error.value)
    assert os.environ["HF_HUB_OFFLINE"] == "1" and huggingface_hub.constants.HF_HUB_OFFLINE is True


def test_a_hub_that_answers_leaves_the_process_online(hub_env):
    import os

    class Head(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (http.server's name)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Head)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        hub_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert zoo.hub_or_offline() == "reachable"
        assert "HF_HUB_OFFLINE" not in os.environ
    finally:
        server.shutdown()
    hub_env.setenv("HF_HUB_OFFLINE", "1")
    assert zoo.hub_or_offline() == "offline"


# -- 2. a device that is not there ---------------------------------------------------------------


def test_cuda_without_cuda_names_the_device_what_torch_says_and_what_there_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(DeviceNotAvailable) as error:
        checks.check_device("cuda")
    assert str(error.value) == (
        f"device 'cuda' is not available: torch {torch.__version__} reports "
        "torch.cuda.is_available() = False (this torch was built without CUDA); available "
        "devices: cpu. Use device 'cpu' (papermill -p device cpu, dupbert --device cpu) or run on "
        "a machine with a GPU.")
    assert checks.check_device("cpu") == "cpu"


def test_a_gpu_index_beyond_the_gpus_there_are(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(DeviceNotAvailable) as error:
        checks.check_device("cuda:1")
    assert str(error.value) == (
        f"device 'cuda:1' is not available: torch {torch.__version__} reports "
        "torch.cuda.device_count() = 1; available devices: cpu, cuda:0")
    assert checks.check_device("cuda:0") == "cuda:0"


def test_a_device_torch_does_not_know():
    with pytest.raises(DeviceNotAvailable, match=r"^device 'gpu' is not a device torch knows .*"
                                                 r"devices look like cpu, cuda, cuda:1, mps; "
                                                 r"available devices: cpu"):
        checks.check_device("gpu")


# -- 3. parameter values as people type them -----------------------------------------------------

TASKS = {"tasks": params.NOTEBOOK_PARAMETERS["rq3"]["tasks"]}


@pytest.mark.parametrize("typed, used", [
    ('["snli"]', ["snli"]),  # papermill -p tasks '["snli"]' (half parsed before: 'unknown task')
    ('["snli", "sst2"]', ["snli", "sst2"]),
    ("[snli, sst2]", ["snli", "sst2"]),  # YAML flow list in -p
    ("snli,sst2", ["snli", "sst2"]),
    ("snli", ["snli"]),
    (["snli"], ["snli"]),  # -y 'tasks: [snli]' / -f file.yaml
    (None, None), ("None", None), ("", None),  # -p tasks None, -r tasks None, -p tasks ""
    ({"m": ["snli", "sst2"]}, {"m": ["snli", "sst2"]}),  # -y 'tasks: {m: [snli, sst2]}'
    ("{m: [snli], n: uspto50k}", {"m": ["snli"], "n": ["uspto50k"]}),  # -p tasks '{...}'
])
def test_list_forms_papermill_users_type(typed, used):
    assert params.notebook_parameters(TASKS, {"tasks": typed}, show=False) == {"tasks": used}


@pytest.mark.parametrize("typed, message", [
    ({"m": ["snli", "sst-2"]}, "unknown task 'sst-2'; tasks are sst2, snli, squad2, uspto50k"),
    ({"m": []}, "the list is empty"),
    ({"m": None}, "is not allowed (a value is needed)"),
    ({}, "the mapping is empty"),
])
def test_per_model_tasks_name_the_bad_value(typed, message):
    with pytest.raises(ParameterError, match=re.escape(message)) as error:
        params.notebook_parameters(TASKS, {"tasks": typed}, show=False)
    assert str(error.value).startswith(f"1 parameter cannot be used:\n  tasks = {typed!r}: ")


def test_a_json_list_in_p_is_read_as_the_notebook_reads_it(zoo_env, capsys):
    values = {**_defaults("rq3"), "tasks": '["uspto50k"]', "seeds": "[0, 1]",
              "max_train_samples": "{uspto50k: 32}"}
    used = params.notebook_parameters("rq3", values)
    assert used["tasks"] == ["uspto50k"] and used["seeds"] == [0, 1]
    assert used["max_train_samples"] == {"uspto50k": 32}
    out = capsys.readouterr().out
    assert out.startswith("parameters used:\n  models = rxnmapper-albert\n")
    assert "  tasks = uspto50k\n  duplications = baseline, repeat shared +3, copy last\n" in out
    assert "  max_train_samples = uspto50k: 32\n" in out


def test_the_parameters_table_writes_values_compactly():
    table = params.parameters_table({
        "seeds": {"snli": list(range(8)), "uspto50k": {"a": [0, 1, 2, 3], "b": [0, 2]}},
        "models": ["m"], "max_eval_samples": {"sst2": None}, "flag": True, "two": [0, 1],
        "bools": [True, False, True], "duplications": {"m": ["baseline", "copy last"], "n": []},
        "nested": [[0, 1], [2]], "none": []})
    assert table.index.name == "parameter" and list(table.columns) == ["value"]
    assert table["value"].to_dict() == {
        "seeds": "snli: 0-7; uspto50k: {a: 0-3, b: [0, 2]}", "models": "m", "max_eval_samples": "sst2: None",
        "flag": "True", "two": "0, 1", "bools": "True, False, True",
        "duplications": "m: [baseline, copy last]; n: []", "nested": "[0, 1], [2]", "none": "[]"}


def test_bad_forms_are_rejected_at_once_with_the_forms_to_use():
    spec = {"seeds": params.NOTEBOOK_PARAMETERS["rq3"]["seeds"], **TASKS,
            "max_train_samples": params.NOTEBOOK_PARAMETERS["rq3"]["max_train_samples"]}
    with pytest.raises(ParameterError) as error:
        params.notebook_parameters(spec, {"seeds": "0 1 2", "tasks": '["snli", "sst-2"]',
                                          "max_train_samples": {"snl": 32}}, show=False)
    assert str(error.value) == (
        "3 parameters cannot be used:\n"
        "  seeds = '0 1 2': '0 1 2' is not an integer. Forms that work: -p seeds 0,1,2; "
        "-p seeds '[0, 1, 2]'; -y 'seeds: [0, 1, 2]'; "
        "-y 'seeds: {snli: [0, 1], squad2: {MODEL: [0]}}'\n"
        "  tasks = '[\"snli\", \"sst-2\"]': unknown task 'sst-2'; tasks are sst2, snli, squad2, "
        "uspto50k\n"
        "  max_train_samples = {'snl': 32}: unknown task 'snl' as a key; tasks are sst2, snli, "
        "squad2, uspto50k. Forms that work: -p max_train_samples 32; "
        "-y 'max_train_samples: {snli: 32, sst2: 64}'; "
        "-y 'max_train_samples: {snli: {MODEL: 32}}'; -p max_train_samples None")


@pytest.mark.parametrize("notebook, name, typed, used", [
    ("rq1", "duplications", "{first copied: [0, 0, 1]}", {"first copied": [0, 0, 1]}),
    ("rq1", "duplications", "standard", "standard"),
    ("rq1", "duplications", "None", None),
    ("rq2", "duplications", "paper", "paper"),
    ("rq2", "reconstruction", "probe", "probe"),
    ("rq2", "corpus", "", None),
    ("rq2", "max_tokens", "1000", 1000),
    ("rq3", "epochs", "{snli: 3, sst2: 2}", {"snli": 3.0, "sst2": 2.0}),
    ("rq3", "learning_rate", {"uspto50k": {"rxnfp-bert": "1e-4"}}, {"uspto50k": {"rxnfp-bert": 1e-4}}),
    ("rq3", "group_by_length", "false", False),
    ("rq3", "duplications", "all", "all"),
    ("rq3", "duplications", '["baseline", "copy first 3"]', ["baseline", "copy first 3"]),
    ("rq3", "seeds", 3, [3]),
    ("rq3", "seeds", "{snli: [0, 1], uspto50k: {rxnfp-bert: 0}}",
     {"snli": [0, 1], "uspto50k": {"rxnfp-bert": [0]}}),
    ("rq5", "outputs_dirs", "a,b", ["a", "b"]),
    ("rq5", "ensemble_size", "None", None),
    ("rq5", "smoke_sweeps", "[{models: [m]}]", [{"models": ["m"]}]),
    ("rq1", "mask_rate", "0.15", 0.15),
    ("rq1", "masking", "80-10-10", "80-10-10"),
    ("glance", "results_paths", "results/cpu/rq3.jsonl", ["results/cpu/rq3.jsonl"]),
    ("glance", "study_profiles", "None", None),
    ("rq4", "study_profiles", "notebooks/params/cpu/rq3.yaml", ["notebooks/params/cpu/rq3.yaml"]),
    ("rq5", "study_profile", "notebooks/params/cpu/rq3.yaml", "notebooks/params/cpu/rq3.yaml"),
])
def test_every_kind_of_notebook_parameter(notebook, name, typed, used):
    spec = {name: params.NOTEBOOK_PARAMETERS[notebook][name]}
    assert params.notebook_parameters(spec, {name: typed}, show=False) == {name: used}


def test_a_rate_above_one():
    spec = {"mask_rate": params.NOTEBOOK_PARAMETERS["rq1"]["mask_rate"]}
    with pytest.raises(ParameterError) as error:
        params.notebook_parameters(spec, {"mask_rate": 15}, show=False)  # a percentage
    assert str(error.value) == ("1 parameter cannot be used:\n  mask_rate = 15: 15.0 is above the "
                                "largest allowed value, 1. Forms that work: -p mask_rate 0.5")


def test_translators_are_the_fitted_lenses():
    spec = {"translators": params.NOTEBOOK_PARAMETERS["rq1"]["translators"]}
    assert params.notebook_parameters(spec, {"translators": "linear,tuned-token"}, show=False) == {
        "translators": ["linear", "tuned-token"]}
    with pytest.raises(ParameterError) as error:
        params.notebook_parameters(spec, {"translators": '["linear", "identity", "tuned lens"]'},
                                   show=False)
    assert str(error.value).startswith(
        "1 parameter cannot be used:\n  translators = '[\"linear\", \"identity\", \"tuned lens\"]': "
        "unknown translators 'identity', 'tuned lens'; the fitted translators are linear, "
        "linear-masked, tuned, tuned-token")


def test_a_study_profile_that_does_not_exist():
    spec = {"study_profiles": params.NOTEBOOK_PARAMETERS["rq4"]["study_profiles"]}
    with pytest.raises(ParameterError, match=r"study_profiles = 'notebooks/params/cpu/rq3.yaml,"
                                             r"notebooks/params/cpu/rq9.yaml': "
                                             r"no file notebooks/params/cpu/rq9.yaml"):
        params.notebook_parameters(
            spec, {"study_profiles": "notebooks/params/cpu/rq3.yaml,notebooks/params/cpu/rq9.yaml"},
            show=False)


def test_a_corpus_is_a_name_a_users_file_or_a_hub_spec(tmp_path):
    """RQ1 and RQ2 read the user's texts as `dupbert probe --corpus` does (dupbert.read_texts)."""
    texts = tmp_path / "mine.txt"
    texts.write_text("the cat sat\n")
    for notebook in ("rq1", "rq2"):
        spec = {"corpus": params.NOTEBOOK_PARAMETERS[notebook]["corpus"]}
        for corpus in ("wikitext2", str(texts), "hub:wikitext:wikitext-2-raw-v1:test"):
            assert params.notebook_parameters(spec, {"corpus": corpus}, show=False) == {
                "corpus": corpus}
        with pytest.raises(ParameterError, match=r"^1 parameter cannot be used:\n  corpus = "
                                                 r"'wikitext': corpus 'wikitext' is not a "
                                                 r"built-in corpus and no file or folder "):
            params.notebook_parameters(spec, {"corpus": "wikitext"}, show=False)


def test_a_misspelled_choice_lists_the_choices():
    spec = {"duplications": params.NOTEBOOK_PARAMETERS["rq2"]["duplications"]}
    with pytest.raises(ParameterError) as error:
        params.notebook_parameters(spec, {"duplications": "standrd"}, show=False)
    assert str(error.value) == (
        "1 parameter cannot be used:\n  duplications = 'standrd': 'standrd' is not one of "
        "'paper', 'standard', None or a mapping {label: [block, ...]}. Forms that work: "
        "-y 'duplications: {LABEL: [0, 0, 1, 2]}'; -p duplications paper; "
        "-p duplications standard; -p duplications None")


def _parameters_cell(notebook):
    """The defaults of a notebook's parameters cell, as papermill would run them."""
    import json

    cells = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    source = next("".join(c["source"]) for c in cells
                  if "parameters" in c.get("metadata", {}).get("tags", []))
    values = {}
    exec(source, {}, values)  # noqa: S102 (the repository's own notebook)
    return values


def _defaults(notebook):
    return _parameters_cell(notebook)


@pytest.mark.parametrize("notebook", ["rq1", "rq2", "rq3", "rq4", "rq5", "glance"])
def test_the_checks_know_every_parameter_of_every_notebook(notebook):
    assert list(_parameters_cell(notebook)) == list(params.NOTEBOOK_PARAMETERS[notebook])


def test_every_rq3_profile_passes_the_checks_the_command_line_applies(zoo_env):
    """The cpu study's profile (seeds per model and task, hyper-parameters per task) is read by
    `dupbert finetune --profile` through these checks: a check that refuses it stops the study."""
    from dupbert.study import profiles

    for path in sorted((REPO / "notebooks" / "params").glob("*/rq3*.yaml")):
        used = params.profile_parameters(profiles.load_profile(path), device="cpu")
        assert used.seeds, path
    cpu = params.profile_parameters(profiles.load_profile(REPO / "notebooks/params/cpu/rq3.yaml"))
    assert cpu.seeds["uspto50k"] == {"rxnmapper-albert": list(range(8)), "rxnfp-bert": [0, 1, 2, 3]}


def test_task_names_are_the_tasks():
    from dupbert.training.tasks import TASKS as ALL

    assert params.TASK_NAMES == tuple(ALL)


@pytest.mark.parametrize("notebook", ["rq1", "rq2", "rq3", "rq4", "rq5", "emergence", "glance"])
def test_notebooks_validate_their_parameters_first(notebook):
    """The first code cell after the parameters cell is the check (before any heavy import), in
    a kernel quiet before the check: checking models may build zoo models on a fresh machine,
    importing tqdm.auto, whose ipywidgets warning (with a local path) once reached the published
    RQ1 chapter's stderr."""
    import json

    cells = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    at = next(i for i, c in enumerate(code) if "parameters" in c["metadata"].get("tags", []))
    check = "".join(code[at + 1]["source"])
    assert "from dupbert.book.kernel import chapter" in check
    assert f'chapter("{notebook}", globals())' in check


def test_the_chapter_kernel_is_quiet_before_the_check(monkeypatch):
    import warnings

    import dupbert.book.kernel as kernel

    seen = []

    def check(notebook, values):  # the warning filter is in place when the check runs
        seen.append(any(f[0] == "ignore" and f[1] is not None and f[1].pattern == "IProgress not found"
                        for f in warnings.filters))
        raise ValueError(notebook)

    monkeypatch.setattr(kernel, "chapter_parameters", check)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="rq1"):
        kernel.chapter("rq1", {})
    assert seen == [True]


def test_the_chapter_sets_its_checked_values_as_variables_and_hides_truncation(monkeypatch):
    """The cells below the check read the checked values (not the raw parameters cell's), and a
    sequence cut to ``max_length`` warns no chapter's output."""
    import types
    import warnings

    import dupbert.book.kernel as kernel
    from dupbert.tools.hidden import TruncationWarning

    checked = types.SimpleNamespace(values=lambda: {"models": ["rxnfp-bert"], "seed": 0})
    monkeypatch.setattr(kernel, "chapter_parameters", lambda notebook, values: checked)
    namespace = {"model": "rxnfp-bert", "models": ["rxnmapper-albert"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kernel.chapter("rq1", namespace) is checked
        warnings.warn("cut", TruncationWarning)
        warnings.warn("kept", UserWarning)
    assert namespace == {"model": "rxnfp-bert", "models": ["rxnfp-bert"], "seed": 0}
    assert [str(w.message) for w in caught] == ["kept"]


# -- 5. configurations that do not apply ---------------------------------------------------------


def test_a_configuration_the_model_is_too_shallow_for(zoo_env):
    with pytest.raises(ConfigurationNotAvailable) as error:
        duplicate.check_configurations(["splade-tiny-en"], ["baseline", "copy first 3"], strict=True)
    assert str(error.value) == (
        "splade-tiny-en (2 blocks) has no configuration 'copy first 3'; configurations: "
        "splade-tiny-en (2 blocks): baseline, copy first 1, copy first 2, copy middle, copy last, "
        "depth control")
    # the planner's rule: a name one model has is skipped for the others
    assert duplicate.check_configurations(["splade-tiny-en", "rxnmapper-albert"],
                                       ["baseline", "copy first 3"]) == {
        "splade-tiny-en": ["baseline"], "rxnmapper-albert": ["baseline", "copy first 3"]}
    with pytest.raises(ConfigurationNotAvailable, match=r"^splade-tiny-en has none of the "
                                                        r"configurations named \(copy first 3\)"):
        duplicate.check_configurations(["splade-tiny-en", "rxnmapper-albert"], ["copy first 3"])
    with pytest.raises(ConfigurationNotAvailable, match=r"^duplication configuration 'copy frist 3' "
                                                        r"is not a configuration of any model"):
        duplicate.check_configurations(["splade-tiny-en", "rxnmapper-albert"], ["copy frist 3"])


def test_two_models_left_without_configurations_and_two_unknown_names_are_named_in_plural(zoo_env):
    """The messages' plural forms: two models with none of the named configurations (only the
    ALBERT has ``repeat shared +3``), and two names that no model has."""
    with pytest.raises(ConfigurationNotAvailable) as error:
        duplicate.check_configurations(["splade-tiny-en", "all-MiniLM-L6-v2", "rxnmapper-albert"],
                                       ["repeat shared +3"])
    assert str(error.value).startswith(
        "splade-tiny-en, all-MiniLM-L6-v2 have none of the configurations named (repeat shared "
        "+3), so nothing would run for them; configurations: splade-tiny-en (2 blocks): baseline, ")
    with pytest.raises(ConfigurationNotAvailable) as error:
        duplicate.check_configurations(["splade-tiny-en", "rxnmapper-albert"],
                                       ["copy frist 3", "baseline", "copy lats"])
    assert str(error.value).startswith(
        "duplication configurations 'copy frist 3', 'copy lats' are not a configuration of any "
        "model named; configurations: splade-tiny-en (2 blocks): ")


def test_the_planner_names_what_a_shallow_model_skips(zoo_env):
    from dupbert.study import profiles

    # alone, it is refused where the parameters are read (test above); beside a deeper model, skipped
    plan, notes = profiles.plan_sweep(params.profile_parameters(
        {"models": ["splade-tiny-en", "all-MiniLM-L6-v2"], "tasks": ["sst2"],
         "duplications": ["baseline", "copy first 3"]}))
    assert [entry.duplications for entry in plan] == [("baseline",), ("baseline", "copy first 3")]
    assert notes == ["splade-tiny-en: skipping copy first 3 (not a configuration of this model; it "
                     "has baseline, copy first 1, copy first 2, copy middle, copy last, depth "
                     "control)"]


# --------------------------------------------------------------------------------------------------
# Library arguments: check_number and check_list, used by every public function that takes sizes,
# rates or lists


@pytest.mark.parametrize("call, message", [
    (lambda: checks.check_number("batch_size", 0, integer=True, minimum=1),
     "batch_size must be an integer >= 1, got 0"),
    (lambda: checks.check_number("batch_size", 2.7, integer=True, minimum=1),
     "batch_size must be an integer >= 1, got 2.7"),
    (lambda: checks.check_number("learning_rate", float("nan"), above=0),
     "learning_rate must be a number > 0, got nan"),
    (lambda: checks.check_number("learning_rate", float("inf"), above=0),
     "learning_rate must be a number > 0, got inf"),
    (lambda: checks.check_number("power", 80, above=0, below=1),
     "power must be a number > 0 and < 1, got 80"),
    (lambda: checks.check_number("power", 1.0, above=0, below=1),
     "power must be a number > 0 and < 1, got 1.0"),
    (lambda: checks.check_number("epochs", 0, above=0), "epochs must be a number > 0, got 0"),
    (lambda: checks.check_number("rate", 1.5, minimum=0, maximum=1),
     "rate must be a number >= 0 and <= 1, got 1.5"),
    (lambda: checks.check_number("seed", True, integer=True), "seed must be an integer, got True (bool)"),
    (lambda: checks.check_number("seed", "3", integer=True), "seed must be an integer, got '3' (str)"),
    (lambda: checks.check_list("models", "rxnfp-bert"),
     "models must be a list of names, got the string 'rxnfp-bert'; write ['rxnfp-bert'] for one"),
    (lambda: checks.check_list("seeds", [0, 0, 1], what="seeds"),
     "seeds must be distinct seeds: 0 appears 2 times in [0, 0, 1]"),
    (lambda: checks.check_list("seeds", [], what="seeds"), "seeds is empty: give at least one of the seeds"),
    (lambda: checks.check_list("seeds", 5, what="seeds"), "seeds must be a list of seeds, got 5 (int)"),
    (lambda: checks.check_list("tasks", {"snli": 1}), "tasks must be a list of names, got a mapping {'snli': 1}"),
])
def test_a_bad_argument_is_named_with_its_value_and_what_is_allowed(call, message):
    with pytest.raises(ParameterError) as raised:
        call()
    assert str(raised.value) == message


def test_good_arguments_come_back_as_numbers_and_lists():
    import numpy as np

    assert checks.check_number("batch_size", 32.0, integer=True, minimum=1) == 32
    assert type(checks.check_number("batch_size", np.int64(8), integer=True, minimum=1)) is int
    assert checks.check_number("power", 0.8, above=0, below=1) == 0.8
    assert checks.check_number("rate", 1, minimum=0, maximum=1) == 1.0
    assert checks.check_list("seeds", (2, 0, 1)) == [2, 0, 1]
    assert checks.check_list("seeds", [], allow_empty=True) == []
    assert checks.check_list("models", (name for name in ["a", "b"])) == ["a", "b"]


@pytest.mark.parametrize("notebook, name, typed, said", [
    ("rq3", "epochs", "{snli: 3, sst2: -2}", "-2.0 is below the smallest allowed value, 0"),
    ("rq3", "learning_rate", 0, "0.0 is not above 0"),
    ("rq3", "learning_rate", "nan", "'nan' is not a finite number"),
    ("rq3", "learning_rate", {"snli": float("inf")}, "inf is not a finite number"),
    ("rq1", "mask_rate", 0, "0.0 is not above 0"),
    ("rq3", "seeds", "0,0,1", "0 appears 2 times; give each once"),
    ("rq3", "seeds", "{snli: [0, 1, 1]}", "1 appears 2 times; give each once"),
    ("rq3", "duplications", "baseline,copy last,copy last", "'copy last' appears 2 times; give each once"),
    ("rq1", "models", ["antiberty", "antiberty"], "'antiberty' appears 2 times; give each once"),
    ("glance", "results_paths", "a.jsonl,a.jsonl", "'a.jsonl' appears 2 times; give each once"),
])
def test_values_a_study_cannot_use_are_refused_with_their_reason(notebook, name, typed, said):
    spec = {name: params.NOTEBOOK_PARAMETERS[notebook][name]}
    with pytest.raises(ParameterError) as error:
        params.notebook_parameters(spec, {name: typed}, show=False)
    assert str(error.value).startswith(f"1 parameter cannot be used:\n  {name} = {typed!r}: {said}. "
                                       f"Forms that work: ")


@pytest.mark.parametrize("typed", [0, "{snli: 0}", {"uspto50k": {"rxnfp-bert": 0}}])
def test_zero_steps_are_refused(typed):
    spec = {"max_steps": params.NOTEBOOK_PARAMETERS["rq3"]["max_steps"]}
    with pytest.raises(ParameterError) as error:
        params.notebook_parameters(spec, {"max_steps": typed}, show=False)
    assert str(error.value) == (f"1 parameter cannot be used:\n  max_steps = {typed!r}: 0 steps would "
                                f"save an untrained run: give -1 (train for the epochs) or a "
                                f"number of steps >= 1")
    assert params.notebook_parameters(spec, {"max_steps": "{snli: -1, sst2: 2}"}, show=False) == {
        "max_steps": {"snli": -1, "sst2": 2}}


def test_configurations_named_as_one_string_are_refused_not_spelled_out(zoo_env):
    with pytest.raises(ParameterError) as error:
        duplicate.check_configurations(["rxnmapper-albert"], "copy first 3", strict=True)
    assert str(error.value) == ("duplications must be a list of configuration names, got the string "
                                "'copy first 3'; write ['copy first 3'] for one")
    with pytest.raises(ParameterError, match="duplications must be distinct configuration names: "
                                             "'baseline' appears 2 times"):
        duplicate.check_configurations(["rxnmapper-albert"], ["baseline", "baseline"])
    with pytest.raises(ParameterError, match="models must be a list of models, got the string"):
        duplicate.check_configurations("rxnmapper-albert", ["baseline"])


def test_an_order_typed_as_a_string_may_repeat_blocks():
    spec = {"duplications": params.NOTEBOOK_PARAMETERS["rq1"]["duplications"]}
    assert params.notebook_parameters(spec, {"duplications": {"x": "0,0,1,2"}}, show=False) == {
        "duplications": {"x": [0, 0, 1, 2]}}


def test_zero_epochs_pass_the_notebook_check_for_hyperparameters_to_judge_with_max_steps():
    from dupbert.training.finetuning import HyperParameters

    spec = {name: params.NOTEBOOK_PARAMETERS["rq3"][name] for name in ("epochs", "max_steps")}
    assert params.notebook_parameters(spec, {"epochs": 0, "max_steps": 100}, show=False) == {
        "epochs": 0.0, "max_steps": 100}
    assert HyperParameters.for_task("classification", epochs=0, max_steps=100).epochs == 0.0
    with pytest.raises(ParameterError, match=r"^epochs must be a number > 0, got 0 \(max_steps is -1"):
        HyperParameters.for_task("classification", epochs=0)


def test_plain_values_name_seeds_and_models_as_they_were_written():
    import numpy as np

    assert [repr(checks.plain_value(v)) for v in (np.int64(2), np.float64(2.0), 2.0, 2.5,
                                                   np.str_("copy last"), "m", None)] == [
        "2", "2", "2", "2.5", "'copy last'", "'m'", "None"]


def test_a_seed_too_large_for_set_seed_fails_in_the_parameters_cell():
    """5000000000 once passed the parameters cell and failed a cell later, in the sweep."""
    from dupbert.study.params import notebook_parameters

    values = _parameters_cell("rq3")
    with pytest.raises(ParameterError, match=r"seeds = \[5000000000\]: 5000000000 is above the "
                                             r"largest allowed value, 4294967295\. Forms that work"):
        notebook_parameters("rq3", dict(values, seeds=[5000000000]))
    assert notebook_parameters("rq3", dict(values, seeds=[2**32 - 1]))["seeds"] == [2**32 - 1]


def test_every_kind_is_one_entry_with_its_reader_forms_and_option():
    """A kind of parameter is declared in one place (dupbert.study.forms.KINDS): every declared
    parameter's kind is there, and its option keywords come from it."""
    from dupbert.study import forms

    kinds = {p.kind for spec in params.NOTEBOOK_PARAMETERS.values() for p in spec.values()}
    assert kinds <= set(forms.KINDS)
    assert forms.option_keywords(params.NOTEBOOK_PARAMETERS["rq3"]["seeds"]) == dict(
        action="append", type=int)
    assert forms.option_keywords(params.NOTEBOOK_PARAMETERS["rq3"]["group_by_length"]) == dict(
        action="store_true")
    assert forms.option_keywords(params.NOTEBOOK_PARAMETERS["rq3"]["learning_rate"]) == dict(
        type=float)
    assert forms.forms("seeds", params.NOTEBOOK_PARAMETERS["rq3"]["seeds"]).startswith(
        "-p seeds 0,1,2; ")
