"""The battle's page and endpoints: the arena page, starting a battle, a turn, the vote, a battle's state."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from arena.play import battles
from arena.play.endpoints import error_response, voter_action
from arena.play.forms import PromptForm, VoteForm
from arena.play.identity import address_hash, arena_session_key, session_key
from arena.play.ratelimit import RateLimited, hit_address
from arena.play.selectors import battle_state
from arena.publication.consent import consent_of, publish_when, terms_version
from arena.votes import casting
from common.http import read_only
from common.public_ids import battle_id


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
            "publish_when": publish_when(),
        },
    )


@require_POST
def battle_start(request):
    def act(data, session_hash, ip_hash, consent):
        battle = battles.battle_create(
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
        turn = battles.turn_add(public_id=public_id, prompt=data["prompt"], session_hash=session_hash)
        return JsonResponse({"battle": battle_id(public_id), "turn": turn.index}, status=201)

    return voter_action(request, PromptForm, "battles", settings.ARENA_BATTLES_PER_MINUTE, act)


@require_POST
def vote_create(request, public_id):
    def act(data, session_hash, ip_hash, consent):
        vote = casting.vote_cast(
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


@read_only
def battle_detail(request, public_id):
    key = arena_session_key(request)  # never creates a session
    state = None if key is None else battle_state(public_id=public_id, session_key=key)
    if state is None:
        return error_response("No such battle.", 404)
    return JsonResponse(state)
