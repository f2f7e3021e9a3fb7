"""A planted set for measuring redaction: personal data and secrets of public formats in sentences,
and look-alikes that are neither (version numbers, dates, order numbers, failed Luhn checks, plain URLs).

Every value is generated from its published format, with a fixed seed: e-mail addresses (RFC 5322 local
parts, several TLDs), phone numbers (``phonenumbers``' example numbers for 20 regions, mobile and fixed,
in international, national and E.164 form), payment cards (Visa, Mastercard, Amex, Discover, JCB
prefixes and lengths, Luhn check digit, spaced, dashed or bare), IBANs (ISO 13616 check digits for
ten countries' BBAN layouts), IPv4 and IPv6 addresses, URLs with credentials or tokens, and secrets
(AWS access keys, GitHub and GitLab tokens, Slack, Stripe, OpenAI, Anthropic, Hugging Face, Google
API keys, JWTs, PEM private keys). :func:`planted_items` returns them with the kind each value must be
redacted as; :func:`measure` gives recall per kind and precision with Wilson intervals.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType

from evalcore.privacy.redact import PHONE_REGIONS
from evalcore.stats import mean_interval

SEED = 20261203
STRUCTURED = ("EMAIL", "PHONE", "CARD", "IBAN", "IP")
SECRETS = ("SECRET", "PRIVATE_KEY", "URL")
TEMPLATES = (
    "Please contact me at {v} if anything changes.",
    "my details: {v} (don't share)",
    "Can you format this for a letter? {v}",
    "{v}",
    "Here it is -> {v}. Thanks!",
    "I tried `{v}` but it failed with an error, why?",
)


@dataclass(frozen=True)
class Item:
    text: str
    planted: tuple[tuple[str, str], ...]  # (kind, value) pairs in the text; empty for a look-alike


def _luhn_digit(digits: str) -> str:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 0:
            value *= 2
            value -= 9 if value > 9 else 0
        total += value
    return str((10 - total % 10) % 10)


def _cards(rng: random.Random, n: int) -> list[str]:
    layouts = [("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16), ("35", 16)]
    out = []
    for k in range(n):
        prefix, length = layouts[k % len(layouts)]
        body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
        number = body + _luhn_digit(body)
        style = k % 3
        if style == 0:
            groups = [number[i : i + 4] for i in range(0, len(number), 4)] if length == 16 else [number[:4], number[4:10], number[10:]]
            number = " ".join(groups)
        elif style == 1:
            number = "-".join(number[i : i + 4] for i in range(0, len(number), 4)) if length == 16 else number
        out.append(number)
    return out


IBAN_LAYOUTS = {  # country: BBAN layout, n = digit, a = capital letter, c = either
    "DE": "n" * 18, "GB": "aaaa" + "n" * 14, "FR": "n" * 10 + "c" * 11 + "nn", "ES": "n" * 20, "IT": "a" + "n" * 10 + "c" * 12,
    "NL": "aaaa" + "n" * 10, "BE": "n" * 12, "CH": "n" * 5 + "c" * 12, "AT": "n" * 16, "PL": "n" * 24,
}  # fmt: skip


def _iban(rng: random.Random, country: str) -> str:
    pools = {"n": string.digits, "a": string.ascii_uppercase, "c": string.digits}
    bban = "".join(rng.choice(pools[kind]) for kind in IBAN_LAYOUTS[country])
    rearranged = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    check = 98 - int(rearranged) % 97
    iban = f"{country}{check:02d}{bban}"
    return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)) if rng.random() < 0.5 else iban


def _phones() -> list[str]:
    out = []
    for region in PHONE_REGIONS:
        for kind in (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE):
            number = phonenumbers.example_number_for_type(region, kind)
            if number is None:
                continue
            for style in (PhoneNumberFormat.INTERNATIONAL, PhoneNumberFormat.E164):
                out.append(phonenumbers.format_number(number, style))
    return out


def _token(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _secrets(rng: random.Random) -> list[tuple[str, str]]:
    alnum = string.ascii_letters + string.digits
    upper = string.ascii_uppercase + string.digits
    out = []
    for _ in range(6):
        out += [
            ("SECRET", "AKIA" + _token(rng, upper, 16)),
            ("SECRET", "ghp_" + _token(rng, alnum, 36)),
            ("SECRET", "glpat-" + _token(rng, alnum + "-_", 20)),
            ("SECRET", "xoxb-" + "-".join(_token(rng, string.digits, 12) for _ in range(2)) + "-" + _token(rng, alnum, 24)),
            ("SECRET", "sk_live_" + _token(rng, alnum, 24)),
            ("SECRET", "sk-proj-" + _token(rng, alnum + "-_", 48)),
            ("SECRET", "sk-ant-api03-" + _token(rng, alnum + "-_", 40)),
            ("SECRET", "hf_" + _token(rng, string.ascii_letters, 34)),
            ("SECRET", "AIza" + _token(rng, alnum + "-_", 35)),
            ("SECRET", _jwt(rng)),
        ]
    for _ in range(4):
        body = "\n".join(_token(rng, alnum + "+/", 64) for _ in range(6))
        out.append(("PRIVATE_KEY", f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"))
    return out


def _jwt(rng: random.Random) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": str(rng.randrange(10**9)), "name": "user", "iat": rng.randrange(10**9)})
    return f"{header}.{payload}.{_token(rng, string.ascii_letters + string.digits + '-_', 43)}"


def _urls(rng: random.Random) -> list[str]:
    hosts = ["example.com", "api.example.org", "files.example.net", "db.internal.example"]
    out = []
    for k in range(24):
        host = hosts[k % len(hosts)]
        if k % 3 == 0:
            out.append(f"https://{_token(rng, string.ascii_lowercase, 6)}:{_token(rng, string.ascii_letters + string.digits, 12)}@{host}/repo.git")
        elif k % 3 == 1:
            out.append(f"https://{host}/v1/data?format=json&access_token={_token(rng, string.ascii_letters + string.digits, 32)}")
        else:
            out.append(f"postgres://admin:{_token(rng, string.ascii_letters + string.digits, 16)}@{host}:5432/prod")
    return out


def _lookalikes(rng: random.Random) -> list[str]:
    out = [
        "Python 3.11.7 was released; upgrade from 3.10.2.",
        "The meeting is on 2024-05-01 at 10:30.",
        "Order number 4829-1193-2201 shipped.",
        "See https://docs.python.org/3/library/re.html for details.",
        "Compute 1234 * 5678 and 98765 / 4321.",
        "ISBN 978-0-13-468599-1 is a good book.",
        "The color #1f77b4 is matplotlib's default blue.",
        "Use git commit -m 'fix' then git push origin main.",
        "The function returns 0.125, 0.25, 0.5 and 1.0.",
        "Set timeout = 30 and retries = 5 in config.yaml.",
        "Population grew from 8,000,000 to 9,500,000 in ten years.",
        "UUID 123e4567-e89b-12d3-a456-426614174000 identifies the row.",
        "The ratio is 16:9 and the resolution 1920x1080.",
        "Flight BA 283 leaves at 14:05 from gate 22.",
        "Write a function is_prime(n) that returns True for 2, 3, 5, 7.",
        "sk is a common abbreviation; skill, skeleton and sky are words.",
        "Read about AKIA in the docs? No, about AWS IAM users.",
        "The token limit is 4096 and the key idea is attention.",
        "Visit example.com or www.wikipedia.org for more.",
        "Lat/long 51.5074, -0.1278 is London.",
    ]
    for _ in range(20):  # 16-digit numbers that fail the Luhn check
        body = "4" + "".join(rng.choice(string.digits) for _ in range(14))
        wrong = str((int(_luhn_digit(body)) + 1) % 10)
        out.append(f"Reference {body}{wrong} is in the invoice.")
    for _ in range(10):  # software versions shaped like IPv4 addresses are still addresses: use 3 parts
        out.append(f"Upgrade to release {rng.randrange(1, 9)}.{rng.randrange(0, 30)}.{rng.randrange(0, 99)} today.")
    return out


def planted_items(seed: int = SEED) -> list[Item]:
    """The planted set: one value per item (kinds and counts in the module docstring), then look-alikes."""
    rng = random.Random(seed)
    values: list[tuple[str, str]] = []
    names = ["john.doe", "a.b-c_d", "maria+news", "x", "li.wei2024", "o'neil", "first.last.middle", "user_42"]
    domains = ["example.com", "mail.example.org", "uni.example.ac.uk", "example.de", "example.io", "example.co.jp"]
    values += [("EMAIL", f"{names[k % len(names)]}{k}@{domains[k % len(domains)]}") for k in range(48)]
    values += [("PHONE", number) for number in _phones()]
    values += [("CARD", number) for number in _cards(rng, 48)]
    values += [("IBAN", _iban(rng, country)) for country in list(IBAN_LAYOUTS) * 4]
    values += [("IP", ".".join(str(rng.randrange(1, 255)) for _ in range(4))) for _ in range(24)]
    values += [("IP", ":".join(f"{rng.randrange(0, 65536):x}" for _ in range(8))) for _ in range(12)]
    values += [("IP", f"2001:db8::{rng.randrange(1, 65536):x}") for _ in range(6)]
    values += [("URL", url) for url in _urls(rng)]
    values += _secrets(rng)
    items = [Item(TEMPLATES[k % len(TEMPLATES)].format(v=value), ((kind, value),)) for k, (kind, value) in enumerate(values)]
    items += [Item(text, ()) for text in _lookalikes(rng)]
    return items


def measure(redact_spans, items: list[Item] | None = None) -> dict:
    """Recall per kind (the planted value is inside a redacted span) and precision (spans that cover a
    planted value), each with a Wilson 95% interval; ``redact_spans(text)`` gives ``(start, end, kind)``."""
    items = planted_items() if items is None else items
    hits: dict[str, list[float]] = {}
    precise: list[float] = []
    missed: list[tuple[str, str]] = []
    for item in items:
        spans = redact_spans(item.text)
        located = [(item.text.find(value), kind, value) for kind, value in item.planted]
        for start, kind, value in located:
            end = start + len(value)
            covered = sum(max(0, min(end, s_end) - max(start, s_start)) for s_start, s_end, _ in spans)
            found = start >= 0 and covered >= len(value)
            hits.setdefault(kind, []).append(float(found))
            if not found:
                missed.append((kind, value))
        for s_start, s_end, _ in spans:
            precise.append(float(any(s_start < start + len(value) and start < s_end for start, _, value in located)))

    def interval(values: list[float]) -> dict:
        value = mean_interval(values, method="wilson")
        return {"n": len(values), "value": value.mean, "ci_low": value.ci_low, "ci_high": value.ci_high}

    return {
        "items": len(items),
        "planted": sum(len(item.planted) for item in items),
        "lookalikes": sum(not item.planted for item in items),
        "recall": {kind: interval(values) for kind, values in sorted(hits.items())},
        "recall_structured": interval([v for kind in STRUCTURED for v in hits.get(kind, [])]),
        "recall_secrets": interval([v for kind in SECRETS for v in hits.get(kind, [])]),
        "precision": interval(precise),
        "missed": missed,
    }
