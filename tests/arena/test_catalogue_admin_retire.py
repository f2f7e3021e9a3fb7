"""Item 7 (issue of the README demo): the catalogue's admin deletes no model and retires models by an
action with a reason, at the time of the action; hostile reasons are refused with nothing changed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.utils import timezone

from arena.catalogue.services import models_retire
from arena.models import LanguageModel

pytestmark = pytest.mark.django_db
LIST = "/admin/arena/languagemodel/"


def retire_post(admin_client, models, **extra):
    body = {"action": "retire", "_selected_action": [m.pk for m in models], **extra}
    return admin_client.post(LIST, body)


def test_no_delete_action_button_or_permission(admin_client):
    model = LanguageModel.objects.create(name="m", in_arena=True)
    page = admin_client.get(LIST).content.decode()
    assert "Retire selected models" in page
    assert "delete_selected" not in page and "Delete selected" not in page
    change = admin_client.get(f"{LIST}{model.pk}/change/").content.decode()
    assert f"{LIST}{model.pk}/delete/" not in change
    assert admin_client.get(f"{LIST}{model.pk}/delete/").status_code == 403
    assert admin_client.post(f"{LIST}{model.pk}/delete/", {"post": "yes"}).status_code == 403
    response = admin_client.post(LIST, {"action": "delete_selected", "_selected_action": [model.pk], "post": "yes"})
    assert response.status_code in (200, 302)  # the admin answers "no action selected"; nothing is deleted
    assert LanguageModel.objects.filter(pk=model.pk).exists()


def test_the_retire_action_asks_for_a_reason_then_retires_now(admin_client):
    a = LanguageModel.objects.create(name="a", in_arena=False)
    b = LanguageModel.objects.create(name="b", in_arena=False)
    page = retire_post(admin_client, [a, b])
    assert page.status_code == 200
    text = page.content.decode()
    assert "Reason (shown publicly)" in text and "Nothing is deleted" in text and ">a<" in text and ">b<" in text
    assert not LanguageModel.objects.filter(retired_at__isnull=False).exists()  # asked, not done
    before = timezone.now()
    done = retire_post(admin_client, [a, b], retire_confirmed="yes", reason="  superseded by v2 ")
    assert done.status_code == 302
    after = timezone.now()
    for model in (a, b):
        model.refresh_from_db()
        assert model.retired_reason == "superseded by v2" and before <= model.retired_at <= after
    assert LanguageModel.objects.count() == 2


@pytest.mark.parametrize("reason", ["", "   ", "two\nlines", "tab\there", "x" * 301, "nul\x00"])
def test_a_hostile_or_empty_reason_is_refused_and_nothing_changes(admin_client, reason):
    model = LanguageModel.objects.create(name="m", in_arena=False)
    response = retire_post(admin_client, [model], retire_confirmed="yes", reason=reason)
    assert response.status_code == 200  # the form again, with its error
    assert 'class="errorlist' in response.content.decode()
    model.refresh_from_db()
    assert model.retired_at is None and model.retired_reason == ""


def test_a_retired_model_keeps_its_date_and_reason(admin_client):
    when = timezone.now().replace(year=2025)
    old = LanguageModel.objects.create(name="old", retired_at=when, retired_reason="first reason")
    new = LanguageModel.objects.create(name="new")
    response = retire_post(admin_client, [old, new], retire_confirmed="yes", reason="second reason")
    assert response.status_code == 302
    old.refresh_from_db()
    new.refresh_from_db()
    assert (old.retired_at, old.retired_reason) == (when, "first reason")
    assert new.retired_reason == "second reason"
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any("1 selected were retired already" in m for m in messages), messages


def test_a_model_of_the_catalogue_file_is_retired_with_a_warning(admin_client):
    model = LanguageModel.objects.create(name="declared", in_arena=True)
    response = retire_post(admin_client, [model], retire_confirmed="yes", reason="endpoint withdrawn")
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any("next catalogue sync" in m for m in messages), messages
    model.refresh_from_db()
    assert model.retired_reason == "endpoint withdrawn"


def test_retiring_needs_the_change_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("v", "v@example.org", "pw-viewer-42", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_languagemodel"))
    client.force_login(viewer)
    model = LanguageModel.objects.create(name="m")
    assert "Retire selected models" not in client.get(LIST).content.decode()
    client.post(LIST, {"action": "retire", "_selected_action": [model.pk], "retire_confirmed": "yes", "reason": "x"})
    model.refresh_from_db()
    assert model.retired_at is None


def test_the_service_refuses_an_empty_reason():
    model = LanguageModel.objects.create(name="m")
    with pytest.raises(ValidationError, match="shown publicly"):
        models_retire([model.pk], reason=" ")
    assert models_retire([model.pk], reason="gone") == [model]
    assert models_retire([model.pk], reason="again") == []
