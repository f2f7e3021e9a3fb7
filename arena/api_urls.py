"""The arena's API under ``/api/``: streamed vote exports and the read-only REST endpoints."""

from django.urls import path

from arena.catalogue import api as catalogue_api
from arena.publication import api as publication_api
from arena.ratings import api as ratings_api
from arena.votes import api as votes_api
from common.public_ids import legacy_route, register_converters

register_converters()

app_name = "arena-api"
urlpatterns = [
    path("votes.csv", votes_api.VotesCsv.as_view(), name="votes-csv"),
    path("votes.jsonl", votes_api.VotesJsonLines.as_view(), name="votes-jsonl"),
    path("battles/", publication_api.BattleList.as_view(), name="battle-list"),
    path("battles/<battleid:public_id>/", publication_api.BattleDetail.as_view(), name="battle-detail"),
    path("battles/<uuid:public_id>/", legacy_route("arena-api:battle-detail")),  # the dashed form, earlier
    path("snapshots/", ratings_api.SnapshotList.as_view(), name="snapshot-list"),
    path("snapshots/<int:pk>/", ratings_api.SnapshotDetail.as_view(), name="snapshot-detail"),
    path("ratings/", ratings_api.RatingsView.as_view(), name="ratings"),
    path("ratings/live/", ratings_api.LiveRatingsView.as_view(), name="ratings-live"),
    path("models/", catalogue_api.ModelList.as_view(), name="models"),
    path("models.csv", catalogue_api.ModelCsv.as_view(), name="models-csv"),
]
