"""SQuAD 2.0 EM/F1 against the official evaluation script's numbers."""

import gzip
import json
import re

import pytest

from dupbert.training.metrics import exact_match, normalize_answer, squad_v2, token_f1


@pytest.fixture(scope="module")
def squad_dev(shared_data_dir):
    with gzip.open(shared_data_dir / "squad2" / "dev-v2.0.reconstructed.json.gz", "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def oracle(shared_data_dir):
    folder = shared_data_dir / "squad2" / "oracle"
    with gzip.open(folder / "dev_predictions_a.json.gz", "rt") as f:
        predictions = json.load(f)
    return predictions, json.loads((folder / "dev_scores_a.official.json").read_text())


def test_reproduces_the_official_scores_exactly(squad_dev, oracle):
    predictions, official = oracle
    assert squad_v2(squad_dev, predictions) == official  # every key, every digit


def test_accepts_a_path(shared_data_dir, oracle):
    predictions, official = oracle
    path = shared_data_dir / "squad2" / "dev-v2.0.reconstructed.json.gz"
    assert squad_v2(path, predictions)["f1"] == official["f1"]


def test_all_empty_and_gold_baselines(squad_dev):
    ids = [qa["id"] for a in squad_dev["data"] for p in a["paragraphs"] for qa in p["qas"]]
    empty = squad_v2(squad_dev, {i: "" for i in ids})
    assert round(empty["f1"], 2) == 50.07 and empty["NoAns_f1"] == 100.0
    assert empty["HasAns_exact"] == 0.0 and (empty["HasAns_total"], empty["NoAns_total"]) == (5928, 5945)
    gold = {qa["id"]: (qa["answers"][0]["text"] if qa["answers"] else "")
            for a in squad_dev["data"] for p in a["paragraphs"] for qa in p["qas"]}
    assert squad_v2(squad_dev, gold)["exact"] == 100.0


def test_missing_and_unknown_ids_are_named(squad_dev, oracle):
    predictions, _ = oracle
    partial = dict(predictions)
    del partial["56ddde6b9a695914005b9628"]
    partial["not-a-question"] = "x"
    with pytest.raises(ValueError) as error:
        squad_v2(squad_dev, partial)
    message = str(error.value)
    assert "1 of 11873 questions have no prediction" in message
    assert "56ddde6b9a695914005b9628" in message and "not-a-question" in message


def test_normalisation_and_token_f1():
    assert normalize_answer("The  Norman-Conquest, of an England!") == "normanconquest of england"
    assert exact_match("the France", "france.") == 1
    assert token_f1("10th and 11th centuries", "in the 10th and 11th centuries") == pytest.approx(
        2 * (4 / 5) * 1 / (4 / 5 + 1))
    assert token_f1("", "") == 1.0 and token_f1("", "x") == 0.0 and token_f1("a b", "c") == 0.0


def _tiny_squad(questions):
    """Official-format SQuAD 2.0 JSON of one paragraph: [(id, [gold answers])]."""
    context = "Paris Rome Milan London Berlin"
    qas = [{"id": qid, "question": "?", "answers": [{"text": g, "answer_start": context.find(g)}
                                                      for g in gold]} for qid, gold in questions]
    return {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_best_thresholds_follow_the_official_search_step_by_step():
    from dupbert.training.metrics import best_thresholds

    data = _tiny_squad([("q1", ["Paris"]), ("q2", ["Rome"]), ("q3", []), ("q4", [])])
    predictions = {"q1": "Paris", "q2": "Milan", "q3": "London", "q4": "Berlin"}
    no_answer = {"q1": 0.1, "q2": 0.5, "q3": 0.2, "q4": 0.9}
    # start: all abstain = 2 of 4 right; +q1 (right) 3; +q3 (wrong answer) 2; +q2 (wrong) 2; +q4 1
    assert best_thresholds(data, predictions, no_answer) == {
        "best_exact": 75.0, "best_exact_thresh": 0.1, "best_f1": 75.0, "best_f1_thresh": 0.1}
    # everything likelier unanswerable than answerable: abstaining everywhere is best (threshold 0)
    far = {k: v + 10 for k, v in no_answer.items()}
    assert best_thresholds(data, {**predictions, "q1": "Rome"}, far)["best_f1"] == 50.0
    with pytest.raises(ValueError, match="no no-answer probability"):
        best_thresholds(data, predictions, {"q1": 0.0})


@pytest.mark.parametrize("dataset, predictions, message", [
    ({"data": []}, {}, "dataset holds no questions: there is nothing to score"),
    ({"data": [{"title": "t"}]}, {}, "article 0 ('t') lacks 'paragraphs' (official SQuAD JSON: "
     "data -> articles with 'paragraphs' -> paragraphs with 'qas' -> questions with 'id' and "
     "'answers')"),
    ({"data": [{"paragraphs": [{"context": "c"}]}]}, {}, "article 0, paragraph 0 lacks 'qas' "
     "(official SQuAD JSON: "),
    ({"data": [{"paragraphs": [{"qas": [{"id": "q1"}]}]}]}, {"q1": ""},
     "article 0, paragraph 0, question 0 lacks 'answers' (official SQuAD JSON: "),
    (_tiny_squad([("q1", ["Paris"])]), {"q1": None},
     "the prediction of 'q1' must be a string ('' for no answer), got None"),
    (_tiny_squad([("q1", ["Paris"])]), ["Paris"],
     "predictions must be a mapping {question id: answer text}, got list"),
])
def test_malformed_input_is_named(dataset, predictions, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        squad_v2(dataset, predictions)


def test_best_thresholds_refuse_a_probability_that_is_not_a_number():
    from dupbert.training.metrics import best_thresholds

    data = _tiny_squad([("q1", ["Paris"]), ("q2", [])])
    predictions = {"q1": "Paris", "q2": "Rome"}
    for bad in (float("nan"), None, "0.5"):  # NaN gave thresh nan and best 100
        with pytest.raises(ValueError, match="^" + re.escape(
                f"the no-answer probability of 'q1' must be a number (inf allowed), got {bad!r}")
                + "$"):
            best_thresholds(data, predictions, {"q1": bad, "q2": 0.5})
    # inf (no valid span: dupbert.training.qa's null odds) stays a number
    assert best_thresholds(data, predictions, {"q1": 0.0, "q2": float("inf")}) == {
        "best_exact": 100.0, "best_exact_thresh": 0.0, "best_f1": 100.0, "best_f1_thresh": 0.0}


def test_an_answer_that_is_not_a_string_is_named():
    with pytest.raises(TypeError, match=r"^an answer must be a string \('' for no answer\), got None$"):
        normalize_answer(None)
    with pytest.raises(TypeError, match=r"^an answer must be a string \('' for no answer\), got None$"):
        token_f1(None, "")  # was 1.0: None passed for the empty answer


def test_a_file_that_is_not_json_is_named(tmp_path):
    from dupbert.training.metrics import load_squad_json

    path = tmp_path / "dev.json"
    path.write_text('{"data": [\n  {oops}\n]}')
    with pytest.raises(ValueError, match="^" + re.escape(
            f"{path} is not JSON (Expecting property name enclosed in double quotes, line 2 "
            f"column 4)") + "$"):
        load_squad_json(path)
