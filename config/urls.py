from django.contrib import admin
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from common.api_errors import api_route_missing
from common.health import healthz
from common.observability import metrics_view

handler404 = "common.api_errors.not_found"
handler500 = "common.outages.server_error"  # a 503 with Retry-After while PostgreSQL or Redis restarts



def favicon(request):
    """``/favicon.ico``, which browsers ask for on pages without an icon link (the admin, JSON): the static icon."""
    return redirect(static("favicon.ico"))


urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("favicon.ico", favicon, name="favicon"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("arena/", include("arena.urls")),
    path("leaderboard/", include("leaderboard.urls")),
    path("api/", include("arena.api_urls")),
    path("api/", include("leaderboard.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The schema, browsable: Swagger UI from local static files (offline). Not Redoc: its bundle always
    # loads its maker's logo from cdn.redoc.ly.
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Last: any other /api/ URL is a JSON 404 also with DEBUG on (handler404 serves only with it off, and
    # Django's debug page would list every URL pattern of the site).
    re_path(r"^api/", api_route_missing),
]
