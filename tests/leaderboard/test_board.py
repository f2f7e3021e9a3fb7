"""The benchmark leaderboard: intervals, normalised scores, filters, visibility, protocol and sample
pages, and the paired comparison checked against evalcore.stats directly."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from evalcore.stats import best_of_k_inflation, paired_bootstrap_difference
from leaderboard.models import EvaluationRun, Score, Submission
from leaderboard.runs.selectors import COMPARE_ROUNDS, COMPARE_SEED
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db
Z = 1.959963984540054


def midp(x: int, n: int) -> tuple[float, float]:
    """Lancaster's mid-p 95% bounds for x of n, solved here from scipy's binomial (not evalcore's code)."""
    from scipy.optimize import brentq
    from scipy.stats import binom

    low = 0.0 if x == 0 else brentq(lambda p: binom.sf(x, n, p) + binom.pmf(x, n, p) / 2 - 0.025, 1e-12, 1 - 1e-12)
    high = 1.0 if x == n else brentq(lambda p: binom.cdf(x - 1, n, p) + binom.pmf(x, n, p) / 2 - 0.025, 1e-12, 1 - 1e-12)
    return low, high


def mover(values, lows, highs):
    """The MOVER interval of an equally weighted mean, from the parts' intervals (Zou & Donner 2008)."""
    k = len(values)
    mean = sum(values) / k
    down = math.sqrt(sum((v - lo) ** 2 for v, lo in zip(values, lows))) / k
    up = math.sqrt(sum((hi - v) ** 2 for v, hi in zip(values, highs))) / k
    return mean, max(0.0, mean - down), min(1.0, mean + up)


def rows_of(html: str) -> list[int]:
    """Primary keys of the board's rows, in order (the page names each by its opaque public id)."""
    public_ids = re.findall(r'<tr data-submission="([A-Za-z0-9_-]{22})"', html)
    by_public_id = dict(Submission.objects.filter(public_id__in=public_ids).values_list("public_id", "pk"))
    return [by_public_id[x] for x in public_ids]


def row_html(html: str, submission_id: int) -> str:
    public_id = Submission.objects.get(pk=submission_id).public_id
    match = re.search(rf'<tr data-submission="{re.escape(public_id)}".*?</tr>', html, re.S)
    assert match, f"no row for submission {submission_id}"
    return match.group(0)


def score(sub, task, metric):
    return Score.objects.get(run__submission=sub, run__task=task, metric=metric)


@pytest.fixture
def board(db):
    alice, bob = bd.user("alice@example.org"), bd.user("bob@example.org")
    strong = bd.entry(alice, "acme/strong-7b", gsm8k=bd.pattern(40, 30), parameters=7_000_000_000,
                      mmlu={"anatomy": bd.pattern(20, 15), "astronomy": bd.pattern(30, 21)})  # fmt: skip
    weak = bd.entry(bob, "bob/weak-chat", gsm8k=bd.pattern(40, 8, offset=3), model_type="chat",
                    mmlu={"anatomy": bd.pattern(20, 4), "astronomy": bd.pattern(30, 6)}, no_answer=(1, 2, 5))  # fmt: skip
    only_gsm = bd.entry(bob, "bob/only-gsm8k", gsm8k=bd.pattern(40, 20), parameters=1_500_000_000)
    hidden = bd.entry(bob, "bob/hidden-one", gsm8k=bd.pattern(40, 39), review="hidden")
    private = bd.entry(alice, "acme/private-variant", gsm8k=bd.pattern(40, 35), private=True)
    flagged = bd.entry(bob, "bob/flagged", gsm8k=bd.pattern(40, 33), review="flagged")
    rejected = bd.entry(bob, "bob/rejected", gsm8k=bd.pattern(40, 38), review="rejected")
    running = bd.submission(bob, "bob/running", status="RUNNING")
    bd.arena_snapshot({"acme/strong-7b": (1100.0, 1070.0, 1130.0), "someone/else": (1000.0, 980.0, 1020.0)})
    return {"alice": alice, "bob": bob, "strong": strong, "weak": weak, "only_gsm": only_gsm, "hidden": hidden,
            "private": private, "flagged": flagged, "rejected": rejected, "running": running}  # fmt: skip


def test_default_view_rows_intervals_and_average(client, board, django_assert_max_num_queries):
    with django_assert_max_num_queries(15):  # 12, plus contamination scans: in the fingerprint (read twice) and the clean subsets
        response = client.get("/leaderboard/")
    assert response.status_code == 200
    html = response.content.decode()
    shown = rows_of(html)
    assert set(shown) == {board["strong"].pk, board["weak"].pk, board["only_gsm"].pk}
    strong = row_html(html, board["strong"].pk)
    gsm = score(board["strong"], "gsm8k", "exact_match,strict-match")
    assert (gsm.ci_low, gsm.ci_high) == pytest.approx(midp(30, 40), abs=1e-4) and gsm.interval == "mid-p"
    assert f"{100 * gsm.value:.1f}" in strong and f"{100 * gsm.ci_low:.1f}–{100 * gsm.ci_high:.1f}" in strong
    assert "n=40" in strong  # the documents beside the interval
    # MMLU: the micro average of its subjects (15 of 20 and 21 of 30), pooled: the mid-p interval of 36 of 50.
    mmlu = 36 / 50
    mmlu_low, mmlu_high = midp(36, 50)
    assert f"{100 * mmlu:.1f}" in strong and f"{100 * mmlu_low:.1f}–{100 * mmlu_high:.1f}" in strong
    assert "n=50" in strong
    # The average: MOVER from the two benchmarks' intervals.
    avg, avg_low, avg_high = mover([gsm.value, mmlu], [gsm.ci_low, mmlu_low], [gsm.ci_high, mmlu_high])
    assert f"{100 * avg:.1f}" in strong
    assert f"{100 * avg_low:.1f}–{100 * avg_high:.1f} <span" in strong and "n=90" in strong
    assert "1100" in strong and "1070–1130" in strong  # arena rating matched by catalogue model
    assert "–" in row_html(html, board["only_gsm"].pk)  # no MMLU: no average
    assert "7B" in strong and "Pretrained" in strong and "bfloat16" in strong
    # each score links to its protocol page
    run = EvaluationRun.objects.get(submission=board["strong"], task="gsm8k")
    assert f'href="/leaderboard/runs/{run.pk}/"' in strong
    assert shown.index(board["strong"].pk) < shown.index(board["weak"].pk)  # default: best average first


def test_normalised_scores_with_the_raw_score_beside(client, board):
    html = client.get("/leaderboard/?scale=normalised").content.decode()
    strong = row_html(html, board["strong"].pk)
    parts = [score(board["strong"], f"mmlu_{s}", "acc") for s in ("anatomy", "astronomy")]
    total = sum(p.n for p in parts)
    norm = sum((p.value - 0.25) / 0.75 * 100 * p.n for p in parts) / total
    raw = sum(p.value * p.n for p in parts) / total
    assert f"{norm:.1f}" in strong and f"raw {100 * raw:.1f}%" in strong
    gsm = score(board["strong"], "gsm8k", "exact_match,strict-match")
    assert f"{100 * gsm.value:.1f}" in strong  # baseline 0: normalised = percent
    assert 'id="scale-raw" href="?scale=' not in html and 'id="scale-raw"' in html  # one click back to raw
    weak = row_html(html, board["weak"].pk)
    weak_parts = [score(board["weak"], f"mmlu_{s}", "acc") for s in ("anatomy", "astronomy")]
    weak_norm = sum((p.value - 0.25) / 0.75 * 100 * p.n for p in weak_parts) / total
    assert weak_norm < 0  # 10 of 50: below guessing, which shows as 0, its interval mapped and cut the same way
    low, high = midp(10, 50)
    assert ">0.0</a>" in weak and f"0.0–{(high - 0.25) / 0.75 * 100:.1f}" in weak and low < 0.25


def test_sorting_filters_and_search(client, board):
    by_name = rows_of(client.get("/leaderboard/?sort=model").content.decode())
    names = {board[k].pk: board[k].model_name for k in ("strong", "weak", "only_gsm")}
    assert [names[i] for i in by_name] == sorted(names.values())
    by_gsm = rows_of(client.get("/leaderboard/?sort=-score:gsm8k").content.decode())
    assert by_gsm == [board["strong"].pk, board["only_gsm"].pk, board["weak"].pk]
    assert rows_of(client.get("/leaderboard/?sort=score:gsm8k").content.decode())[0] == board["weak"].pk
    assert rows_of(client.get("/leaderboard/?type=chat").content.decode()) == [board["weak"].pk]
    assert rows_of(client.get("/leaderboard/?size=3to8b").content.decode()) == [board["strong"].pk]
    assert rows_of(client.get("/leaderboard/?size=1to3b").content.decode()) == [board["only_gsm"].pk]
    assert rows_of(client.get("/leaderboard/?q=WEAK").content.decode()) == [board["weak"].pk]
    assert 'id="board-empty"' in client.get("/leaderboard/?q=nothing-like-this").content.decode()


@pytest.mark.parametrize("query", [
    "sort=bogus", "sort=score:nope", "type=robot", "size=huge", "scale=log", "show=all", "colour=red",
    "q=" + "x" * 101, "sort=model&sort=date", "sort=-score:gsm8k;drop",
])  # fmt: skip
def test_bad_parameters_are_a_400_with_a_message(client, board, query):
    response = client.get(f"/leaderboard/?{query}")
    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()


def test_hidden_behind_a_filter_private_only_for_the_owner(client, board):
    default = rows_of(client.get("/leaderboard/").content.decode())
    assert board["hidden"].pk not in default and board["private"].pk not in default
    html = client.get("/leaderboard/?show=hidden").content.decode()
    with_hidden = rows_of(html)
    assert board["hidden"].pk in with_hidden
    assert "tag-hidden" in row_html(html, board["hidden"].pk)
    for never in ("flagged", "rejected", "private", "running"):
        assert board[never].pk not in with_hidden
    client.force_login(board["alice"])
    html = client.get("/leaderboard/").content.decode()
    assert board["private"].pk in rows_of(html) and "tag-private" in row_html(html, board["private"].pk)
    client.force_login(board["bob"])
    mine = rows_of(client.get("/leaderboard/").content.decode())
    assert (
        board["private"].pk not in mine and board["flagged"].pk in mine and board["rejected"].pk not in mine
    )


def test_best_of_k_badge_for_a_family_with_many_private_variants(client, board, settings):
    settings.LEADERBOARD_PRIVATE_VARIANTS_LIMIT = 3
    carol = bd.user("carol@example.org")
    for i in range(4):
        bd.entry(carol, f"carol/variant-{i}", gsm8k=bd.pattern(40, 20 + i), private=True, model_type="fine-tuned",
                 base_model="Acme/Base-1B", review="rejected" if i == 0 else "none")  # fmt: skip
    best = bd.entry(carol, "carol/published", gsm8k=bd.pattern(40, 30), model_type="fine-tuned",
                    base_model="acme/base-1b")  # fmt: skip
    other = bd.entry(
        carol, "carol/unrelated", gsm8k=bd.pattern(40, 30), model_type="fine-tuned", base_model="x/y"
    )
    html = client.get("/leaderboard/").content.decode()
    row = row_html(html, best.pk)
    gsm = score(best, "gsm8k", "exact_match,strict-match")
    inflation = (
        100 * best_of_k_inflation(5, se=(gsm.ci_high - gsm.ci_low) / (2 * Z)).expected_inflation
    )  # one benchmark: the average's spread, half its interval's width / 1.96
    assert "best of 5 variants" in row and f"+{inflation:.1f} expected" in row
    assert "best of" not in row_html(html, other.pk)  # another family
    client.force_login(carol)
    mine = rows_of(client.get("/leaderboard/").content.decode())
    assert len([pk for pk in mine if pk not in rows_of(html)]) == 3  # her private variants; not the rejected one


def test_charts_built_on_the_server(client, board):
    html = client.get("/leaderboard/").content.decode()
    data = json.loads(
        re.search(r'<script id="board-figures" type="application/json">(.*?)</script>', html, re.S).group(1)
    )
    assert set(data) == {"scores", "arena"}
    traces = {t["name"]: t for t in data["scores"]["data"]}
    assert set(traces) == {"MMLU", "GSM8K"}
    gsm = score(board["strong"], "gsm8k", "exact_match,strict-match")
    i = traces["GSM8K"]["x"].index("acme/strong-7b")
    assert traces["GSM8K"]["error_y"]["array"][i] == pytest.approx(100 * (gsm.ci_high - gsm.value))
    assert data["arena"]["data"][0]["x"] == [1100.0]
    assert re.search(r'<script src="/leaderboard/plotly-[^"]+\.min\.js">', html)


def test_protocol_page(client, board):
    run = EvaluationRun.objects.get(submission=board["strong"], task="gsm8k")
    html = client.get(f"/leaderboard/runs/{run.pk}/").content.decode()
    for text in (run.config_sha256, "first_n", "[0, 1, 2, 3, 4]", "max_gen_toks=256", "abc123", "evalcore 0.1.0",
                 board["strong"].weight_sha256, "Question: What is 0?", "exact_match,strict-match", "on the board"):  # fmt: skip
        assert text in html, text
    html = client.get(f"/leaderboard/runs/{run.pk}/?doc=7").content.decode()
    assert "Exact prompt of document 7" in html and "What is 7?" in html
    assert client.get(f"/leaderboard/runs/{run.pk}/?doc=-1").status_code == 400
    assert client.get(f"/leaderboard/runs/{run.pk}/?doc=1&evil=1").status_code == 400
    mmlu = EvaluationRun.objects.get(submission=board["strong"], task="mmlu_anatomy")
    assert "mmlu_astronomy" in client.get(f"/leaderboard/runs/{mmlu.pk}/").content.decode()  # same benchmark
    private_run = EvaluationRun.objects.get(submission=board["private"])
    assert client.get(f"/leaderboard/runs/{private_run.pk}/").status_code == 404
    hidden_run = EvaluationRun.objects.get(submission=board["hidden"])
    assert client.get(f"/leaderboard/runs/{hidden_run.pk}/").status_code == 200
    client.force_login(board["alice"])
    assert client.get(f"/leaderboard/runs/{private_run.pk}/").status_code == 200


def test_sample_browser_filters_and_pages(client, board, django_assert_max_num_queries):
    run = EvaluationRun.objects.get(submission=board["weak"], task="gsm8k")
    with django_assert_max_num_queries(8):
        html = client.get(f"/leaderboard/runs/{run.pk}/samples/").content.decode()
    assert "40 documents" in html and len(re.findall(r'data-doc="', html)) == 20 and 'id="next-page"' in html
    page2 = client.get(f"/leaderboard/runs/{run.pk}/samples/?page=2").content.decode()
    assert re.findall(r'data-doc="(\d+)"', page2)[0] == "20"
    wrong = sum(
        1
        for p in run.samples.values_list("payload", flat=True)
        if p["metrics"]["exact_match,strict-match"] == 0
    )
    html = client.get(f"/leaderboard/runs/{run.pk}/samples/?only=wrong").content.decode()
    assert f"{wrong} documents" in html
    html = client.get(f"/leaderboard/runs/{run.pk}/samples/?only=no_answer").content.decode()
    assert re.findall(r'data-doc="(\d+)"', html) == ["1", "2", "5"] and "no answer extracted" in html
    mc = EvaluationRun.objects.get(submission=board["weak"], task="mmlu_anatomy")
    html = client.get(f"/leaderboard/runs/{mc.pk}/samples/?only=wrong").content.decode()
    assert "16 documents" in html and "<code>" in html  # 4 of 20 right; the predicted choice shown
    assert "0 documents" in client.get(f"/leaderboard/runs/{mc.pk}/samples/?only=no_answer").content.decode()
    for bad in ("page=0", "page=abc", "page=99", "only=everything", "only=wrong&only=wrong", "x=1"):
        assert client.get(f"/leaderboard/runs/{run.pk}/samples/?{bad}").status_code == 400, bad


def test_paired_comparison_matches_evalcore(client, board):
    a, b = board["strong"], board["weak"]
    response = client.get(f"/leaderboard/compare/?a={a.public_id}&b={b.public_id}&task=gsm8k")
    assert response.status_code == 200
    html = response.content.decode()
    metric = "exact_match,strict-match"

    def values(sub):
        run = EvaluationRun.objects.get(submission=sub, task="gsm8k")
        return {d: p["metrics"][metric] for d, p in run.samples.values_list("doc_id", "payload")}

    va, vb = values(a), values(b)
    docs = sorted(va)
    expected = paired_bootstrap_difference(
        np.array([va[d] for d in docs]), np.array([vb[d] for d in docs]),
        rng=np.random.default_rng(COMPARE_SEED), rounds=COMPARE_ROUNDS,
    )  # fmt: skip
    assert f'id="difference">{expected.difference:.4f}' in html
    assert f'id="interval">{expected.ci_low:.4f} – {expected.ci_high:.4f}' in html
    assert expected.ci_low > 0 and "distinguishable from zero" in html and 'class="verdict distinct"' in html
    # a whole benchmark: MMLU subjects pooled, documents paired within each subject
    html = client.get(f"/leaderboard/compare/?a={a.public_id}&b={b.public_id}&task=mmlu").content.decode()
    assert 'id="shared">50' in html
    # two close models: not distinguishable
    twin = bd.entry(board["bob"], "bob/twin", gsm8k=bd.pattern(40, 21))
    html = client.get(
        f"/leaderboard/compare/?a={board['only_gsm'].public_id}&b={twin.public_id}&task=gsm8k"
    ).content.decode()
    assert 'class="verdict tie"' in html


A, B = "A" * 22, "B" * 22  # public ids that name nothing


@pytest.mark.parametrize("query", [
    f"a={A}&b={A}&task=gsm8k", f"a=x&b={B}&task=gsm8k", f"a={'A' * 23}&b=x&task=gsm8k", f"a={A}&b={B}&task=gsm8k'--",
    f"a={A}&b={B}", f"a={A}&b={B}&task=gsm8k&z=1", f"a={A}&a={A}&b={B}&task=gsm8k", f"a={A}&b=١&task=gsm8k",
])  # fmt: skip
def test_comparison_bad_parameters(client, board, query):
    response = client.get(f"/leaderboard/compare/?{query}")
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()


def test_comparison_form_prefilled_from_a_protocol_page(client, board):
    response = client.get(f"/leaderboard/compare/?a={board['weak'].public_id}&task=gsm8k")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<option value="{board["weak"].public_id}" selected>' in html and 'value="gsm8k"' in html
    assert 'id="compare-result"' not in html
    assert f'<option value="{board["private"].public_id}"' not in html  # only what the viewer may see
    # the protocol page's link, which earlier versions wrote with the row number, redirects
    old = client.get(f"/leaderboard/compare/?a={board['weak'].pk}&task=gsm8k")
    assert old.status_code == 301 and old["Location"] == f"/leaderboard/compare/?a={board['weak'].public_id}&task=gsm8k"


def test_comparison_refuses_what_the_viewer_cannot_see(client, board):
    response = client.get(f"/leaderboard/compare/?a={board['strong'].public_id}&b={board['private'].public_id}&task=gsm8k")
    assert response.status_code == 400 and "no visible finished run" in response.content.decode()
    # by an earlier row number: the visible one is redirected, the private one is not (nor named)
    old = client.get(f"/leaderboard/compare/?a={board['strong'].pk}&b={board['private'].pk}&task=gsm8k")
    assert old.status_code == 301 and board["private"].public_id not in old["Location"]
    assert client.get(old["Location"]).status_code == 400


def test_rendered_once_then_follows_every_change(client, board, django_assert_max_num_queries):
    client.get("/leaderboard/")
    with django_assert_max_num_queries(5):  # fingerprint (3), the arena snapshot id, the judges: nothing else
        html = client.get("/leaderboard/").content.decode()
    assert board["weak"].pk in rows_of(html)
    board["weak"].review_state = "hidden"
    board["weak"].save(update_fields=["review_state"])
    assert board["weak"].pk not in rows_of(client.get("/leaderboard/").content.decode())
    gsm = score(board["strong"], "gsm8k", "exact_match,strict-match")
    gsm.value, gsm.ci_low, gsm.ci_high = 0.123, 0.05, 0.2
    gsm.save()  # a re-score
    assert "12.3" in row_html(client.get("/leaderboard/").content.decode(), board["strong"].pk)
    board["private"].private = False
    board["private"].save(update_fields=["private"])  # published
    assert board["private"].pk in rows_of(client.get("/leaderboard/").content.decode())
