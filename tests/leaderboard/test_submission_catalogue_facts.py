"""Item 7 (issue of the README demo): a submission's licence and open weights reach the arena catalogue
(the board and the model's page), for new submissions and, by migration, for those made before."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from arena.catalogue.services import model_register
from arena.models import LanguageModel
from leaderboard.models import Submission
from tests.leaderboard.test_submit import SUBMIT, form_data, make_submission, owner, uploads  # noqa: F401

pytestmark = pytest.mark.django_db
migration = importlib.import_module("leaderboard.migrations.0019_submission_open_weights")


def test_the_form_carries_licence_and_open_weights_to_the_catalogue(client, owner, tiny_dir, submissions_dir):  # noqa: F811
    response = client.post(SUBMIT, form_data(uploads(tiny_dir), open_weights="on"))
    assert response.status_code == 302, response.content.decode()[:2000]
    submission = Submission.objects.get()
    model = LanguageModel.objects.get(name="acme/tiny-llama")
    assert (submission.licence, submission.open_weights) == ("apache-2.0", True)
    assert (model.licence, model.open_weights, model.in_arena) == ("apache-2.0", True, False)
    page = client.get(f"/leaderboard/arena/models/{model.name}/").content.decode()
    assert "<dt>Licence</dt><dd>apache-2.0</dd>" in page
    assert "<dt>Open weights</dt><dd>yes</dd>" in page


def test_open_weights_is_off_unless_the_owner_says_so(client, owner, tiny_dir, submissions_dir):  # noqa: F811
    assert client.post(SUBMIT, form_data(uploads(tiny_dir), licence="mit")).status_code == 302
    model = LanguageModel.objects.get(name="acme/tiny-llama")
    assert (model.licence, model.open_weights) == ("mit", False)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"licence": "<script>x</script>"}, "A licence name such as apache-2.0"),
        ({"licence": "mit\nsecond line"}, "A licence name such as apache-2.0"),
        ({"licence": "x" * 101}, "at most 100 characters"),
        ({"licence": "Proprietary", "open_weights": "on"}, "untick open weights"),
    ],
)
def test_hostile_licences_are_refused_with_nothing_stored(client, owner, tiny_dir, submissions_dir, fields, message):  # noqa: F811
    response = client.post(SUBMIT, form_data(uploads(tiny_dir), **fields))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Submission.objects.exists() and not LanguageModel.objects.exists()


def test_the_api_takes_open_weights_as_true_or_false_only(client, owner):  # noqa: F811
    body = {"model_name": "acme/api", "model_type": "pretrained", "licence": "mit", "open_weights": "maybe",
            "files": {"config.json": 10}}  # fmt: skip
    response = client.post("/api/submissions/", body, content_type="application/json")
    assert response.status_code == 400 and "open_weights" in response.json()


def test_register_fills_a_bare_leaderboard_entry_and_keeps_a_described_one():
    bare = model_register(name="acme/bare")
    assert (bare.licence, bare.open_weights) == ("", False)
    again = model_register(name="acme/bare", licence="apache-2.0", open_weights=True)
    assert (again.pk, again.licence, again.open_weights) == (bare.pk, "apache-2.0", True)
    kept = model_register(name="acme/bare", licence="proprietary", open_weights=False)
    assert (kept.licence, kept.open_weights) == ("apache-2.0", True)
    arena = LanguageModel.objects.create(name="arena-model", in_arena=True, licence="", open_weights=False)
    assert model_register(name="arena-model", licence="mit", open_weights=True).licence == ""  # the file's
    with pytest.raises(ValidationError, match="licence"):
        model_register(name="acme/new", licence="bad<licence>")
    assert not LanguageModel.objects.filter(name="acme/new").exists()
    arena.refresh_from_db()
    assert (arena.licence, arena.open_weights) == ("", False)


def test_the_migration_fixes_rows_registered_before(django_user_model):
    owner_ = django_user_model.objects.create_user("o", "o@example.org", "pw-owner-42")
    open_one = make_submission(owner_, name="acme/open", sha="1" * 64, licence="Apache-2.0")
    closed = make_submission(owner_, name="acme/closed", sha="2" * 64, licence="llama3.1")
    odd = make_submission(owner_, name="acme/odd", sha="3" * 64, licence="weird<licence>")
    arena = LanguageModel.objects.create(name="arena-one", in_arena=True)
    in_arena = make_submission(owner_, name="arena-one", sha="4" * 64, licence="mit", language_model=arena)
    LanguageModel.objects.update(licence="", open_weights=False)  # as model_register left them
    migration.forwards(apps, None)
    for submission, licence, weights in [(open_one, "Apache-2.0", True), (closed, "llama3.1", False), (odd, "", False)]:
        submission.refresh_from_db()
        model = submission.language_model
        model.refresh_from_db()
        assert (model.licence, model.open_weights) == (licence, weights), submission.model_name
        assert submission.open_weights is weights
    arena.refresh_from_db()
    assert (arena.licence, arena.open_weights) == ("", False)  # the catalogue file's to describe
    in_arena.refresh_from_db()
    assert in_arena.open_weights  # mit: open source
