from django.urls import path

from arena.play import views
from arena.publication import views as publication_views
from common.public_ids import legacy_route, register_converters

register_converters()

app_name = "arena"
urlpatterns = [
    path("", views.arena_index, name="index"),
    path("terms/", publication_views.arena_terms, name="terms"),
    path("consent/", publication_views.consent_create, name="consent"),
    path("battles/", views.battle_start, name="battle-start"),
    path("battles/<battleid:public_id>/", views.battle_detail, name="battle-detail"),
    path("battles/<battleid:public_id>/turns/", views.turn_create, name="turn-create"),
    path("battles/<battleid:public_id>/vote/", views.vote_create, name="vote-create"),
    path("battles/<battleid:public_id>/report/", publication_views.battle_report, name="battle-report"),
    # Earlier URLs named a battle by its dashed UUID: they redirect (common.public_ids).
    path("battles/<uuid:public_id>/", legacy_route("arena:battle-detail")),
    path("battles/<uuid:public_id>/turns/", legacy_route("arena:turn-create")),
    path("battles/<uuid:public_id>/vote/", legacy_route("arena:vote-create")),
    path("battles/<uuid:public_id>/report/", legacy_route("arena:battle-report")),
    path("releases/", publication_views.releases_page, name="releases"),
    path("releases/new/", publication_views.release_create, name="release-create"),
    path("releases/<slug:version>/<path:name>", publication_views.release_file, name="release-file"),
]
