"""Pairs files and both-order aggregates."""

from __future__ import annotations

import json

import pytest

from evalcore.judging import Judgment, combine_orders, pair_outcomes, read_pairs


def test_llmbar_file_reads(llmbar):
    pairs = read_pairs(llmbar)
    assert len(pairs) == 100
    assert pairs[7].pair_id == 7 and pairs[7].label in (1, 2) and pairs[7].question


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"input": "q", "output_1": "a"', "is not valid JSON"),
        ('{"input": "q", "output_1": "a", "output_2": "b", "label": 1}\n{"input": "q", oops}\n', "pair 1 (line 2) is not valid JSON"),
        ('[{"input": "q", "output_1": "a", "output_2": "b", "label": 1}, {"input": "q", "output_1": "a", "label": 2}]',
         "pair 1: missing field 'output_2'"),
        ('[{"input": "q", "output_1": "a", "output_2": "b", "label": 3}]', "pair 0: label 3 is not 1 or 2"),
        ('[{"input": "q", "output_1": "a", "output_2": "b", "label": true}]', "pair 0: label True is not 1 or 2"),
        ('[{"input": "q", "output_1": "  ", "output_2": "b", "label": 1}]', "pair 0: field 'output_1' is empty"),
        ('[{"input": "q", "output_1": 5, "output_2": "b", "label": 1}]', "pair 0: field 'output_1' must be a string"),
        ('[{"input": "q", "output_1": "a", "output_2": "b"}]', "pair 0: missing field 'label'"),
        ("[]", "holds no pairs"),
        ("[3]", "pair 0: expected an object"),
    ],
)
def test_bad_pairs_files_name_the_item(tmp_path, text, message):
    path = tmp_path / "pairs.json"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        read_pairs(path)
    assert message in str(info.value)


def judgment(pair_id, order, p=None, winner=None, status="ok"):
    return Judgment(pair_id=pair_id, order=order, prompt_sha256="x", status=status, p_first=p, winner=winner)


def test_swap_average_both_agree_and_single_orders():
    outcome = combine_orders(judgment(0, "ab", p=0.9), judgment(0, "ba", p=0.6))
    # ab: answer 1 shown first, P=0.9; ba: answer 1 shown second, P(answer 1) = 1 - 0.6
    assert outcome.score_ab == 0.9 and outcome.score_ba == pytest.approx(0.4)
    assert outcome.swap_average == pytest.approx((0.9 + 0.4) / 2)
    assert (outcome.winner_ab, outcome.winner_ba, outcome.winner_swap, outcome.winner_agree) == (1, 2, 1, 0)
    assert outcome.first_ab and outcome.first_ba and not outcome.consistent
    agree = combine_orders(judgment(1, "ab", winner="B"), judgment(1, "ba", winner="A"))
    assert (agree.swap_average, agree.winner_agree, agree.consistent) == (0.0, 2, True)
    tie = combine_orders(judgment(2, "ab", winner="A"), judgment(2, "ba", winner="A"))
    assert (tie.swap_average, tie.winner_swap, tie.winner_agree) == (0.5, 0, 0)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.7, 0.8382436835325021, 1 / 3, 0.123456789])
def test_equal_first_scores_give_exactly_one_half(p):
    assert combine_orders(judgment(0, "ab", p=p), judgment(0, "ba", p=p)).swap_average == 0.5


def test_a_failed_judgment_is_not_a_tie():
    judgments = [judgment(0, "ab", p=0.7), judgment(0, "ba", status="failed"), judgment(1, "ab", p=0.2),
                 judgment(1, "ba", p=0.4)]
    outcomes, failed = pair_outcomes(judgments)
    assert failed == [0] and [o.pair_id for o in outcomes] == [1]
    with pytest.raises(ValueError, match="pair 3: judged in order"):
        pair_outcomes([judgment(3, "ab", p=0.5)])


def test_judgment_round_trips_through_json():
    j = Judgment(pair_id=4, order="ba", prompt_sha256="ab" * 32, status="ok", verdict="[[A]]", winner="A", raw="[[A]]")
    assert Judgment.from_dict(json.loads(json.dumps(j.as_dict()))) == j
