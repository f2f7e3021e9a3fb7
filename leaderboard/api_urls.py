"""The leaderboard's API under ``/api/`` (beside the arena's, in the same OpenAPI schema)."""

from django.urls import path, re_path

from common.public_ids import register_converters
from leaderboard.board import api
from leaderboard.judging import api as judging_api
from leaderboard.submissions import api as submissions_api


class SubmissionCollection(submissions_api.SubmissionCreateMixin, api.SubmissionList):
    """GET: the evaluated models (public); POST: a new submission (token or session)."""


register_converters()
app_name = "leaderboard-api"
urlpatterns = [
    path("submissions/", SubmissionCollection.as_view(), name="submission-list"),
    re_path(r"^submissions/(?P<public_id>[A-Za-z0-9_-]{22})/$", submissions_api.SubmissionDetail.as_view(),
            name="submission-detail"),  # fmt: skip
    path("submissions/<rowid:row_id>/", submissions_api.SubmissionByRow.as_view()),  # earlier ids: redirect
    path("scores/", api.ScoreList.as_view(), name="score-list"),
    path("runs/", api.RunList.as_view(), name="run-list"),
    path("runs/<int:pk>/", api.RunDetail.as_view(), name="run-detail"),
    path("runs/<int:pk>/samples/", api.SampleList.as_view(), name="sample-list"),
    path("judges/", judging_api.JudgeList.as_view(), name="judge-list"),
    path("judges/<int:pk>/", judging_api.JudgeDetail.as_view(), name="judge-detail"),
    path("judges/<int:pk>/judgments/", judging_api.JudgmentList.as_view(), name="judgment-list"),
    path("judges/<int:pk>/grades/", judging_api.GradeList.as_view(), name="grade-list"),
    path("judges/panels/", judging_api.PanelList.as_view(), name="panel-list"),
    path("judges/panels/<int:pk>/", judging_api.PanelDetail.as_view(), name="panel-detail"),
]
