"""Secrets as voters paste and type them (issue 48): gitleaks' rule set, passwords and keys in sentences in
several languages, bare keys, URLs and service addresses; and the identifiers that only look like phone
or card numbers, left alone."""

from __future__ import annotations

import random
import string

import pytest

from evalcore.privacy import gitleaks, redact
from evalcore.privacy.redact import REDACTOR_VERSION, redact_spans

RNG = random.Random(48)
ALNUM = string.ascii_letters + string.digits


def token(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def redacted(text: str) -> str:
    return redact.redact(text).text


def test_gitleaks_rule_set_is_read_whole_from_the_package():
    compiled, allow = gitleaks.rules()
    assert len(compiled) >= gitleaks.MIN_RULES and allow[0].regexes
    assert "gitleaks-8.30.1" in REDACTOR_VERSION
    ids = {rule.id for rule in compiled}
    assert {"npm-access-token", "slack-app-token", "digitalocean-pat", "twilio-api-key", "github-pat"} <= ids


def test_a_binary_without_the_rule_set_is_refused(tmp_path):
    fake = tmp_path / "gitleaks"
    fake.write_bytes(b"\x7fELF" + b"\x00" * 64 + b'title = "gitleaks config"\n[[rules]]\nid = "x"\n\x00')
    with pytest.raises(gitleaks.GitleaksUnavailable, match="expected at least"):
        gitleaks.embedded_config(fake)
    fake.write_bytes(b"nothing here")
    with pytest.raises(gitleaks.GitleaksUnavailable, match="no embedded default configuration"):
        gitleaks.embedded_config(fake)


def test_redaction_fails_closed_when_a_detector_breaks(monkeypatch):
    def broken(text):
        raise gitleaks.GitleaksUnavailable("no rules")

    monkeypatch.setattr(redact, "gitleaks_spans", broken)
    assert redacted("my key AKIAIOSFODNN7EXAMPLE") == redact.FAILED


TOKENS = {
    "aws secret access key, bare": lambda: token(ALNUM, 18) + "/" + token(ALNUM, 10) + "+" + token(ALNUM, 10),
    "npm": lambda: "npm_" + token(string.ascii_lowercase + string.digits, 36),
    "slack app": lambda: f"xapp-1-A{token(string.ascii_uppercase + string.digits, 10)}-{token(string.digits, 13)}-"
    + token("0123456789abcdef", 64),
    "digitalocean": lambda: "dop_v1_" + token("0123456789abcdef", 64),
    "github fine-grained": lambda: "github_pat_" + token(ALNUM, 22) + "_" + token(ALNUM, 59),
    "gitlab": lambda: "glpat-" + token(ALNUM + "-_", 20),
    "stripe restricted": lambda: "rk_live_" + token(ALNUM, 24),
    "sendgrid": lambda: "SG." + token(ALNUM + "-_", 22) + "." + token(ALNUM + "-_", 43),
    "shopify": lambda: "shpat_" + token("0123456789abcdef", 32),
    "anthropic": lambda: "sk-ant-api03-" + token(ALNUM + "-_", 93) + "AA",
    "openai project": lambda: "sk-proj-" + token(ALNUM + "-_", 64),
    "pypi": lambda: "pypi-AgEIcHlwaS5vcmc" + token(ALNUM + "-_", 60),
}  # fmt: skip
SENTENCES = (
    "here is my key {v} please help",
    "{v}",
    "Mein Schlüssel: {v}",
    "voilà ma clé {v}, merci",
    "I exported {v} in my shell and it still fails",
)


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_token_formats_are_redacted_in_sentences(kind):
    for template in SENTENCES:
        value = TOKENS[kind]()
        text = template.format(v=value)
        out = redacted(text)
        assert value not in out and "<SECRET>" in out, (kind, text, out)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my password is hunter2", "hunter2"),
        ("pw: Sommer2024!", "Sommer2024"),
        ("the wifi password = blue-Falcon-77", "blue-Falcon-77"),
        ("Mein Passwort ist Sommer2024, bitte nicht weitersagen", "Sommer2024"),
        ("mot de passe : chat-noir-42", "chat-noir-42"),
        ("mi contraseña es Perro123", "Perro123"),
        ("minha senha é Gato2023!", "Gato2023"),
        ("mijn wachtwoord is Fiets99x", "Fiets99x"),
        ("moje hasło to Kot2024#", "Kot2024#"),
        ("şifrem: Deniz1907", "Deniz1907"),
        ("мой пароль qwerty123", "qwerty123"),
        ("我的密码是abc12345", "abc12345"),
        ("パスワードはSakura2024です", "Sakura2024"),
        ("twilio auth token 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
        ("my AWS secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        ("API-Schlüssel lautet Xk29fLq83ZmR0pWv", "Xk29fLq83ZmR0pWv"),
        ("Authorization: Bearer eYk2mQ9xLw4tR7zP1vB8nC3", "eYk2mQ9xLw4tR7zP1vB8nC3"),
        ("GET https://api.example.com/v1/items?accessToken=Zt7Qm2Lx9Kp4&page=2", "Zt7Qm2Lx9Kp4"),
        ("curl 'https://s3.example.com/f?X-Amz-Signature=deadbeef0123&X-Amz-Date=1'", "deadbeef0123"),
        ("https://hooks.example.com/x?auth_token=abc123XYZ789", "abc123XYZ789"),
        ("DATABASE_URL=postgres://app@db.internal:5432/prod", "db.internal"),
        ("broker at amqp://guest:guest@rabbit.local:5672//", "rabbit.local"),
        ("jdbc:mysql://sql.internal:3306/shop?user=root", "sql.internal"),
        ("mongodb+srv://cluster0.ab1cd.mongodb.net/test", "cluster0"),
        ("my key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx2b3Zlc3RoZXNlY3JldGtleWZvcnRlc3Rpbmdvbmx5 me@laptop",
         "AAAAC3NzaC1lZDI1NTE5AAAAIGx2b3Zlc3RoZXNlY3JldGtleWZvcnRlc3Rpbmdvbmx5"),
    ],
)  # fmt: skip
def test_secrets_typed_in_a_sentence_are_redacted(text, secret):
    out = redacted(text)
    assert secret not in out, (text, out)


LOOKALIKES = [
    "Chrome 124.0.6367.91 crashes on start",
    "The book has ISBN 0-306-40615-2 on its back",
    "ISBN 978-0-13-468599-1 is a good book",
    "Read arXiv:1706.03762 first",
    "Invoice INV-2024-000183 is overdue",
    "Order number 4539 1488 0343 6467 shipped yesterday",
    "The key is to keep going; version 1.2.3 fixed it",
    "API version 2 of the key service",
    "passwords are important, change them often",
    "my password is too short, what should I do?",
    "the password is incorrect, it says",
    "boarding pass is ready at gate 22",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed the tests",
    "the sha256 of the file is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "See https://docs.python.org/3/library/re.html?highlight=search for details",
    "https://example.com/search?q=monkey&keyword=cats",
    "Use tokenizer.encode(text) and then the key function sorted(items, key=len)",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_are_left_alone(text):
    assert redact_spans(text) == [], (text, redacted(text))


def test_a_card_named_as_a_card_is_redacted_even_beside_an_order():
    assert redacted("order 1234: paid with my visa 4539 1488 0343 6467") == "order 1234: paid with my visa <CARD>"
    assert redacted("my order was paid with 4539 1488 0343 6467") == "my order was paid with <CARD>"


def test_what_one_text_reveals_is_redacted_where_the_others_repeat_it():
    # Found by the browser test: a model repeated the start of the voter's password, cut by its token limit,
    # on a line of its own, where nothing names it a password.
    prompt = "Repeat: My name is Ingrid Lindqvist. my password is Lindqvist-Falcon-77. key wJalrXUtnFEMI/K7MDENG/bPx"
    answers = ["Sure! 8.120.\n\nLindqvist-F", "Hello Ms Lindqvist, your key wJalrXUtnF is set", "Python tips"]
    texts = [r.text for r in redact.redact_together([prompt, *answers])]
    assert texts[1] == "Sure! 8.120.\n\n<SECRET>"
    assert "Lindqvist" not in texts[2] and "wJalrXUtnF" not in texts[2] and texts[3] == "Python tips"
    assert texts[0] == "Repeat: My name is <NAME>. my password is <SECRET>. key <SECRET>"
    assert [r.text for r in redact.redact_together(["", "  "])] == ["", "  "]
