from django.urls import path

from arena import views

app_name = "arena"
urlpatterns = [
    path("", views.arena_index, name="index"),
]
