"""Publication's pages and endpoints: the terms and the voter's agreement, reports, the data releases."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import FileResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from arena.models import DataRelease
from arena.play import dispatch
from arena.play.endpoints import NO_SESSION_MESSAGE, error_response, form_error, voter_action
from arena.play.identity import arena_session_key
from arena.publication import holds
from arena.publication.consent import ConsentError, consent_give, publish_when, terms_version
from arena.publication.forms import ConsentForm, ReportForm
from arena.publication.selectors import release_outlook
from common.public_ids import battle_id


@require_GET
def arena_terms(request):
    """The terms on their own page (the arena page shows the same text before the first message)."""
    context = {"terms_version": terms_version(), "publish_when": publish_when()}
    return render(request, "arena/terms_page.html", context)


@require_POST
def consent_create(request):
    """``POST /arena/consent/`` with ``version``: the voter agrees to the current terms (stored in the session)."""
    form = ConsentForm(request.POST)
    if not form.is_valid():
        return form_error(form)
    if arena_session_key(request) is None:
        return error_response(NO_SESSION_MESSAGE, 403)
    try:
        record = consent_give(request.session, form.cleaned_data["version"])
    except ConsentError as exc:
        return error_response(str(exc), 409)
    return JsonResponse({"version": record["version"], "at": record["at"]}, status=201)


@require_POST
def battle_report(request, public_id):
    """``POST /arena/battles/<id>/report/`` with ``reason``: the voter's battle is held back from publication
    until staff review it (arena.publication.holds.battle_report)."""

    def act(data, session_hash, ip_hash, consent):
        holds.battle_report(public_id=public_id, session_hash=session_hash, reason=data["reason"])
        return JsonResponse({"battle": battle_id(public_id), "reported": True, "held": True}, status=201)

    return voter_action(request, ReportForm, "votes", settings.ARENA_VOTES_PER_MINUTE, act)


@require_GET
def releases_page(request):
    """``/arena/releases/``: every data release with its files, sizes and checksums; staff can cut a new one."""
    releases = list(DataRelease.objects.select_related("snapshot").order_by("-created_at", "-id"))
    context = {"releases": releases, "queued": request.GET.get("queued") == "1", "outlook": release_outlook()}
    return render(request, "arena/releases.html", context)


@require_POST
def release_create(request):
    """Staff only: cut a release at the newest snapshot (a worker writes it; the page lists it when done)."""
    if not (request.user.is_authenticated and request.user.is_staff):
        return error_response("Only staff can cut a data release.", 403)
    dispatch.release_enqueue()
    return redirect("/arena/releases/?queued=1")


@require_GET
def release_file(request, version: str, name: str):
    """One file of a release, by the name its file list records (nothing else is served)."""
    release = DataRelease.objects.filter(version=version).first()
    listed = {f["name"]: f for f in release.files} if release else {}
    if name not in listed:
        return error_response("No such release file.", 404)
    path = Path(release.path) / name
    if not path.is_file():
        return error_response("This release's files are no longer on the server.", 410)
    response = FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
    response["X-Checksum-SHA256"] = listed[name]["sha256"]
    return response
