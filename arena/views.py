"""Arena pages and endpoints: thin views over arena.services and arena.selectors_battles."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import FileResponse, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from arena import dispatch, services
from arena.consent import ConsentError, consent_give, consent_of, missing_message, terms_version
from arena.forms import ConsentForm, PromptForm, ReportForm, VoteForm
from arena.identity import address_hash, arena_session_key, session_key, voter_hashes
from arena.models import DataRelease
from arena.ratelimit import RateLimited, hit, hit_address
from arena.selectors_battles import battle_state
from common.http import read_only
from common.outages import is_outage, unavailable
from common.public_ids import battle_id

NO_SESSION_MESSAGE = (
    "No arena session: open /arena/ first (with cookies allowed); battles and votes need the session it creates."
)


def error_response(message: str, status: int, **headers) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    for key, value in headers.items():
        response[key.replace("_", "-")] = value
    return response


def form_error(form) -> JsonResponse:
    first = next(iter(form.errors.values()))[0]
    return error_response(str(first), 400)


def limited(action: str, hashes: tuple[str, str], per_window: int) -> JsonResponse | None:
    session_hash, ip_hash = hashes
    try:
        hit(action, session_hash=session_hash, ip_hash=ip_hash, per_window=per_window)
    except RateLimited as exc:
        return error_response(str(exc), 429, Retry_After=str(exc.retry_after))
    return None


@require_GET
@ensure_csrf_cookie
def arena_index(request):
    if arena_session_key(request) is None:  # a new session: at most so many per address and window
        try:
            hit_address("sessions", ip_hash=address_hash(request), limit=settings.ARENA_SESSIONS_PER_MINUTE)
        except RateLimited as exc:
            response = HttpResponse(str(exc), status=429, content_type="text/plain; charset=utf-8")
            response["Retry-After"] = str(exc.retry_after)
            return response
    session_key(request)  # the voter's session exists before the first battle
    return render(
        request,
        "arena/index.html",
        {
            "max_prompt_chars": settings.ARENA_MAX_PROMPT_CHARS,
            "max_turns": settings.ARENA_MAX_TURNS,
            "terms_version": terms_version(),
            "consented": consent_of(request.session) is not None,
            "publish_delay_hours": round(settings.ARENA_PUBLISH_DELAY_S / 3600, 1),
        },
    )


@require_GET
def arena_terms(request):
    """The terms on their own page (the arena page shows the same text before the first message)."""
    context = {"terms_version": terms_version(), "publish_delay_hours": round(settings.ARENA_PUBLISH_DELAY_S / 3600, 1)}
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


def voter_action(request, form_class, action: str, per_window: int, act) -> JsonResponse:
    """The shared path of the arena's POSTs: validate the form, check the session and its agreement to the
    current terms, apply the voter's rate limit, call the service through
    ``act(cleaned_data, session_hash, ip_hash, consent)``, and turn its refusals into JSON."""
    form = form_class(request.POST)
    if not form.is_valid():
        return form_error(form)
    try:
        hashes = voter_hashes(request)
        if hashes is None:  # no cookie, a forged or expired one: refused, and no session is made for it
            return error_response(NO_SESSION_MESSAGE, 403)
        consent = consent_of(request.session)
        if consent is None:  # no battle, turn or vote without agreeing to the current terms
            return error_response(missing_message(), 403)
        if refusal := limited(action, hashes, per_window):
            return refusal
        return act(form.cleaned_data, *hashes, consent)
    except services.ArenaError as exc:
        headers = {"Retry_After": str(exc.retry_after)} if exc.retry_after else {}
        return error_response(str(exc), exc.status, **headers)
    except Exception as exc:
        # The database restarting: the voter tries again; a vote whose statement committed is then
        # refused as already cast (one per battle), never stored twice.
        if is_outage(exc):
            return unavailable(request)
        raise


@require_POST
def battle_start(request):
    def act(data, session_hash, ip_hash, consent):
        battle = services.battle_create(
            prompt=data["prompt"], session_hash=session_hash, ip_hash=ip_hash, consent=consent
        )
        public_id = battle_id(battle.public_id)
        return JsonResponse(
            {"battle": public_id, "turn": 0, "socket": f"/ws/arena/battles/{public_id}/"}, status=201
        )

    return voter_action(request, PromptForm, "battles", settings.ARENA_BATTLES_PER_MINUTE, act)


@require_POST
def turn_create(request, public_id):
    def act(data, session_hash, ip_hash, consent):
        turn = services.turn_add(public_id=public_id, prompt=data["prompt"], session_hash=session_hash)
        return JsonResponse({"battle": battle_id(public_id), "turn": turn.index}, status=201)

    return voter_action(request, PromptForm, "battles", settings.ARENA_BATTLES_PER_MINUTE, act)


@require_POST
def vote_create(request, public_id):
    def act(data, session_hash, ip_hash, consent):
        vote = services.vote_cast(
            public_id=public_id, winner=data["winner"], session_hash=session_hash, ip_hash=ip_hash, consent=consent
        )
        return JsonResponse(
            {
                "battle": battle_id(public_id),
                "winner": vote.winner,
                "model_a": vote.model_a_name,
                "model_b": vote.model_b_name,
                "counted": vote.counted,
                "excluded_reason": vote.excluded_reason,
            },
            status=201,
        )

    return voter_action(request, VoteForm, "votes", settings.ARENA_VOTES_PER_MINUTE, act)


@require_POST
def battle_report(request, public_id):
    """``POST /arena/battles/<id>/report/`` with ``reason``: the voter's battle is held back from publication
    until staff review it (arena.services.battle_report)."""

    def act(data, session_hash, ip_hash, consent):
        services.battle_report(public_id=public_id, session_hash=session_hash, reason=data["reason"])
        return JsonResponse({"battle": battle_id(public_id), "reported": True, "held": True}, status=201)

    return voter_action(request, ReportForm, "votes", settings.ARENA_VOTES_PER_MINUTE, act)


@require_GET
def releases_page(request):
    """``/arena/releases/``: every data release with its files, sizes and checksums; staff can cut a new one."""
    releases = list(DataRelease.objects.select_related("snapshot").order_by("-created_at", "-id"))
    return render(request, "arena/releases.html", {"releases": releases, "queued": request.GET.get("queued") == "1"})


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


@read_only
def battle_detail(request, public_id):
    key = arena_session_key(request)  # never creates a session
    state = None if key is None else battle_state(public_id=public_id, session_key=key)
    if state is None:
        return error_response("No such battle.", 404)
    return JsonResponse(state)
