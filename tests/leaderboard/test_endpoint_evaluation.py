"""Evaluate an arena model from the admin (issue 32 §1): a model served by an OpenAI-compatible endpoint
is benchmarked through it, end to end against ``python -m evalcore serve`` with the real SmolLM2, and its
scores land on the board row that carries its arena rating and judge score, with the protocol shown.

Hostile input: a model without an endpoint, credentials in its arguments, an unreachable endpoint
(a clear reason; clicking again requeues the same evaluation), a second click while one is queued (no
duplicate), a non-staff user (refused); the database keeps uploads' weight facts strict.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from arena.models import LanguageModel
from leaderboard.board import entries
from leaderboard.board.selectors import board_table
from leaderboard.models import EvaluationRun, MemorisationProbe, Score, Submission
from leaderboard.submissions.endpoint import endpoint_evaluation_request
from leaderboard.submissions.services import rules_check
from leaderboard.tasks import submission_evaluate  # noqa: F401 - known here, so an eager send runs it in place
from tests.conftest import free_port
from tests.evalcore.models.test_openai_backend import scripted  # noqa: F401 - a fixture
from tests.evalcore.models.test_serve import MODEL_NAME, serve_process
from tests.leaderboard.board_data import arena_snapshot

pytestmark = pytest.mark.django_db
SUITE = [
    {"task": "gsm8k", "num_fewshot": 0, "limit": 2},  # generation: chat completions, the server's template
    {"task": "mmlu_cloze_abstract_algebra", "num_fewshot": 0, "limit": 2},  # log-likelihood: /completions
]
CHANGELIST = "/admin/arena/languagemodel/"


@pytest.fixture
def eager(settings, celery_eager, submissions_dir):
    settings.LEADERBOARD_SUITE_TASKS = SUITE
    settings.LEADERBOARD_PROBE_LIMIT = 4  # on (as for checkpoints): an endpoint evaluation runs none


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(user)
    return user


def arena_model(name: str, base_url: str | None, **args) -> LanguageModel:
    model_args = {"base_url": base_url, **args} if base_url else args
    return LanguageModel.objects.create(
        name=name, backend="openai" if base_url else "", model_args=model_args, in_arena=True, licence="apache-2.0",
        parameter_count=134_515_008,
    )  # fmt: skip


def evaluate(client, model: LanguageModel, captured, *, execute: bool = True) -> list[str]:
    """Select ``model`` in Admin › Language models and run "Evaluate this arena model"; the messages."""
    with captured(execute=execute):
        response = client.post(CHANGELIST, {"action": "evaluate", "_selected_action": [model.pk]})
    assert response.status_code == 302, response.content.decode()[:2000]
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_admin_evaluates_an_endpoint_model_onto_its_board_row(client, staff, eager, smollm2_dir, monkeypatch,
                                                              django_capture_on_commit_callbacks):  # fmt: skip
    host, port = serve_process(str(smollm2_dir))
    url = f"http://{host}:{port}/v1"
    model = arena_model("smol-chat", url, model=MODEL_NAME, timeout=120)
    arena_snapshot({"smol-chat": (1100.0, 1050.0, 1150.0), "someone-else": (1000.0, 950.0, 1050.0)})
    page = client.get(f"{CHANGELIST}{model.pk}/change/").content.decode()
    assert f'action="{CHANGELIST}{model.pk}/evaluate/"' in page and "Evaluate this arena model" in page

    said = evaluate(client, model, django_capture_on_commit_callbacks)
    submission = Submission.objects.get(language_model=model)
    assert any(f">#{submission.pk}</a> queued" in m for m in said), said
    assert submission.status == "FINISHED", (submission.failure_reason, submission.log_tail)
    assert (submission.source, submission.weight_sha256, submission.storage_path, submission.total_bytes) == (
        "endpoint", "", "", None)  # fmt: skip
    assert submission.endpoint == {"backend": "openai-chat", "args": model.model_args}
    assert submission.owner == staff and submission.model_name == "smol-chat" and submission.apply_chat_template

    runs = {r.task: r for r in EvaluationRun.objects.filter(submission=submission)}
    gsm8k, mmlu = runs["gsm8k"], runs["mmlu_cloze_abstract_algebra"]
    assert gsm8k.status == mmlu.status == "FINISHED"
    endpoint = gsm8k.protocol["endpoint"]
    assert (endpoint["backend"], endpoint["url"], endpoint["served_model"]) == ("openai-chat", url, MODEL_NAME)
    assert endpoint["chat_template"] == "applied by the server (chat completions)"
    assert gsm8k.protocol["chat"]["template"] == "applied by the endpoint" and gsm8k.protocol["n_docs"] == 2
    assert gsm8k.protocol["decoding"]["max_gen_toks"] == 256 and gsm8k.protocol["precision"] == ""
    assert gsm8k.protocol["model"]["backend"] == "openai-chat" and gsm8k.protocol["model"]["extra"]["base_url"] == url
    # This server returns prompt log-probabilities: the log-likelihood task is scored, without a chat template.
    assert mmlu.protocol["endpoint"]["api"] == "completions (echo, logprobs)"
    assert mmlu.protocol["apply_chat_template"] is False and mmlu.protocol["endpoint"]["chat_template"] == "none: plain prompts"
    assert Score.objects.filter(run=mmlu, metric="acc").get().n == 2
    assert Score.objects.filter(run=gsm8k).exists()
    assert not MemorisationProbe.objects.filter(submission=submission).exists()  # a chat model would not continue text

    # The board: one row for the model, with its scores, its arena rating and its judge score (the judge
    # column is keyed by the catalogue model, as the arena rating is by its name: a stand-in cell here).
    board = client.get("/leaderboard/").content.decode()
    assert f'data-submission="{submission.public_id}"' in board and "Chat · endpoint" in board
    judge_cell = {"value": 61.5, "ci_low": 50.0, "ci_high": 70.0}
    monkeypatch.setattr(entries, "board_judge_cells",
                        lambda: ({"id": 1, "name": "j", "baseline": "b"}, {model.pk: judge_cell}))  # fmt: skip
    entries._KEPT.clear()
    (row,) = [r for r in board_table()["rows"] if r["model"] == "smol-chat"]
    assert row["public_id"] == submission.public_id and row["arena"]["rating"] == 1100.0
    assert row["judge"] == judge_cell and set(row["cells"]) == {"gsm8k", "mmlu_cloze"}
    assert row["type_label"] == "Chat · endpoint" and row["precision"] == "endpoint"
    assert row["parameters_label"] == "135M"
    entries._KEPT.clear()
    protocol = client.get(f"/leaderboard/runs/{row['cells']['gsm8k']['run_id']}/").content.decode()  # the cell's link
    assert f"openai-chat at <code>{url}</code>" in protocol and "applied by the server" in protocol
    assert "weights not seen: an arena model served by an endpoint" in protocol
    mine = client.get("/leaderboard/submissions/").content.decode()
    assert "smol-chat" in mine and "None" not in mine
    shown = client.get(f"/leaderboard/submissions/{submission.public_id}/").content.decode()
    assert "evaluated through the endpoint that serves it" in shown
    assert f"Through openai-chat at {url}" in shown and "applied by the server" in shown
    listed = client.get("/api/submissions/").json()
    (api,) = [s for s in listed.get("results", listed) if s["id"] == submission.public_id]
    assert api["source"] == "endpoint" and api["weight_sha256"] == "" and api["precision"] == ""
    detail = client.get(f"/api/submissions/{submission.public_id}/").json()
    assert {r["task"]: r["endpoint"]["url"] for r in detail["results"]} == {"gsm8k": url, "mmlu_cloze_abstract_algebra": url}
    client.logout()  # the public reads that an endpoint was used, not where (tests/leaderboard/test_endpoint_address.py)
    for page in (f"/leaderboard/runs/{gsm8k.pk}/", f"/leaderboard/submissions/{submission.public_id}/",
                 f"/api/runs/{gsm8k.pk}/", f"/api/submissions/{submission.public_id}/"):  # fmt: skip
        text = client.get(page).content.decode()
        assert f"{host}:{port}" not in text and "(address withheld)" in text, page
    client.force_login(staff)

    # Evaluated already: a click adds nothing and asks whether to re-run it (tests/leaderboard/test_endpoint_rerun.py).
    with django_capture_on_commit_callbacks(execute=False) as sent:
        asked = client.post(CHANGELIST, {"action": "evaluate", "_selected_action": [model.pk]})
    assert asked.status_code == 200 and "Re-run the evaluation?" in asked.content.decode() and not sent
    assert Submission.objects.filter(language_model=model).count() == 1


def test_a_chat_only_endpoint_skips_log_likelihood_tasks_with_the_reason(client, staff, eager, scripted,  # noqa: F811
                                                                         django_capture_on_commit_callbacks):  # fmt: skip
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "2 + 2 = 4. #### 4"},
                           "finish_reason": "stop"}]}  # fmt: skip
    script, url = scripted((404, {"error": {"message": "no /completions here"}}, None), (200, answer, None))
    model = arena_model("chat-only", url, model="chat-only-model", max_retries=0)
    evaluate(client, model, django_capture_on_commit_callbacks)
    submission = Submission.objects.get(language_model=model)
    assert submission.status == "FINISHED", (submission.failure_reason, submission.log_tail)
    runs = {r.task: r for r in EvaluationRun.objects.filter(submission=submission)}
    assert runs["gsm8k"].status == "FINISHED" and runs["gsm8k"].protocol["n_docs"] == 2
    skipped = runs["mmlu_cloze_abstract_algebra"]
    assert skipped.status == "SKIPPED" and not skipped.scores.exists() and not skipped.samples.exists()
    assert "no prompt log-probabilities" in skipped.protocol["skipped"] and "no /completions here" in skipped.protocol["skipped"]
    assert skipped.protocol["endpoint"]["url"] == url
    assert submission.progress["tasks"]["mmlu_cloze_abstract_algebra"].startswith("skipped: log-likelihood task")
    assert [body["model"] for _, body in script.seen[1:]] == ["chat-only-model"] * 2  # the two gsm8k documents
    assert "messages" in script.seen[1][1]  # a conversation: the server applies the chat template
    shown = client.get(f"/leaderboard/submissions/{submission.public_id}/").content.decode()
    assert "Skipped: log-likelihood task" in shown


def test_an_unreachable_endpoint_fails_with_the_reason_and_a_click_requeues_it(client, staff, eager,
                                                                              django_capture_on_commit_callbacks):  # fmt: skip
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    model = arena_model("gone", url, model="gone", max_retries=1, backoff=0)
    evaluate(client, model, django_capture_on_commit_callbacks)
    submission = Submission.objects.get(language_model=model)
    assert submission.status == "FAILED" and "cannot reach" in submission.failure_reason
    assert url in submission.failure_reason and "(2 attempts)" in submission.failure_reason
    said = evaluate(client, model, django_capture_on_commit_callbacks)  # retried like any failed run
    assert any("queued" in m for m in said), said
    again = Submission.objects.get(language_model=model)
    assert again.pk == submission.pk and again.attempts == 2 and again.status == "FAILED"
    # Its endpoint changed (fixed by staff): a new evaluation, the failed one kept as it was.
    model.model_args = {**model.model_args, "base_url": f"http://127.0.0.1:{free_port()}/v1"}
    model.save()
    evaluate(client, model, django_capture_on_commit_callbacks, execute=False)
    assert Submission.objects.filter(language_model=model).count() == 2


def test_a_second_click_while_queued_adds_nothing(client, staff, eager, settings, django_capture_on_commit_callbacks):
    model = arena_model("queued", "http://127.0.0.1:9/v1")
    first = evaluate(client, model, django_capture_on_commit_callbacks, execute=False)  # the worker never ran it
    submission = Submission.objects.get(language_model=model)
    assert submission.status == "PENDING" and any("queued" in m for m in first)
    second = evaluate(client, model, django_capture_on_commit_callbacks, execute=False)
    assert any("already pending (nothing added)" in m for m in second), second
    with django_capture_on_commit_callbacks(execute=False) as sent:  # the change page's button, the same rule
        response = client.post(f"{CHANGELIST}{model.pk}/evaluate/")
    assert response.status_code == 302 and response["Location"] == f"{CHANGELIST}{model.pk}/change/"
    assert not sent and Submission.objects.filter(language_model=model).count() == 1
    for page in (f"/admin/leaderboard/submission/{submission.pk}/change/", f"/leaderboard/review/{submission.public_id}/",
                 f"/leaderboard/submissions/{submission.public_id}/", "/leaderboard/submissions/"):  # fmt: skip
        assert client.get(page).status_code == 200, page
    settings.LEADERBOARD_SUBMISSIONS_PER_WEEK = 1
    rules_check(staff, "staff/own-upload")  # an evaluation of an arena model is not one of the staff's uploads
    assert client.get(f"{CHANGELIST}{model.pk}/evaluate/").status_code == 405


@pytest.mark.parametrize(
    ("backend", "args", "said"),
    [
        ("", {}, "has no backend"),
        ("hf", {"path": "SmolLM2-135M-Instruct"}, "served from local weights (hf backend)"),
        ("openai", {"model": "x"}, "has no endpoint: its model_args need base_url"),
        ("openai", {"base_url": "ftp://host/v1"}, "has no endpoint"),
        ("openai", {"base_url": "http://user:secret@host/v1"}, "carries credentials or a query"),
        ("openai", {"base_url": "http://host/v1?key=secret"}, "carries credentials or a query"),
        ("openai", {"base_url": "http://host/v1", "api_key": "sk-123"}, "hold api_key: a key is never stored"),
    ],
)
def test_models_without_a_usable_endpoint_are_refused(client, staff, eager, backend, args, said,
                                                      django_capture_on_commit_callbacks):  # fmt: skip
    model = LanguageModel.objects.create(name="m", backend=backend, model_args=args, in_arena=True)
    messages = evaluate(client, model, django_capture_on_commit_callbacks)
    assert any(said in m for m in messages), messages
    assert not any("secret" in m or "sk-123" in m for m in messages)
    assert not Submission.objects.exists()


def test_only_staff_may_evaluate(client, eager, django_capture_on_commit_callbacks):
    model = arena_model("smol", "http://127.0.0.1:9/v1")
    voter = get_user_model().objects.create_user("v@example.org", "v@example.org", "pw-voter-42")
    client.force_login(voter)
    with django_capture_on_commit_callbacks(execute=True):
        listed = client.post(CHANGELIST, {"action": "evaluate", "_selected_action": [model.pk]})
        button = client.post(f"{CHANGELIST}{model.pk}/evaluate/")
    assert listed.status_code == button.status_code == 302 and "/admin/login/" in button["Location"]
    with pytest.raises(PermissionDenied):
        endpoint_evaluation_request(model=model, requested_by=voter)
    assert not Submission.objects.exists()


def test_a_checkpoint_submitted_under_the_name_keeps_its_row(client, staff, eager, django_capture_on_commit_callbacks):
    model = arena_model("has-weights", "http://127.0.0.1:9/v1")
    Submission.objects.create(
        owner=staff, model_name=model.name, language_model=model, model_type="chat", licence="mit", source="upload",
        architecture="LlamaForCausalLM", weight_sha256="a" * 64, parameter_count=1, total_bytes=1,
        storage_path="/nowhere", status="FINISHED",
    )  # fmt: skip
    with pytest.raises(ValidationError, match="checkpoint was submitted"):
        endpoint_evaluation_request(model=model, requested_by=staff)


def test_constraints_keep_uploads_strict_and_endpoints_weightless(staff):
    model = arena_model("c", "http://127.0.0.1:9/v1")
    common = dict(owner=staff, model_name="c", language_model=model, model_type="chat", licence="mit")
    endpoint = {"backend": "openai-chat", "args": {"base_url": "http://127.0.0.1:9/v1"}}
    upload = dict(common, source="upload", architecture="LlamaForCausalLM", weight_sha256="c" * 64,
                  parameter_count=1, total_bytes=1, storage_path="/x")  # fmt: skip
    weightless = dict(common, source="endpoint", precision="", endpoint=endpoint)
    for fields in (
        {**upload, "weight_sha256": ""},  # an upload without its hash
        {**upload, "storage_path": ""},  # ... without its folder
        {**upload, "total_bytes": None},
        {**upload, "parameter_count": None},
        {**upload, "precision": ""},
        {**upload, "endpoint": endpoint},  # an upload claiming an endpoint
        {**weightless, "weight_sha256": "d" * 64},  # an endpoint claiming weights
        {**weightless, "storage_path": "/x"},
        {**weightless, "total_bytes": 5},
        {**weightless, "endpoint": {}},  # an endpoint evaluation without its endpoint
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Submission.objects.create(**fields)
    Submission.objects.create(**weightless)
    with pytest.raises(IntegrityError), transaction.atomic():  # one live endpoint evaluation per model
        Submission.objects.create(**weightless)
    Submission.objects.create(**{**weightless, "status": "FAILED", "failure_reason": "unreachable"})
