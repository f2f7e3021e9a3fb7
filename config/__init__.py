"""Podium's Django project: settings, URLs, ASGI entry point."""
