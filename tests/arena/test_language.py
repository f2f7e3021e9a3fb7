"""The prompt language guesser: right when sure, silent ("") when not."""

import pytest

from arena.language import detect_language


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
