"""Routing: a task goes to the queue it declared where it is defined, unless its sender names one."""

from __future__ import annotations

from celery import Celery

from workers.queues import EVALUATE, JUDGE, route_by_declared_queue


def test_router_uses_the_declared_queue_and_the_sender_wins():
    app = Celery("route-test", set_as_current=False)
    app.conf.update(task_routes=(route_by_declared_queue,), task_default_queue="default")

    @app.task(name="t.declared", declared_queue=EVALUATE)
    def declared():
        return None

    @app.task(name="t.plain")
    def plain():
        return None

    router = app.amqp.router
    assert router.route({}, "t.declared", (), {}, task_type=declared)["queue"].name == EVALUATE
    assert router.route({"queue": JUDGE}, "t.declared", (), {}, task_type=declared)["queue"].name == JUDGE
    assert router.route({}, "t.plain", (), {}, task_type=plain)["queue"].name == "default"
    assert router.route({}, "t.unknown", (), {})["queue"].name == "default"
