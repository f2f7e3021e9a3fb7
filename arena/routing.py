from django.urls import path

from arena import consumers

websocket_urlpatterns = [
    path("ws/ping/", consumers.PingConsumer.as_asgi()),
    path("ws/arena/battles/<uuid:public_id>/", consumers.BattleConsumer.as_asgi()),
]
