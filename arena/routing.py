from django.urls import path

from arena.play import consumers
from common.public_ids import register_converters

register_converters()

websocket_urlpatterns = [
    path("ws/ping/", consumers.PingConsumer.as_asgi()),
    path("ws/arena/battles/<anybattleid:public_id>/", consumers.BattleConsumer.as_asgi()),
]
