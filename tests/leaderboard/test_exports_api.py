"""Leaderboard downloads (streamed, round-tripping) and the REST API (paging, filters, schema, 400s)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.http import StreamingHttpResponse

from leaderboard.models import EvaluationRun, SampleRecord, Score
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db


def body(response) -> str:
    assert isinstance(response, StreamingHttpResponse), type(response)
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def data(db):
    alice, bob = bd.user("alice@example.org"), bd.user("bob@example.org")
    a = bd.entry(alice, "acme/a", gsm8k=bd.pattern(30, 20), mmlu={"anatomy": bd.pattern(12, 8)})
    b = bd.entry(
        bob, "bob/b", gsm8k=bd.pattern(30, 10), mmlu={"anatomy": bd.pattern(12, 5)}, model_type="chat"
    )
    private = bd.entry(alice, "acme/private", gsm8k=bd.pattern(30, 25), private=True)
    hidden = bd.entry(bob, "bob/hidden", gsm8k=bd.pattern(30, 25), review="hidden")
    return {"alice": alice, "bob": bob, "a": a, "b": b, "private": private, "hidden": hidden}


def test_table_csv_round_trips_with_intervals_and_protocol_hashes(client, data):
    response = client.get("/leaderboard/scores.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(body(response))))
    assert [r["model"] for r in rows] == [
        "acme/a",
        "bob/b",
    ]  # best average first, private and hidden left out
    gsm = Score.objects.get(run__submission=data["a"], run__task="gsm8k", metric="exact_match,strict-match")
    row = rows[0]
    assert float(row["gsm8k"]) == gsm.value and float(row["gsm8k_ci_low"]) == gsm.ci_low
    assert float(row["gsm8k_ci_high"]) == gsm.ci_high and float(row["gsm8k_stderr"]) == gsm.stderr
    assert int(row["gsm8k_n"]) == 30 and row["gsm8k_protocol_sha256"] == gsm.run.config_sha256
    assert row["mmlu_protocol_sha256"] and row["average_ci_low"] and float(row["average"]) > 0
    mmlu = Score.objects.get(run__submission=data["a"], run__task="mmlu_anatomy")
    assert float(row["mmlu_normalised"]) == pytest.approx((mmlu.value - 0.25) / 0.75 * 100)
    hidden = list(csv.DictReader(io.StringIO(body(client.get("/leaderboard/scores.csv?show=hidden")))))
    assert "bob/hidden" in [r["model"] for r in hidden]


def test_table_json_matches_the_csv(client, data):
    doc = json.loads(body(client.get("/leaderboard/scores.json?type=chat")))
    assert [r["model"] for r in doc["rows"]] == ["bob/b"] and doc["filters"]["type"] == "chat"
    assert [b["key"] for b in doc["benchmarks"]] == ["mmlu", "gsm8k"]
    assert (
        doc["benchmarks"][0]["baseline"] == 0.25
        and doc["benchmarks"][1]["metric"] == "exact_match,strict-match"
    )
    cell = doc["rows"][0]["scores"]["gsm8k"]
    gsm = Score.objects.get(run__submission=data["b"], run__task="gsm8k", metric="exact_match,strict-match")
    assert (cell["value"], cell["ci_low"], cell["ci_high"], cell["n"]) == (
        gsm.value,
        gsm.ci_low,
        gsm.ci_high,
        gsm.n,
    )
    assert cell["run_ids"] == [gsm.run_id]


def test_all_scores_streamed_and_visible_only(client, data):
    rows = list(csv.DictReader(io.StringIO(body(client.get("/leaderboard/all-scores.csv")))))
    visible = Score.objects.exclude(run__submission=data["private"])
    assert len(rows) == visible.count()
    assert {r["model"] for r in rows} == {"acme/a", "bob/b", "bob/hidden"}
    by_id = {(int(r["run_id"]), r["metric"]): r for r in rows}
    for s in visible:
        assert float(by_id[(s.run_id, s.metric)]["value"]) == s.value
    records = json.loads(body(client.get("/leaderboard/all-scores.json")))
    assert len(records) == len(rows) and records[0]["benchmark"] in ("gsm8k", "mmlu")
    client.force_login(data["alice"])
    assert "acme/private" in body(client.get("/leaderboard/all-scores.csv"))


def test_samples_jsonl_is_the_engine_format(client, data):
    run = EvaluationRun.objects.get(submission=data["a"], task="gsm8k")
    response = client.get(f"/leaderboard/runs/{run.pk}/samples.jsonl")
    lines = [json.loads(line) for line in body(response).splitlines()]
    stored = dict(SampleRecord.objects.filter(run=run).values_list("doc_id", "payload"))
    assert [r["doc_id"] for r in lines] == sorted(stored) and all(r == stored[r["doc_id"]] for r in lines)
    private_run = EvaluationRun.objects.get(submission=data["private"])
    assert client.get(f"/leaderboard/runs/{private_run.pk}/samples.jsonl").status_code == 404


def test_samples_jsonl_rescores_with_the_engine(client, data, tmp_path):
    """What ``evalcore rescore`` reads: the metric recomputed from the download equals the stored one."""
    from evalcore.engine.metrics import mean_value

    run = EvaluationRun.objects.get(submission=data["a"], task="gsm8k")
    lines = [
        json.loads(line)
        for line in body(client.get(f"/leaderboard/runs/{run.pk}/samples.jsonl")).splitlines()
    ]
    recomputed = mean_value([r["metrics"]["exact_match,strict-match"] for r in lines])
    assert recomputed.value == Score.objects.get(run=run, metric="exact_match,strict-match").value


@pytest.mark.parametrize("url", [
    "/leaderboard/scores.csv?sort=drop", "/leaderboard/scores.json?x=1", "/leaderboard/all-scores.csv?limit=5",
    "/leaderboard/all-scores.json?a=1", "/leaderboard/scores.csv?type=a&type=b",
])  # fmt: skip
def test_hostile_download_parameters(client, data, url):
    response = client.get(url)
    assert response.status_code == 400 and "detail" in response.json()


def test_api_paging_and_filters(client, data):
    page = client.get("/api/scores/?limit=2").json()
    assert page["count"] == Score.objects.exclude(run__submission=data["private"]).count()
    assert len(page["results"]) == 2 and "offset=2" in page["next"]
    first = page["results"][0]
    assert {"value", "stderr", "ci_low", "ci_high", "n", "config_sha256", "benchmark"} <= set(first)
    gsm = client.get(f"/api/scores/?submission={data['b'].public_id}&metric=exact_match,strict-match").json()
    assert gsm["count"] == 1 and gsm["results"][0]["model"] == "bob/b"
    assert client.get("/api/scores/?benchmark=mmlu").json()["count"] == 2
    models = client.get("/api/submissions/").json()
    assert {m["model_name"] for m in models["results"]} == {"acme/a", "bob/b", "bob/hidden"}
    assert [m["model_name"] for m in client.get("/api/submissions/?type=chat").json()["results"]] == ["bob/b"]
    runs = client.get(f"/api/runs/?submission={data['a'].public_id}").json()
    assert {r["task"] for r in runs["results"]} == {"gsm8k", "mmlu_anatomy"}
    run_id = runs["results"][0]["id"]
    assert client.get(f"/api/runs/{run_id}/").json()["protocol"]["num_fewshot"] == 5
    samples = client.get(f"/api/runs/{run_id}/samples/?limit=5&offset=5").json()
    assert [s["doc_id"] for s in samples["results"]] == [5, 6, 7, 8, 9]
    private_run = EvaluationRun.objects.get(submission=data["private"])
    assert client.get(f"/api/runs/{private_run.pk}/").status_code == 404
    assert client.get(f"/api/runs/{private_run.pk}/samples/").status_code == 404


@pytest.mark.parametrize("url", [
    "/api/scores/?limit=100000", "/api/scores/?offset=-1", "/api/scores/?limit=abc", "/api/scores/?evil=1",
    "/api/scores/?submission=abc", "/api/runs/?submission=" + "x" * 23, "/api/scores/?submission=1e3", "/api/scores/?task=gsm8k';--", "/api/runs/?task=a&task=b",
    "/api/submissions/?type=robot", "/api/runs/1/samples/?limit=201", "/api/runs/1/samples/?only=x",
])  # fmt: skip
def test_api_hostile_parameters(client, data, url):
    run = EvaluationRun.objects.filter(submission=data["a"]).first()
    response = client.get(url.replace("/runs/1/", f"/runs/{run.pk}/"))
    assert response.status_code == 400, response.content[:300]


def test_schema_lists_the_leaderboard_endpoints(client, data):
    schema = client.get("/api/schema/?format=json").json()
    for path in ("/api/submissions/", "/api/scores/", "/api/runs/", "/api/runs/{id}/", "/api/runs/{id}/samples/",
                 "/api/battles/"):  # fmt: skip
        assert path in schema["paths"], path
    params = {p["name"] for p in schema["paths"]["/api/scores/"]["get"]["parameters"]}
    assert {"submission", "task", "benchmark", "metric", "limit", "offset"} <= params


def test_samples_stream_under_asgi_in_chunks(data):
    import warnings

    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    sub = bd.submission(data["bob"], "bob/long-run")
    run = bd.add_run(sub, "gsm8k", [bd.gsm8k_record(i, i % 3 == 0) for i in range(1100)],
                     metrics=["exact_match,strict-match"])  # fmt: skip

    async def fetch(url):
        response = await AsyncClient().get(url)
        return response, [chunk async for chunk in response]

    with warnings.catch_warnings():
        # Django warns (and buffers the whole body) when it must serve a sync iterator under ASGI.
        warnings.filterwarnings("error", message="StreamingHttpResponse must consume")
        response, chunks = async_to_sync(fetch)(f"/leaderboard/runs/{run.pk}/samples.jsonl")
        assert response.status_code == 200 and len(chunks) >= 3
        assert len(b"".join(chunks).decode().splitlines()) == 1100
        response, chunks = async_to_sync(fetch)("/leaderboard/all-scores.csv")
        assert response.status_code == 200 and b"bob/long-run" in b"".join(chunks)


def test_free_text_cells_cannot_become_spreadsheet_formulas(client, db):
    """OWASP CSV injection: a base model named like a formula is written as text; numbers stay numbers."""
    owner = bd.user("mallory@example.org")
    bd.entry(owner, "mallory/m", gsm8k=bd.pattern(30, 20), model_type="fine-tuned",
             base_model='=HYPERLINK("http://evil.example","click")')  # fmt: skip
    text = body(client.get("/leaderboard/scores.csv"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["base_model"] for row in rows] == ['\'=HYPERLINK("http://evil.example","click")']
    assert "\n=HYPERLINK" not in text and ",=HYPERLINK" not in text
    numeric = [k for k in rows[0] if k.endswith("stderr") and rows[0][k]]
    assert numeric and all(float(rows[0][k]) >= 0 for k in numeric)
