from django.urls import path

from arena import views
from common.public_ids import legacy_route, register_converters

register_converters()

app_name = "arena"
urlpatterns = [
    path("", views.arena_index, name="index"),
    path("terms/", views.arena_terms, name="terms"),
    path("consent/", views.consent_create, name="consent"),
    path("battles/", views.battle_start, name="battle-start"),
    path("battles/<battleid:public_id>/", views.battle_detail, name="battle-detail"),
    path("battles/<battleid:public_id>/turns/", views.turn_create, name="turn-create"),
    path("battles/<battleid:public_id>/vote/", views.vote_create, name="vote-create"),
    path("battles/<battleid:public_id>/report/", views.battle_report, name="battle-report"),
    # Earlier URLs named a battle by its dashed UUID: they redirect (common.public_ids).
    path("battles/<uuid:public_id>/", legacy_route("arena:battle-detail")),
    path("battles/<uuid:public_id>/turns/", legacy_route("arena:turn-create")),
    path("battles/<uuid:public_id>/vote/", legacy_route("arena:vote-create")),
    path("battles/<uuid:public_id>/report/", legacy_route("arena:battle-report")),
    path("releases/", views.releases_page, name="releases"),
    path("releases/new/", views.release_create, name="release-create"),
    path("releases/<slug:version>/<path:name>", views.release_file, name="release-file"),
]
