"""Phone numbers in the national format of any region ``phonenumbers`` knows, where a word says it is one.

Presidio's recogniser looks for numbers of 20 regions (``redact.PHONE_REGIONS``) everywhere in a text; a
national number of the other 220-odd regions has no ``+`` and looks like any other run of digits, so it
is taken only after a word that names a phone (phone, tel, call me, mobile, WhatsApp, Telefon, Handy,
téléphone, portable, teléfono, móvil, celular, cellulare, telefone, telefoon, telefon, телефон, 电话,
手机, 電話, 携帯, 전화, ... within 32 characters before it) and only when Google's ``phonenumbers`` finds
it a valid number of some region.
"""

from __future__ import annotations

import functools
import re

import phonenumbers

CUE = re.compile(
    r"(?i)(?:phone|\btel\b|\btel\.|call me|call us|\bcall\b|mobile|\bcell\b|whats\s?app|\bfax\b|\bsms\b|text me|"
    r"reach me|contact me|ring me|\bmy number\b|"
    r"telefon|handy|téléphone|telephone|portable|\bnuméro\b|teléfono|telefono|móvil|movil|celular|cellulare|"
    r"telefone|telefoon|mobiel|комórk|komórk|телефон|номер|电话|手机|電話|携帯|전화|휴대폰)"
)
CANDIDATE = re.compile(r"(?<![\w+])\(?\d[\d ()./-]{5,18}\d(?!\w)")
WINDOW = 32


@functools.lru_cache(maxsize=1)
def _regions() -> tuple[str, ...]:
    return tuple(sorted(phonenumbers.SUPPORTED_REGIONS))


@functools.lru_cache(maxsize=4096)
def _valid_somewhere(number: str) -> bool:
    digits = re.sub(r"\D", "", number)
    if not 7 <= len(digits) <= 15:
        return False
    for region in _regions():
        try:
            parsed = phonenumbers.parse(number, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(parsed):
            return True
    return False


def national_phone_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for match in CANDIDATE.finditer(text):
        if not CUE.search(text[max(0, match.start() - WINDOW) : match.start()]):
            continue
        number = match.group(0).strip(" .-/")
        if _valid_somewhere(number):
            start = match.start() + match.group(0).find(number)
            spans.append((start, start + len(number), "PHONE"))
    return spans
