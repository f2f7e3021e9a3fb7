"""``openai``: any OpenAI-compatible HTTP endpoint (vLLM server, llama.cpp server, hosted APIs).

Work in progress: the full client (streaming, retries, prompt log-probabilities) follows.
"""

from __future__ import annotations

from evalcore.models.base import Backend


class OpenAIBackend(Backend):
    """An OpenAI-compatible chat and completions endpoint (skeleton)."""

    name = "openai"

    def __init__(self, *, base_url: str, model: str | None = None, **kwargs) -> None:
        if "api_key" in kwargs:
            raise ValueError("never pass an API key directly: name the environment variable with api_key_env=")
        self.base_url = base_url
        self.model = model

    @property
    def identity(self):
        raise NotImplementedError

    def loglikelihood(self, requests, *, progress=None):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, *, progress=None):
        raise NotImplementedError

    def generate_until(self, requests, *, progress=None):
        raise NotImplementedError

    def stream_chat(self, messages, params=None):
        raise NotImplementedError
