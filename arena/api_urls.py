"""The arena's API under ``/api/``: streamed vote exports and the read-only REST endpoints."""

from django.urls import path

from arena import api, api_models
from common.public_ids import legacy_route, register_converters

register_converters()

app_name = "arena-api"
urlpatterns = [
    path("votes.csv", api.VotesCsv.as_view(), name="votes-csv"),
    path("votes.jsonl", api.VotesJsonLines.as_view(), name="votes-jsonl"),
    path("battles/", api.BattleList.as_view(), name="battle-list"),
    path("battles/<battleid:public_id>/", api.BattleDetail.as_view(), name="battle-detail"),
    path("battles/<uuid:public_id>/", legacy_route("arena-api:battle-detail")),  # the dashed form, earlier
    path("snapshots/", api.SnapshotList.as_view(), name="snapshot-list"),
    path("snapshots/<int:pk>/", api.SnapshotDetail.as_view(), name="snapshot-detail"),
    path("ratings/", api.RatingsView.as_view(), name="ratings"),
    path("ratings/live/", api.LiveRatingsView.as_view(), name="ratings-live"),
    path("models/", api_models.ModelList.as_view(), name="models"),
    path("models.csv", api_models.ModelCsv.as_view(), name="models-csv"),
]
