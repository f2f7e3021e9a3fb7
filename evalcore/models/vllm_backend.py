"""``vllm``: vLLM's engine in-process on a GPU worker (skeleton; vllm is imported lazily)."""

from __future__ import annotations

from evalcore.models.base import Backend


class VLLMBackend(Backend):
    """vLLM's offline ``LLM`` engine (skeleton)."""

    name = "vllm"

    def __init__(self, *, path: str, **kwargs) -> None:
        try:
            import vllm  # noqa: F401
        except ModuleNotFoundError as exc:
            raise ValueError("the vllm backend needs the package 'vllm' (GPU workers only)") from exc
        self.path = path

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
