"""An endpoint's address is staff's only (issue 32, leftover 2).

An arena model evaluated through its endpoint records the (credential-stripped) URL in each run's
protocol, and an unreachable or refusing endpoint names it in the failure reason and the skip reason.
It can name an internal host: every public surface (protocol page, submission page, /api/ runs, scores
and submissions, the board and its CSV/JSON exports, the samples, a failed judge run's reason) shows that an endpoint was used, its
backend, served model and decoding settings, and "(address withheld)" for where; staff see the URL.
Checked with an anonymous client (and a signed-in voter) on a protocol as the runner writes it.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from arena.models import LanguageModel
from common.urls import WITHHELD, addresses_withheld
from leaderboard.board import entries
from leaderboard.models import EvaluationRun, JudgeRun, Submission
from tests.leaderboard.board_data import add_run, gsm8k_record, mmlu_record, suite, user
from tests.leaderboard.judging_data import judge_setup

pytestmark = pytest.mark.django_db
HOST = "gpu-7.internal.example"
URL = f"https://{HOST}:8443/v1"
SERVED = "smol-served-name"


def endpoint_protocol(api: str) -> dict:
    """What leaderboard.evaluation.runner adds to an endpoint run's protocol."""
    return {
        "backend": "openai-chat", "url": URL, "served_model": SERVED, "api": api,
        "chat_template": "applied by the server (chat completions)", "api_key_env": "SMOL_KEY",
    }  # fmt: skip


@pytest.fixture
def evaluated(client):
    """A finished endpoint evaluation with a scored run and a skipped one, and a failed one."""
    staff = user("staff@example.org", staff=True)
    model = LanguageModel.objects.create(name="smol-endpoint", backend="openai", in_arena=True,
                                         model_args={"base_url": URL, "model": SERVED, "api_key_env": "SMOL_KEY"})  # fmt: skip
    spec = {"backend": "openai-chat", "args": model.model_args}
    common = dict(owner=staff, language_model=model, model_type="chat", licence="mit", source="endpoint",
                  precision="", endpoint=spec, apply_chat_template=True)  # fmt: skip
    sub = Submission.objects.create(model_name="smol-endpoint", status="FINISHED", finished_at=timezone.now(), **common)
    model_identity = {"backend": "openai-chat", "name": SERVED, "weights_sha256": "", "dtype": "unknown",
                      "batch_size": "1", "extra": {"base_url": URL}}  # fmt: skip
    run = add_run(sub, "gsm8k", [gsm8k_record(i, i % 2 == 0) for i in range(4)],
                  metrics=["exact_match,strict-match", "exact_match,flexible-extract"],
                  protocol={"endpoint": endpoint_protocol("chat/completions"), "model": model_identity})  # fmt: skip
    reason = f"log-likelihood task (multiple_choice) not scored: the endpoint gives no prompt log-probabilities on /completions (HTTP 404 from {URL}/completions: not found)"
    skipped = EvaluationRun.objects.create(
        submission=sub, suite=suite(), task="mmlu_abstract_algebra", status="SKIPPED", finished_at=timezone.now(),
        protocol={"task": "mmlu_abstract_algebra", "skipped": reason, "endpoint": endpoint_protocol("completions (echo, logprobs)")},
    )  # fmt: skip
    failed_model = LanguageModel.objects.create(name="down-endpoint", backend="openai", model_args={"base_url": URL})
    failed = Submission.objects.create(
        **{**common, "language_model": failed_model, "endpoint": {"backend": "openai-chat", "args": {"base_url": URL}}},
        model_name="down-endpoint", status="FAILED", failure_reason=f"EndpointError: cannot reach {URL}/chat/completions"
        f" (3 attempts): [Errno -2] Name or service not known: '{HOST}'",
        progress={"tasks": {"gsm8k": f"skipped: {reason}"}},
    )  # fmt: skip
    checkpoint = add_run(  # a checkpoint's run beside it, untouched
        Submission.objects.create(owner=staff, model_name="ckpt", language_model=LanguageModel.objects.create(name="ckpt"),
                                  model_type="pretrained", licence="mit", source="upload", architecture="LlamaForCausalLM",
                                  weight_sha256="e" * 64, parameter_count=1, total_bytes=1, storage_path="/x",
                                  status="FINISHED", finished_at=timezone.now()),
        "mmlu_anatomy", [mmlu_record(i, True) for i in range(3)], metrics=["acc"],
    )  # fmt: skip
    entries._KEPT.clear()
    return {"sub": sub, "run": run, "skipped": skipped, "failed": failed, "staff": staff, "checkpoint": checkpoint}


def public_pages(evaluated) -> dict[str, str]:
    sub, run, failed = evaluated["sub"], evaluated["run"], evaluated["failed"]
    return {
        "protocol page": f"/leaderboard/runs/{run.pk}/",
        "submission page": f"/leaderboard/submissions/{sub.public_id}/",
        "samples page": f"/leaderboard/runs/{run.pk}/samples/",
        "samples.jsonl": f"/leaderboard/runs/{run.pk}/samples.jsonl",
        "board": "/leaderboard/",
        "scores.csv": "/leaderboard/scores.csv",
        "scores.json": "/leaderboard/scores.json",
        "all-scores.csv": "/leaderboard/all-scores.csv",
        "all-scores.json": "/leaderboard/all-scores.json",
        "api runs": "/api/runs/",
        "api run": f"/api/runs/{run.pk}/",
        "api run samples": f"/api/runs/{run.pk}/samples/",
        "api scores": "/api/scores/",
        "api submissions": "/api/submissions/",
        "api submission": f"/api/submissions/{sub.public_id}/",
        "api failed submission": f"/api/submissions/{failed.public_id}/",
    }


