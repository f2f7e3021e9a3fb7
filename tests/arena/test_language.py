"""The prompt language guesser: right when sure, silent ("") when not."""

import pytest

from arena.categories.language import detect_language


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is the capital of France and why is it famous?", "en"),
        ("Wie ist das Wetter heute in der Stadt und was ist los?", "de"),
        ("Quelle est la capitale de la France et pourquoi est-elle célèbre ?", "fr"),
        ("¿Cuál es la capital de España y por qué es famosa para los turistas?", "es"),
        ("Какая столица Франции?", "ru"),
        ("日本の首都はどこですか", "ja"),
        ("中国的首都是哪里", "zh"),
        ("한국의 수도는 어디입니까", "ko"),
        ("", ""),
        ("12345 !!!", ""),
        ("ok", ""),
    ],
)
def test_detect_language(text, expected):
    assert detect_language(text) == expected


@pytest.mark.parametrize(
    "prompt",
    [
        "Write a Python function that checks whether a string is a palindrome.",
        "Give me a name for a coffee shop, one word only.",
        "Write a limerick about a cat who codes.",
        "Write a dialogue between a robot and a gardener, four lines.",
    ],
)
def test_english_prompts_with_several_a_are_not_portuguese(prompt):
    """Prompts voters typed in a walk-through: their "a"s outnumbered the English words the guesser knew."""
    assert detect_language(prompt) == "en"
