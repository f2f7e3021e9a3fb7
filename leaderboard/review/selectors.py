"""Reads for the admins' review queue (flagged submissions, flagged voters, identity-revealing answers,
the audit log), a submission's audit log, and the tasks that can be re-scored."""

from __future__ import annotations

from django.db.models import Count, Prefetch

from arena.models import BattleHold, Turn, Vote, VoterFlag
from arena.votes.filters import IDENTITY_REVEALED
from leaderboard.models import EvaluationRun, ReviewAction, Submission

QUEUE_LIMIT = 200  # items of each kind shown at once (oldest first); the rest wait their turn
LOG_LIMIT = 50
ANSWER_CHARS = 600


def submissions_flagged() -> list[Submission]:
    """Submissions waiting for an admin's decision, oldest first (the queue's order)."""
    return list(
        Submission.objects.filter(review_state=Submission.Review.FLAGGED)
        .select_related("owner")
        .order_by("created_at", "id")
    )


def submission_for_review(public_id: str) -> Submission | None:
    return Submission.objects.select_related("owner").filter(public_id=public_id).first()


def submission_for_review_by_row(submission_id: int) -> Submission | None:
    """By the row number that earlier versions' review URLs carried."""
    return Submission.objects.filter(pk=submission_id).first()


def submission_review_log(submission: Submission, *, with_admins: bool = False) -> list[dict]:
    """The audit log, newest first: action, comment, date (and who, for staff viewers)."""
    rows = (
        ReviewAction.objects.filter(submission=submission)
        .select_related("admin")
        .order_by("-created_at", "-id")
    )
    return [
        {
            "action": row.get_action_display(), "comment": row.comment, "created_at": row.created_at,
            "admin": (row.admin.get_username() if row.admin else "system") if with_admins else "",
            "system": row.admin_id is None,
        }
        for row in rows
    ]  # fmt: skip


def rescore_tasks() -> list[tuple[str, int]]:
    """(task, finished runs) for every task with a stored run, by name."""
    rows = (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.FINISHED)
        .values("task")
        .annotate(n=Count("id"))
        .order_by("task")
    )
    return [(row["task"], row["n"]) for row in rows]


def voters_flagged(limit: int = QUEUE_LIMIT) -> list[VoterFlag]:
    """Flagged voters waiting for a decision, oldest first."""
    return list(VoterFlag.objects.filter(status=VoterFlag.Status.PENDING).order_by("created_at", "id")[:limit])


def voters_flagged_count() -> int:
    return VoterFlag.objects.filter(status=VoterFlag.Status.PENDING).count()


def identity_votes_pending(limit: int = QUEUE_LIMIT) -> list[dict]:
    """Votes left out because an answer named a model and not yet decided, oldest first: the models,
    the verdict and the answers (shortened), so an admin can see what gave the model away."""
    votes = (
        Vote.objects.filter(excluded_reason=IDENTITY_REVEALED)
        .select_related("model_a", "model_b", "battle")
        .prefetch_related(Prefetch("battle__turns", queryset=Turn.objects.order_by("index")))
        .order_by("created_at", "id")[:limit]
    )
    rows = []
    for vote in votes:
        turns = list(vote.battle.turns.all())
        rows.append(
            {
                "vote": vote, "model_a": vote.model_a.name, "model_b": vote.model_b.name,
                "winner": vote.get_winner_display(),
                "turns": [
                    {"prompt": t.prompt[:ANSWER_CHARS], "answer_a": t.answer_a[:ANSWER_CHARS],
                     "answer_b": t.answer_b[:ANSWER_CHARS]}
                    for t in turns
                ],
            }
        )  # fmt: skip
    return rows


def identity_votes_pending_count() -> int:
    return Vote.objects.filter(excluded_reason=IDENTITY_REVEALED).count()


def battles_held(limit: int = QUEUE_LIMIT) -> list[dict]:
    """Battles held back from publication and waiting for staff, oldest first: why (the moderation score
    or the voters' reasons), the models, and the turns as typed (staff see the original text)."""
    holds = (
        BattleHold.objects.filter(status=BattleHold.Status.HELD)
        .select_related("battle__model_a", "battle__model_b")
        .prefetch_related(Prefetch("battle__turns", queryset=Turn.objects.order_by("index")))
        .order_by("created_at", "id")[:limit]
    )
    rows = []
    for hold in holds:
        battle = hold.battle
        reports = [r.get("reason", "") for r in hold.details.get("reports", [])]
        moderation = hold.details.get("moderation") or battle.moderation or {}
        rows.append(
            {
                "hold": hold, "reason": hold.get_reason_display(), "reports": reports,
                "score": moderation.get("score"), "model_a": battle.model_a.name, "model_b": battle.model_b.name,
                "turns": [
                    {"prompt": t.prompt[:ANSWER_CHARS], "answer_a": t.answer_a[:ANSWER_CHARS],
                     "answer_b": t.answer_b[:ANSWER_CHARS]}
                    for t in battle.turns.all()
                ],
            }
        )  # fmt: skip
    return rows


def battles_held_count() -> int:
    return BattleHold.objects.filter(status=BattleHold.Status.HELD).count()


def _target(entry: ReviewAction) -> str:
    if entry.kind == ReviewAction.Target.VOTER and entry.voter_flag is not None:
        return f"{entry.voter_flag.get_kind_display()} {entry.voter_flag.voter_hash[:12]}"
    if entry.kind == ReviewAction.Target.BATTLE and entry.battle_hold is not None:
        return f"battle #{entry.battle_hold.battle_id} ({entry.battle_hold.get_reason_display().lower()})"
    if entry.kind == ReviewAction.Target.IDENTITY and entry.vote is not None:
        return f"vote #{entry.vote_id} ({entry.vote.model_a.name} vs {entry.vote.model_b.name})"
    return str(entry.submission) if entry.submission is not None else "-"


def review_log(limit: int = LOG_LIMIT) -> list[dict]:
    """The latest decisions of every kind, newest first: when, who, kind, item, action, why."""
    rows = (
        ReviewAction.objects.select_related(
            "admin", "submission", "voter_flag", "vote__model_a", "vote__model_b", "battle_hold"
        )
        .order_by("-created_at", "-id")[:limit]
    )
    return [
        {
            "created_at": row.created_at, "admin": row.admin.get_username() if row.admin else "system", "kind": row.get_kind_display(),
            "target": _target(row), "action": row.get_action_display(), "comment": row.comment,
        }
        for row in rows
    ]  # fmt: skip
