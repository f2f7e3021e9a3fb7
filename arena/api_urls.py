"""The arena's API under ``/api/``: streamed vote exports and the read-only REST endpoints."""

from django.urls import path

from arena import api

app_name = "arena-api"
urlpatterns = [
    path("votes.csv", api.votes_csv, name="votes-csv"),
    path("votes.jsonl", api.votes_jsonl, name="votes-jsonl"),
    path("battles/", api.BattleList.as_view(), name="battle-list"),
    path("battles/<uuid:public_id>/", api.BattleDetail.as_view(), name="battle-detail"),
    path("snapshots/", api.SnapshotList.as_view(), name="snapshot-list"),
    path("snapshots/<int:pk>/", api.SnapshotDetail.as_view(), name="snapshot-detail"),
    path("ratings/", api.RatingsView.as_view(), name="ratings"),
]
