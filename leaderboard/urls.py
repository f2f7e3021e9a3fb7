from django.contrib.auth import views as auth_views
from django.urls import path

from leaderboard import views, views_accounts, views_arena, views_board, views_review, views_submissions
from leaderboard.forms import EmailLoginForm

app_name = "leaderboard"
urlpatterns = [
    path("", views.leaderboard_index, name="index"),
    path("arena/", views_arena.arena_leaderboard, name="arena"),
    path("scores.csv", views_board.scores_csv, name="scores-csv"),
    path("scores.json", views_board.scores_json, name="scores-json"),
    path("all-scores.csv", views_board.all_scores_csv, name="all-scores-csv"),
    path("all-scores.json", views_board.all_scores_json, name="all-scores-json"),
    path("runs/<int:run_id>/", views_board.run_protocol, name="run"),
    path("runs/<int:run_id>/samples/", views_board.run_samples, name="run-samples"),
    path("runs/<int:run_id>/samples.jsonl", views_board.run_samples_jsonl, name="run-samples-jsonl"),
    path("compare/", views_board.compare, name="compare"),
    path("plotly-<str:version>.min.js", views_arena.plotly_js, name="plotly-js"),
    path("accounts/signup/", views_accounts.signup, name="signup"),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=EmailLoginForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("submit/", views_submissions.submit, name="submit"),
    path("submissions/", views_submissions.submissions, name="submissions"),
    path("submissions/<int:submission_id>/", views_submissions.submission_detail, name="submission"),
    path("submissions/<int:submission_id>/publish/", views_submissions.submission_publish, name="submission-publish"),
    path("submissions/<int:submission_id>/status.json", views_submissions.submission_status, name="submission-status"),
    path("review/", views_review.review_queue, name="review"),
    path("review/<int:submission_id>/", views_review.review_submission, name="review-submission"),
    path("review/rescore/", views_review.rescore, name="review-rescore"),
]
