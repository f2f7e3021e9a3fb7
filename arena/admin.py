from django.contrib import admin

from arena.models import LanguageModel, PromptTag, VoteCategorization, VoterFlag


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    """Edits go through the model's validation (a retirement needs its reason; licence, cutoff and link
    have fixed forms), so a bad value is an error on the form, never a half-saved row."""

    list_display = ("name", "organisation", "licence", "open_weights", "in_arena", "public", "retired_at")
    list_filter = ("open_weights", "in_arena", "public")
    search_fields = ("name", "family", "maker", "organisation", "licence")


@admin.register(VoterFlag)
class VoterFlagAdmin(admin.ModelAdmin):
    """Read-only: flags are decided on the staff review queue (/leaderboard/review/), which keeps the
    audit log (leaderboard's Review actions)."""

    list_display = ("created_at", "kind", "voter_hash", "votes", "p_value", "status", "decided_at")
    list_filter = ("kind", "status")
    search_fields = ("voter_hash",)
    readonly_fields = ("kind", "voter_hash", "votes", "p_value", "statistics", "status", "created_at", "decided_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(PromptTag)
class PromptTagAdmin(ReadOnlyAdmin):
    """Read-only: tags are the tagger's (docs/categories.md); staff check them on
    /leaderboard/review/categories/, which shows only published prompts, redacted. No prompt text here."""

    list_display = ("created_at", "category", "value", "score", "protocol", "protocol_version", "tagger_name")
    list_filter = ("category", "value", "protocol", "protocol_version")
    search_fields = ("prompt_sha256", "tagger")


@admin.register(VoteCategorization)
class VoteCategorizationAdmin(ReadOnlyAdmin):
    """Read-only: the tagging queue's state per vote (pending, done, failed with the error)."""

    list_display = ("vote_id", "status", "attempts", "updated_at", "error")
    list_filter = ("status",)
    search_fields = ("prompt_sha256",)
