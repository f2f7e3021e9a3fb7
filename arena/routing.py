from django.urls import path

from arena import consumers

websocket_urlpatterns = [
    path("ws/ping/", consumers.PingConsumer.as_asgi()),
]
