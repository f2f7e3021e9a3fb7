"""Django admin for the leaderboard: every model's pages render; reviews go through the service."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from arena.catalogue.services import model_register
from leaderboard.evaluation.suites import suite_freeze
from leaderboard.models import ReviewAction, Submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(admin)
    return client


def test_admin_pages_and_review_log(staff_client):
    owner = get_user_model().objects.create_user("o@example.org", "o@example.org", "pw-owner-42")
    model = model_register(name="acme/x", family="acme/base")
    assert model_register(name="acme/x") == model and not model.in_arena and model.family == "acme/base"
    submission = Submission.objects.create(
        owner=owner, model_name="acme/x", language_model=model, model_type="pretrained", licence="mit",
        source="upload", architecture="LlamaForCausalLM", weight_sha256="b" * 64, parameter_count=1,
        total_bytes=1, storage_path="/nowhere", status="FAILED", failure_reason="boom",
    )  # fmt: skip
    suite_freeze(name="podium", tasks=[{"task": "gsm8k", "num_fewshot": 5, "limit": 10}])
    for name in ("submission", "reviewaction", "benchmarksuite", "evaluationrun", "score", "samplerecord",
                 "scorehistory"):  # fmt: skip
        assert staff_client.get(f"/admin/leaderboard/{name}/").status_code == 200, name
    assert staff_client.get(f"/admin/leaderboard/submission/{submission.pk}/change/").status_code == 200
    response = staff_client.post(
        "/admin/leaderboard/reviewaction/add/",
        {"submission": submission.pk, "action": "reject", "comment": "weights of another model"},
    )
    assert response.status_code == 302
    submission.refresh_from_db()
    assert submission.review_state == "rejected"
    assert ReviewAction.objects.get().admin.username == "admin@example.org"
    response = staff_client.post(
        "/admin/leaderboard/submission/", {"action": "requeue", "_selected_action": [submission.pk]}
    )
    assert response.status_code == 302
    submission.refresh_from_db()
    assert submission.status == "PENDING"
