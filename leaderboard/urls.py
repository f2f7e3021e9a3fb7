from django.urls import path

from leaderboard import views, views_arena

app_name = "leaderboard"
urlpatterns = [
    path("", views.leaderboard_index, name="index"),
    path("arena/", views_arena.arena_leaderboard, name="arena"),
    path("plotly-<str:version>.min.js", views_arena.plotly_js, name="plotly-js"),
]
