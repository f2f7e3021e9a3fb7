"""Which of a tokenizer's chat templates renders benchmark prompts (``--apply-chat-template [NAME]``).

A tokenizer's ``chat_template`` is one Jinja template, or a dict of named ones (``{"default": ...,
"tool_use": ...}``). The choice follows lm-evaluation-harness 0.4.13 (``lm_eval/api/model.py``,
``TemplateLM.chat_template``):

- a dict and a name: that template; a name the dict lacks is refused, listing the names it has;
- a dict and no name: its ``"default"`` template; without one, refused (listing the names);
- one template: that template, even when a name is given (lm-eval warns and does the same).

lm-eval records the chosen template (its text and SHA-256) but its ``HFLM.apply_chat_template`` then
renders with the tokenizer's default; Podium renders with the template it chose and records.
"""

from __future__ import annotations

import hashlib
import warnings

NO_TEMPLATE = "this model's tokenizer has no chat template (tokenizer_config.json chat_template)"
NAMED_TEMPLATE_REFUSED = (
    "openai-chat: the endpoint applies its own chat template, so --apply-chat-template cannot choose one by "
    "name (lm-eval 0.4.13 ignores the name there); start the server with the template you want (vLLM: "
    "--chat-template) and pass --apply-chat-template without a name, or leave it out"
)


def select_chat_template(tokenizer, name: str | None = None) -> str:
    """The template text ``tokenizer.apply_chat_template(..., chat_template=...)`` should render with.

    Raises ValueError for a tokenizer without a template, a name its templates lack, or several
    templates with no ``"default"`` and no name.
    """
    return _choose(tokenizer, name)[0]


def render_chat(tokenizer, messages: list[dict], name: str | None = None) -> str:
    """``messages`` (validated) rendered with the tokenizer's template chosen by ``name``, ending with
    the assistant's turn: a final assistant message (a task's ``gen_prefix``) is continued rather than
    closed, as lm-eval's ``HFLM.apply_chat_template`` does; otherwise the generation prompt is added.
    Every backend that renders chat prompts here (hf, vllm) calls this, so they agree."""
    template = select_chat_template(tokenizer, name)
    if messages and messages[-1]["role"] == "assistant":
        return tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True,
                                             chat_template=template)  # fmt: skip
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, chat_template=template)


def chat_template_choice(tokenizer, name: str | None = None) -> dict:
    """What a protocol records of the choice: the name asked for, the template used and its SHA-256.

    Warns (once per name) when a name is given for a tokenizer with a single template, which is used.
    """
    text, used = _choose(tokenizer, name)
    if name is not None and used is None:
        warnings.warn(
            f"--apply-chat-template {name!r}: the tokenizer has one chat template, not named ones; it is used "
            f"(as lm-eval 0.4.13 does)",
            stacklevel=2,
        )
    return {
        "template_name": name,
        "template_used": used if used is not None else "the tokenizer's only template",
        "template_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }


def _choose(tokenizer, name: str | None) -> tuple[str, str | None]:
    """(template text, its name in the tokenizer's dict, or None for a tokenizer with one template)."""
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"a chat template name must be a non-empty string, got {name!r}")
    templates = getattr(tokenizer, "chat_template", None)
    if not templates:
        raise ValueError(NO_TEMPLATE)
    if not isinstance(templates, dict):
        return str(templates), None
    names = sorted(templates)
    if name is None:
        if "default" in templates:
            return templates["default"], "default"
        raise ValueError(
            f"this model's tokenizer has several chat templates and none is named 'default': choose one with "
            f"--apply-chat-template NAME; its templates are {names}"
        )
    if name not in templates:
        raise ValueError(
            f"--apply-chat-template {name[:80]!r}: the tokenizer has no chat template of that name; "
            f"its templates are {names}"
        )
    return templates[name], name
