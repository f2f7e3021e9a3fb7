from django.contrib.auth import views as auth_views
from django.urls import path, register_converter

from leaderboard.accounts import views as accounts_views
from leaderboard.accounts.forms import EmailLoginForm
from leaderboard.arena_board import views as arena_views
from leaderboard.board import views as board_views
from leaderboard.judging import views as judging_views
from leaderboard.review import views as review_views
from leaderboard.runs import views as runs_views
from leaderboard.submissions import tus
from leaderboard.submissions import views as submissions_views


class PublicIdConverter:
    """A submission's opaque public id (``Submission.public_id``): 22 URL-safe characters."""

    regex = "[A-Za-z0-9_-]{22}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(PublicIdConverter, "pubid")

app_name = "leaderboard"
urlpatterns = [
    path("", board_views.leaderboard_board, name="index"),
    path("arena/", arena_views.arena_leaderboard, name="arena"),
    path("scores.csv", board_views.scores_csv, name="scores-csv"),
    path("scores.json", board_views.scores_json, name="scores-json"),
    path("all-scores.csv", board_views.all_scores_csv, name="all-scores-csv"),
    path("all-scores.json", board_views.all_scores_json, name="all-scores-json"),
    path("runs/<int:run_id>/", runs_views.run_protocol, name="run"),
    path("runs/<int:run_id>/samples/", runs_views.run_samples, name="run-samples"),
    path("runs/<int:run_id>/samples.jsonl", runs_views.run_samples_jsonl, name="run-samples-jsonl"),
    path("judges/", judging_views.judges, name="judges"),
    path("judges/<int:config_id>/", judging_views.judge_detail, name="judge"),
    path("judges/<int:config_id>/models/<int:model_id>/", judging_views.judge_judgments, name="judge-judgments"),
    path("judges/<int:config_id>/judgments.csv", judging_views.judgments_csv, name="judge-judgments-csv"),
    path("judges/<int:config_id>/judgments.jsonl", judging_views.judgments_jsonl, name="judge-judgments-jsonl"),
    path("compare/", board_views.compare, name="compare"),
    path("plotly-<str:version>.min.js", board_views.plotly_js, name="plotly-js"),
    path("accounts/", accounts_views.account, name="account"),
    path("accounts/signup/", accounts_views.signup, name="signup"),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=EmailLoginForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("submit/", submissions_views.submit, name="submit"),
    path("submissions/", submissions_views.submissions, name="submissions"),
    path("submissions/<pubid:public_id>/", submissions_views.submission_detail, name="submission"),
    path("submissions/<pubid:public_id>/publish/", submissions_views.submission_publish, name="submission-publish"),
    path("submissions/<pubid:public_id>/status.json", submissions_views.submission_status, name="submission-status"),
    path("uploads/", tus.uploads, name="uploads"),
    path("uploads/<pubid:upload_id>/", tus.upload, name="upload"),
    path("review/", review_views.review_queue, name="review"),
    path("review/<int:submission_id>/", review_views.review_submission, name="review-submission"),
    path("review/<int:submission_id>/scan/", review_views.review_scan, name="review-scan"),
    path("review/voters/<int:flag_id>/", review_views.review_voter, name="review-voter"),
    path("review/votes/<int:vote_id>/", review_views.review_vote, name="review-vote"),
    path("review/rescore/", review_views.rescore, name="review-rescore"),
]
