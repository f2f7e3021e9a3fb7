"""A planted set for measuring redaction: personal data and secrets in sentences a voter would type, in six
languages, and look-alikes that are neither (issue 48).

Every value is generated from its published format with a fixed seed (:mod:`evalcore.privacy.planted_values`
for the identity numbers, names, addresses and secrets; phone numbers are ``phonenumbers``' example numbers
for 44 regions). Each planted value has a *kind* (50 of them, ``aws_secret_access_key``, ``person_name``,
``phone_national``, ...) and each kind a *group*: ``structured`` (e-mail, phones, cards, IBANs, IP
addresses), ``secrets`` (tokens, keys, passwords, credential and service URLs) and ``identity`` (names,
street addresses, dates of birth, national and passport numbers). The look-alikes are identifiers that
only look like one of those: versions, ISBNs, arXiv and DOI ids, order and invoice numbers (some with a
Luhn-valid tail), hashes, UUIDs, dates that are no birthday, capitalised phrases that are no name.
:func:`planted_items` returns them; :func:`measure` gives recall per kind and per group and precision,
each with a Wilson interval.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType

from evalcore.privacy import planted_values as pv
from evalcore.stats import mean_interval

SEED = 20261206
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "IN", "CA", "AU", "BR", "JP", "CN", "RU", "IL", "CH", "SE",
                 "PL", "MX", "ZA")  # fmt: skip
GENERAL = (
    "Please contact me at {v} if anything changes.", "my details: {v} (don't share)", "{v}",
    "Here it is -> {v}. Thanks!", "I tried `{v}` but it failed, why?", "Bitte prüf das: {v}, danke.",
    "Voici ce que j'ai : {v}, merci !", "¿Puedes revisar {v}?", "Ecco il valore: {v}.", "Segue o valor {v}, obrigado.",
)  # fmt: skip
CUED = {
    "phone_national": ("call me on {v}", "my mobile is {v}", "Ruf mich an unter {v}", "mon numéro : {v}",
                       "mi teléfono es {v}", "il mio cellulare è {v}"),
    "person_name": ("My name is {v} and I need a cover letter.", "Sign the email as {v}, please.",
                    "Write a birthday message for my colleague {v}.", "I'm {v}, a nurse from Leeds.",
                    "Ich heiße {v} und brauche Hilfe bei einem Brief.", "Je m'appelle {v}, j'ai une question.",
                    "Me llamo {v} y busco trabajo.", "Mi chiamo {v}, scrivi una lettera.", "Meu nome é {v}."),
    "street_address": ("I live at {v}, what's nearby?", "Ship the parcel to {v}.", "Ich wohne in der {v}.",
                       "J'habite au {v}.", "Vivo en {v}.", "Abito in {v}.", "Moro na {v}."),
    "date_of_birth": ("I was born on {v}, what's my star sign?", "DOB: {v}", "Ich bin am {v} geboren.",
                      "Je suis né le {v}.", "Nací el {v}.", "Data di nascita: {v}", "my birthday is {v}"),
    "phone_national_world": ("call me on {v}", "my mobile is {v}", "WhatsApp: {v}", "tel. {v}", "mi teléfono es {v}"),
    "uk_nhs": ("my NHS number is {v}", "NHS no. {v}"),
    "us_ssn": ("My SSN is {v}, is that safe to share?", "social security number {v}"),
    "uk_nino": ("my National Insurance number is {v}", "NINO: {v}"),
    "es_dni": ("Mi DNI es {v}.", "DNI {v}"),
    "it_fiscal_code": ("il mio codice fiscale è {v}", "codice fiscale: {v}"),
    "pl_pesel": ("mój PESEL to {v}", "PESEL: {v}"),
    "in_pan": ("my PAN card number is {v}", "PAN {v}"),
    "passport": ("my passport number is {v}", "Passport: {v}", "numéro de passeport {v}", "pasaporte {v}"),
    "password_phrase": ("my password is {v}", "pw: {v}", "the wifi password = {v}", "Mein Passwort ist {v}",
                        "mot de passe : {v}", "mi contraseña es {v}", "minha senha é {v}", "la mia password è {v}",
                        "mijn wachtwoord is {v}", "moje hasło to {v}", "мой пароль {v}"),
    "cued_hex_token": ("twilio auth token {v}", "my token: {v}", "API key = {v}", "mein Token ist {v}"),
    "secret": ("here is my key {v} please help", "{v}", "Mein Schlüssel: {v}", "voilà ma clé {v}, merci",
               "I exported {v} in my shell and it still fails", "mi token es {v}"),
}  # fmt: skip
GROUPS = {"structured": ("email", "phone_international", "phone_e164", "phone_national", "phone_national_world",
                         "card_visa", "card_mastercard",
                         "card_amex", "card_discover", "card_jcb", "card_unionpay", "iban", "ipv4", "ipv6"),
          "identity": ("person_name", "street_address", "date_of_birth", "us_ssn", "uk_nino", "uk_nhs", "es_dni",
                       "it_fiscal_code", "pl_pesel", "in_pan", "passport")}  # fmt: skip
# Regions outside Presidio's 20, in their national format after a word for a phone (evalcore/privacy/phones.py).
WORLD_REGIONS = ("SG", "KE", "NG", "ID", "PH", "AR", "TR", "EG", "VN", "TH", "MY", "PK", "BD", "CO", "CL", "PE", "UA", "GR",
                 "PT", "IE", "NZ", "NO", "DK", "FI")  # fmt: skip


@dataclass(frozen=True)
class Item:
    text: str
    planted: tuple[tuple[str, str], ...]  # (kind, value) pairs in the text; empty for a look-alike


def group_of(kind: str) -> str:
    return next((group for group, kinds in GROUPS.items() if kind in kinds), "secrets")


def _cards(rng: random.Random) -> list[tuple[str, str]]:
    layouts = {"card_visa": ("4", 16), "card_mastercard": ("5", 16), "card_amex": ("37", 15), "card_discover": ("6011", 16),
               "card_jcb": ("35", 16), "card_unionpay": ("62", 16)}  # fmt: skip
    out = []
    for k in range(60):
        kind = list(layouts)[k % len(layouts)]
        prefix, length = layouts[kind]
        if kind == "card_mastercard":
            prefix = rng.choice(["51", "55", "2221", "2720"])
        body = prefix + pv.token(rng, string.digits, length - len(prefix) - 1)
        number = body + pv.luhn_digit(body)
        style = k % 3
        if style == 0:
            groups = [number[i : i + 4] for i in range(0, len(number), 4)] if length == 16 else [number[:4], number[4:10], number[10:]]
            number = " ".join(groups)
        elif style == 1 and length == 16:
            number = "-".join(number[i : i + 4] for i in range(0, len(number), 4))
        out.append((kind, number))
    return out


IBAN_LAYOUTS = {  # country: BBAN layout, n = digit, a = capital letter, c = either
    "DE": "n" * 18, "GB": "aaaa" + "n" * 14, "FR": "n" * 10 + "c" * 11 + "nn", "ES": "n" * 20, "IT": "a" + "n" * 10 + "c" * 12,
    "NL": "aaaa" + "n" * 10, "BE": "n" * 12, "CH": "n" * 5 + "c" * 12, "AT": "n" * 16, "PL": "n" * 24,
}  # fmt: skip


def _iban(rng: random.Random, country: str) -> str:
    pools = {"n": string.digits, "a": string.ascii_uppercase, "c": string.digits}
    bban = "".join(rng.choice(pools[kind]) for kind in IBAN_LAYOUTS[country])
    check = 98 - int("".join(str(int(ch, 36)) for ch in bban + country + "00")) % 97
    iban = f"{country}{check:02d}{bban}"
    return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)) if rng.random() < 0.5 else iban


def _phones() -> list[tuple[str, str]]:
    out = []
    for region in PHONE_REGIONS:
        for kind in (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE):
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                out.append(("phone_international", phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL)))
                out.append(("phone_e164", phonenumbers.format_number(number, PhoneNumberFormat.E164)))
                if region in ("US", "GB", "DE", "FR", "ES", "IT"):
                    out.append(("phone_national", phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)))
    for region in WORLD_REGIONS:
        number = phonenumbers.example_number_for_type(region, PhoneNumberType.MOBILE)
        if number is not None:
            out.append(("phone_national_world", phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)))
    return out


def _nhs(rng: random.Random) -> str:
    while True:
        digits = pv.token(rng, string.digits, 9)
        check = 11 - sum(int(d) * (10 - i) for i, d in enumerate(digits)) % 11
        if check != 10:
            number = digits + str(0 if check == 11 else check)
            return f"{number[:3]} {number[3:6]} {number[6:]}"


def _values(rng: random.Random) -> list[tuple[str, str]]:
    names = ["john.doe", "a.b-c_d", "maria+news", "x", "li.wei2024", "o'neil", "first.last.middle", "user_42"]
    domains = ["example.com", "mail.example.org", "uni.example.ac.uk", "example.de", "example.io", "example.co.jp"]
    values = [("email", f"{names[k % len(names)]}{k}@{domains[k % len(domains)]}") for k in range(40)]
    values += _phones() + _cards(rng)
    values += [("iban", _iban(rng, country)) for country in list(IBAN_LAYOUTS) * 3]
    values += [("ipv4", ".".join(str(rng.randrange(1, 255)) for _ in range(4))) for _ in range(16)]
    values += [("ipv6", ":".join(f"{rng.randrange(0, 65536):x}" for _ in range(8))) for _ in range(8)]
    for kind, make in pv.SECRET_FORMATS.items():
        values += [(kind, make(rng)) for _ in range(6)]
    values += [("pem_private_key", pv.private_key(rng)) for _ in range(4)]
    values += [("service_url", pv.service_url(rng)) for _ in range(12)]
    values += [("token_url", pv.token_url(rng)) for _ in range(13)]
    values += [("credential_url", pv.credential_url(rng)) for _ in range(6)]
    values += [("password_phrase", pv.password(rng)) for _ in range(26)]
    values += [("cued_hex_token", pv.token(rng, "0123456789abcdef", 32)) for _ in range(8)]
    values += [("person_name", pv.person(rng)) for _ in range(45)]
    languages = list(pv.STREETS)
    values += [("street_address", pv.address(rng, languages[k % len(languages)])) for k in range(35)]
    values += [("date_of_birth", pv.dob(rng, ("en", "de", "fr", "es", "it", "en", "en")[k % 7])) for k in range(21)]
    for kind, make in (("us_ssn", pv.ssn), ("uk_nino", pv.nino), ("es_dni", pv.dni), ("it_fiscal_code", pv.fiscal_code),
                       ("pl_pesel", pv.pesel), ("in_pan", pv.pan), ("uk_nhs", _nhs)):  # fmt: skip
        values += [(kind, make(rng)) for _ in range(8)]
    values += [("passport", rng.choice([pv.token(rng, string.digits, 9), "C" + pv.token(rng, "CFGHJKLMNPRTVWXYZ0123456789", 8)]))
               for _ in range(8)]  # fmt: skip
    return values


def _template(kind: str, k: int) -> str:
    if kind in CUED:
        options = CUED[kind]
    elif kind in ("aws_secret_access_key",) or group_of(kind) == "secrets" and kind not in ("service_url", "token_url",
                                                                                           "credential_url", "pem_private_key"):
        options = CUED["secret"]
    else:
        options = GENERAL
    return options[k % len(options)]


def _isbn13(rng: random.Random) -> str:
    body = "978" + pv.token(rng, string.digits, 9)
    check = (10 - sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(body)) % 10) % 10
    return f"{body[:3]}-{body[3]}-{body[4:7]}-{body[7:12]}-{check}"


def _isbn10(rng: random.Random) -> str:
    body = pv.token(rng, string.digits, 9)
    check = (11 - sum((10 - i) * int(d) for i, d in enumerate(body)) % 11) % 11
    return f"{body[0]}-{body[1:4]}-{body[4:9]}-{'X' if check == 10 else check}"


LOOKALIKE_TEXTS = (
    "Python 3.11.7 was released; upgrade from 3.10.2.", "The meeting is on 2024-05-01 at 10:30.",
    "See https://docs.python.org/3/library/re.html for details.", "The color #1f77b4 is matplotlib's default blue.",
    "Use git commit -m 'fix' then git push origin main.", "The function returns 0.125, 0.25, 0.5 and 1.0.",
    "Set timeout = 30 and retries = 5 in config.yaml.", "Population grew from 8,000,000 to 9,500,000 in ten years.",
    "The ratio is 16:9 and the resolution 1920x1080.", "Flight BA 283 leaves at 14:05 from gate 22.",
    "Write a function is_prime(n) that returns True for 2, 3, 5, 7.", "sk is a common abbreviation; skill and sky are words.",
    "The token limit is 4096 and the key idea is attention.", "Visit example.com or www.wikipedia.org for more.",
    "Lat/long 51.5074, -0.1278 is London.", "The key is to keep going; version 1.2.3 fixed it.",
    "API version 2 of the key service is deprecated.", "passwords are important, change them often.",
    "my password is too short, what should I do?", "the password is incorrect, it says.",
    "boarding pass is ready at gate 22", "Use tokenizer.encode(text) and sorted(items, key=len).",
    "https://example.com/search?q=monkey&keyword=cats", "Explain Python decorators with an example.",
    "What is the capital of France?", "Compare New York and Los Angeles weather in July.",
    "Machine Learning and Deep Learning differ how?", "Wall Street fell 2% on Monday.",
    "The Great Barrier Reef is in Australia.", "Summarise the French Revolution in 100 words.",
    "Die Besprechung ist am 12. März 2024 um 9 Uhr.", "La réunion est prévue le 3 juin 2025.",
    "El examen es el 14 de mayo de 2024.", "La riunione è il 7 luglio 2024.", "Quanto é 1234 vezes 5678?",
    "Meine Lieblingsfarbe ist Blau und mein Hobby ist Lesen.", "Quel temps fait-il à Lyon demain ?",
    "Tracking: 1Z999AA10123456784 (UPS)", "SKU-88213-BLK-XL is out of stock.", "Ticket #48213 was closed.",
    "Error code 0x80070005 when installing.", "It costs $1,299.99 or €1.199,00 with VAT.",
    "Room 221B, second floor, is the lab.", "Chapter 12, verse 3 to 17.", "The train leaves platform 9 at 17:45.",
    "UUID 123e4567-e89b-12d3-a456-426614174000 identifies the row.",
    "Commit 3f786850e387550fdab836ed7e6dc881de23001b fixed the tests.",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 of the empty file",
    "MD5 d41d8cd98f00b204e9800998ecf8427e is not secure.", "Temperature rose to 38.5 degrees in Seville.",
)  # fmt: skip


def _lookalikes(rng: random.Random) -> list[str]:
    out = list(LOOKALIKE_TEXTS)
    for k in range(20):
        out.append(f"Chrome {rng.randrange(100, 140)}.0.{rng.randrange(1000, 9999)}.{rng.randrange(10, 200)} crashes on start"
                   if k % 2 else f"Die Version {rng.randrange(1, 9)}.{rng.randrange(0, 20)}.{rng.randrange(0, 9)}.{rng.randrange(0, 99)} ist da")  # fmt: skip
    for k in range(20):
        out.append(f"ISBN {_isbn13(rng) if k % 2 else _isbn10(rng)} is on the back cover.")
    for k in range(16):
        out.append(f"Read arXiv:{rng.randrange(1500, 2512)}.{rng.randrange(1000, 99999):05d} first"
                   if k % 2 else f"doi:10.{rng.randrange(1000, 9999)}/{pv.token(rng, string.ascii_lowercase, 4)}.{rng.randrange(1000, 99999)}")  # fmt: skip
    for k in range(20):  # invoice and order numbers, some with a Luhn-valid 16-digit tail
        body = "4" + pv.token(rng, string.digits, 14)
        number = body + pv.luhn_digit(body)
        grouped = " ".join(number[i : i + 4] for i in range(0, 16, 4))
        out.append([f"Invoice INV-{rng.randrange(2019, 2026)}-{rng.randrange(1, 999999):06d} is overdue.",
                    f"Order number {grouped} shipped yesterday.", f"Bestellnummer {number} ist unterwegs.",
                    f"El pedido PED-{rng.randrange(2020, 2026)}-{rng.randrange(1, 99999):05d} llegó."][k % 4])  # fmt: skip
    for _ in range(20):  # 16-digit numbers that fail the Luhn check
        body = "4" + pv.token(rng, string.digits, 14)
        out.append(f"Reference {body}{(int(pv.luhn_digit(body)) + 1) % 10} is in the invoice.")
    for _ in range(10):
        out.append(f"Upgrade to release {rng.randrange(1, 9)}.{rng.randrange(0, 30)}.{rng.randrange(0, 99)} today.")
    return out


def planted_items(seed: int = SEED) -> list[Item]:
    """The planted set: one value per item, in a sentence for its kind, then the look-alikes."""
    rng = random.Random(seed)
    counters: dict[str, int] = {}
    items = []
    for kind, value in _values(rng):
        k = counters[kind] = counters.get(kind, -1) + 1
        items.append(Item(_template(kind, k).format(v=value), ((kind, value),)))
    items += [Item(text, ()) for text in _lookalikes(rng)]
    return items


def measure(redact_spans, items: list[Item] | None = None) -> dict:
    """Recall per kind and per group (the planted value inside redacted spans) and precision (spans that cover
    a planted value), each with a Wilson 95% interval; ``redact_spans(text)`` gives ``(start, end, kind)``."""
    items = planted_items() if items is None else items
    hits: dict[str, list[float]] = {}
    precise: list[float] = []
    missed: list[tuple[str, str]] = []
    false_alarms: list[str] = []
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
        if not item.planted and spans:
            false_alarms.append(item.text)

    def interval(values: list[float]) -> dict:
        value = mean_interval(values, method="wilson")
        return {"n": len(values), "value": value.mean, "ci_low": value.ci_low, "ci_high": value.ci_high}

    lookalikes = [float(not item.planted and item.text not in false_alarms) for item in items if not item.planted]
    groups = {}
    for kind, values in hits.items():
        groups.setdefault(group_of(kind), []).extend(values)
    return {
        "items": len(items),
        "planted": sum(len(item.planted) for item in items),
        "kinds": len(hits),
        "lookalikes": len(lookalikes),
        "recall": {kind: interval(values) for kind, values in sorted(hits.items())},
        "recall_group": {group: interval(values) for group, values in sorted(groups.items())},
        "lookalikes_left_alone": interval(lookalikes),
        "precision": interval(precise),
        "missed": missed,
        "false_alarms": false_alarms,
    }
