from django.contrib.auth import views as auth_views
from django.urls import path

from common.public_ids import register_converters
from leaderboard.accounts import views as accounts_views
from leaderboard.accounts.forms import EmailLoginForm
from leaderboard.arena_board import views as arena_views
from leaderboard.board import views as board_views
from leaderboard.judging import views as judging_views
from leaderboard.review import tag_views
from leaderboard.review import views as review_views
from leaderboard.rewards import views as rewards_views
from leaderboard.runs import views as runs_views
from leaderboard.submissions import tus
from leaderboard.submissions import views as submissions_views

register_converters()

app_name = "leaderboard"
urlpatterns = [
    path("", board_views.leaderboard_board, name="index"),
    path("arena/", arena_views.arena_leaderboard, name="arena"),
    path("arena/retired/", arena_views.arena_retired, name="arena-retired"),
    path("arena/models/<path:name>/", arena_views.arena_model, name="arena-model"),
    path("scores.csv", board_views.scores_csv, name="scores-csv"),
    path("scores.json", board_views.scores_json, name="scores-json"),
    path("all-scores.csv", board_views.all_scores_csv, name="all-scores-csv"),
    path("all-scores.json", board_views.all_scores_json, name="all-scores-json"),
    path("runs/<rowid:run_id>/", runs_views.run_protocol, name="run"),
    path("runs/<rowid:run_id>/samples/", runs_views.run_samples, name="run-samples"),
    path("runs/<rowid:run_id>/samples.jsonl", runs_views.run_samples_jsonl, name="run-samples-jsonl"),
    path("judges/", judging_views.judges, name="judges"),
    path("judges/<rowid:config_id>/", judging_views.judge_detail, name="judge"),
    path("judges/panels/<rowid:panel_id>/", judging_views.panel_detail, name="judge-panel"),
    path("judges/<rowid:config_id>/models/<rowid:model_id>/", judging_views.judge_judgments, name="judge-judgments"),
    path("judges/<rowid:config_id>/judgments.csv", judging_views.judgments_csv, name="judge-judgments-csv"),
    path("judges/<rowid:config_id>/judgments.jsonl", judging_views.judgments_jsonl, name="judge-judgments-jsonl"),
    path("rewards/", rewards_views.reward_models, name="rewards"),
    path("rewards/reward-models.csv", rewards_views.reward_models_csv, name="rewards-csv"),
    path("rewards/reward-models.json", rewards_views.reward_models_json, name="rewards-json"),
    path("rewards/<rowid:result_id>/report.json", rewards_views.reward_result_report, name="reward-report"),
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
    path("submissions/<pubid:public_id>/progress.json", submissions_views.submission_progress,
         name="submission-progress"),
    path("uploads/", tus.uploads, name="uploads"),
    path("uploads/<pubid:upload_id>/", tus.upload, name="upload"),
    path("review/", review_views.review_queue, name="review"),
    path("review/<pubid:public_id>/", review_views.review_submission, name="review-submission"),
    path("review/<pubid:public_id>/scan/", review_views.review_scan, name="review-scan"),
    path("review/<rowid:submission_id>/", review_views.review_by_row),  # earlier URLs: redirect
    path("review/<rowid:submission_id>/scan/", review_views.review_by_row, {"scan": True}),
    path("review/voters/<rowid:flag_id>/", review_views.review_voter, name="review-voter"),
    path("review/votes/<rowid:vote_id>/", review_views.review_vote, name="review-vote"),
    path("review/battles/<rowid:hold_id>/", review_views.review_battle, name="review-battle"),
    path("review/rescore/", review_views.rescore, name="review-rescore"),
    path("review/categories/", tag_views.review_categories, name="review-categories"),
]