def read(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


@pytest.mark.parametrize("who", ["anonymous", "voter"])
def test_no_public_surface_names_the_endpoints_host(client, evaluated, who):
    if who == "voter":
        client.force_login(user("voter@example.org"))
    for name, url in public_pages(evaluated).items():
        text = read(client, url)
        assert HOST not in text and "8443" not in text, name
    # What is shown instead: an endpoint was used, its backend, served model and decoding settings.
    page = read(client, f"/leaderboard/runs/{evaluated['run'].pk}/")
    assert "openai-chat endpoint (address withheld)" in page and f"<code>{SERVED}</code>" in page
    assert "max_gen_toks=256" in page and "weights not seen: an arena model served by an endpoint" in page
    shown = read(client, f"/leaderboard/submissions/{evaluated['sub'].public_id}/")
    assert "Through openai-chat endpoint (address withheld) (chat/completions, model smol-served-name)" in shown
    assert "max_gen_toks=256" in shown and "Skipped: log-likelihood task" in shown
    api = client.get(f"/api/runs/{evaluated['run'].pk}/").json()["protocol"]
    assert api["endpoint"] == {**endpoint_protocol("chat/completions"), "url": WITHHELD}
    assert api["model"]["extra"]["base_url"] == WITHHELD and api["decoding"]["max_gen_toks"] == 256
    detail = client.get(f"/api/submissions/{evaluated['sub'].public_id}/").json()
    (skipped,) = [r["skipped"] for r in detail["results"] if r["status"] == "SKIPPED"]  # its reason names the URL
    assert skipped.endswith(f"(HTTP 404 from {WITHHELD}: not found)"), skipped
    assert {r["task"]: r["endpoint"]["url"] for r in detail["results"]} == {"gsm8k": WITHHELD,
                                                                           "mmlu_abstract_algebra": WITHHELD}  # fmt: skip
    failed = client.get(f"/api/submissions/{evaluated['failed'].public_id}/").json()
    assert failed["failure_reason"] == (f"EndpointError: cannot reach {WITHHELD} (3 attempts): [Errno -2] Name or "
                                        f"service not known: '{WITHHELD}'")  # fmt: skip
    assert failed["progress"]["tasks"]["gsm8k"].endswith(f"(HTTP 404 from {WITHHELD}: not found)")
    listed = client.get("/api/runs/").json()
    (checkpoint,) = [r for r in listed.get("results", listed) if r["id"] == evaluated["checkpoint"].pk]
    assert checkpoint["protocol"] == evaluated["checkpoint"].protocol  # nothing withheld from a checkpoint's run
    board = read(client, "/leaderboard/")  # the board row is there, marked endpoint, without the address
    assert f'data-submission="{evaluated["sub"].public_id}"' in board and "Chat · endpoint" in board
    assert "smol-endpoint" in read(client, "/leaderboard/scores.csv")


def test_staff_see_the_endpoints_address(client, evaluated):
    client.force_login(evaluated["staff"])
    page = read(client, f"/leaderboard/runs/{evaluated['run'].pk}/")
    assert f"openai-chat at <code>{URL}</code>" in page
    assert client.get(f"/api/runs/{evaluated['run'].pk}/").json()["protocol"]["endpoint"]["url"] == URL
    detail = client.get(f"/api/submissions/{evaluated['failed'].public_id}/").json()
    assert URL in detail["failure_reason"]
    assert f"Through openai-chat at {URL}" in read(client, f"/leaderboard/submissions/{evaluated['sub'].public_id}/")
    assert evaluated["run"].protocol["endpoint"]["url"] == URL  # stored as it was: only the reading is withheld


def test_a_failed_judge_run_of_an_endpoint_model_withholds_its_address(client, evaluated, smollm2_dir):
    """The judge page lists failed runs with their reason: an arena model's unreachable endpoint names it."""
    config = judge_setup(smollm2_dir)["config"]
    model = evaluated["sub"].language_model
    JudgeRun.objects.create(config=config, model=model, status="FAILED",
                            failure_reason=f"EndpointError: cannot reach {URL}/chat/completions (3 attempts)")  # fmt: skip
    page = read(client, f"/leaderboard/judges/{config.pk}/")
    assert "Failed runs: smol-endpoint (EndpointError: cannot reach (address withheld) (3 attempts))" in page
    assert HOST not in page
    client.force_login(evaluated["staff"])
    assert f"cannot reach {URL}/chat/completions" in read(client, f"/leaderboard/judges/{config.pk}/")


@pytest.mark.parametrize(
    ("text", "urls", "expected"),
    [
        (f"at {URL}/chat/completions.", [URL], f"at {WITHHELD}."),
        (f"user@{HOST}:8443 and {HOST.upper()}", [URL], f"user@{WITHHELD} and {WITHHELD}"),
        ("HTTP 404 from http://[::1]:9/v1/completions", ["http://[::1]:9/v1"], f"HTTP 404 from {WITHHELD}"),
        ("nothing to hide", [URL], "nothing to hide"),
        ("http://other.example/v1", ["", None, "not a url", "http://"], "http://other.example/v1"),
    ],
)
def test_addresses_withheld(text, urls, expected):
    assert addresses_withheld(text, urls) == expected
    nested = addresses_withheld({"a": [text, 3, None], "b": {"c": text}}, urls)
    assert nested == {"a": [expected, 3, None], "b": {"c": expected}}
