"""Numbers that identify a person, and dates of birth, in free text (issue 48).

- **National identity, tax and passport numbers**: Presidio's own recognisers for the formats it knows
  (``presidio-analyzer``, pattern and checksum based, no NLP model): US SSN and ITIN, UK National
  Insurance and NHS numbers, Spanish NIF and NIE, Italian fiscal codes, Polish PESEL, Swedish
  personnummer, Finnish HETU, Singapore NRIC/FIN, Indian PAN and Aadhaar, Korean RRN, Turkish, South
  African and Nigerian national ids, Canadian SIN, German tax ids, Australian TFN, Thai TNIN, and the
  passport formats of the US, UK, Germany, Spain, Italy, India, Korea and the Philippines. A
  recogniser's finding counts when its own confidence is 0.5 or more (a checksum held, or a shape
  nothing else has) and the format is more than digits alone, or when one of the recogniser's context words ("passport", "SSN", "Pass",
  "pasaporte", ...) or a word of :data:`ID_CUES` stands in the 48 characters before it (a passport
  number is nine digits: without a word naming it, it is any number).
- **Dates of birth**: a date (numeric, ISO, or with a month name in English, German, French, Spanish,
  Italian or Portuguese) within 40 characters after a word that says birth (born, date of birth, DOB,
  birthday, geboren, Geburtsdatum, né, naissance, nacido, nacimiento, nascido, nascita, родился,
  рождения, 生日, 出生, 生年月日).

Each finding is ``ID`` or ``DOB``.
"""

from __future__ import annotations

import functools
import re

MIN_SCORE = 0.5
CONTEXT_CHARS = 48
ID_CUES = re.compile(
    r"(?i)(?:passport|passeport|pasaporte|passaporto|passaporte|reisepass|paspoort|paszport|паспорт|护照|旅券|여권|"
    r"social security|\bssn\b|\bsin\b|\bnino\b|national insurance|\bnhs\b|tax id|\btin\b|\bitin\b|steuer-?id|"
    r"personal ?(?:id|number)|id ?(?:card|number|no)|national id|identity|ausweis|personalausweis|dni|\bnif\b|"
    r"\bnie\b|codice fiscale|pesel|personnummer|henkilötunnus|hetu|nric|aadhaar|\bpan\b|주민등록|身份证|"
    r"numéro de sécurité sociale|sécu|cpf|curp|rfc)"
)
MONTHS = (
    r"jan(?:uary|uar|vier)?|feb(?:ruary|ruar)?|f[ée]vrier|m[äa]r(?:ch|z|s)|apr(?:il)?|avril|may|mai|mayo|maggio|maio|"
    r"june?|juni|juin|junio|giugno|junho|july?|juli|juillet|julio|luglio|julho|aug(?:ust)?|ao[ûu]t|agosto|"
    r"sep(?:t|tember)?|septembre|septiembre|settembre|setembro|oct(?:ober)?|okt(?:ober)?|octobre|octubre|ottobre|"
    r"outubro|nov(?:ember)?|novembre|noviembre|novembro|dec(?:ember)?|dez(?:ember)?|d[ée]cembre|diciembre|"
    r"dicembre|dezembro|enero|febrero|marzo|abril|gennaio|febbraio|aprile|janeiro|fevereiro|mar[çc]o"
)
DATE = (
    rf"(?:\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}|\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}|"
    rf"\d{{1,2}}(?:st|nd|rd|th|er|º|\.)?\s+(?:of\s+|de\s+|di\s+)?(?:{MONTHS})\.?,?\s+(?:de\s+|del\s+)?\d{{4}}|"
    rf"(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|\d{{4}}年\d{{1,2}}月\d{{1,2}}日)"
)
BIRTH = (
    r"born|birth|birthday|birthdate|\bdob\b|d\.o\.b\.?|geboren|geburtsdatum|geburtstag|né|née|naissance|nacid[oa]|"
    r"nacimiento|nac[ií]|naci(?:ó|o|da|do)|cumpleaños|nascid[oa]|nasci|nascita|nato|nata|anivers[áa]rio|родил(?:ся|ась)|рождения|生日|出生|生年月日|"
    r"urodzon[ya]|data urodzenia|doğum"
)
DOB = re.compile(rf"(?i)(?:{BIRTH})[^\n.;!?]{{0,40}}?(?P<date>{DATE})")
DOB_BEFORE = re.compile(rf"(?i)(?P<date>{DATE})[^\n.;!?\d]{{0,16}}?(?:geboren|born|né|née|nato|nata|urodzon[ya])")
PASSPORT_CUE = re.compile(
    r"(?i)(?:passport|passeport|pasaporte|passaporto|passaporte|reisepass|paspoort|paszport|паспорт)"
    r"(?:\s*(?:number|no\.?|nr\.?|nummer|numéro|número|numero|#))?\s*(?:is|ist|est|es|é|è|:)?\s*"
    r"(?P<value>(?=[A-Z0-9]*\d)[A-Z0-9]{6,9})\b"
)
RECOGNIZERS = (
    "UsSsnRecognizer", "UsItinRecognizer", "UkNinoRecognizer", "NhsRecognizer", "EsNifRecognizer", "EsNieRecognizer",
    "ItFiscalCodeRecognizer", "PlPeselRecognizer", "SePersonnummerRecognizer", "FiPersonalIdentityCodeRecognizer",
    "SgFinRecognizer", "InPanRecognizer", "InAadhaarRecognizer", "KrRrnRecognizer", "TrNationalIdRecognizer",
    "ZaIdNumberRecognizer", "NgNinRecognizer", "CaSinRecognizer", "DeTaxIdRecognizer", "AuTfnRecognizer",
    "ThTninRecognizer", "UsPassportRecognizer", "UkPassportRecognizer", "DePassportRecognizer", "EsPassportRecognizer",
    "ItPassportRecognizer", "InPassportRecognizer", "KrPassportRecognizer", "PhPassportRecognizer",
)  # fmt: skip


# Formats of digits alone, whose checksum a random number passes one time in ten or eleven (a 10-digit NHS
# number, a PESEL, a TFN): kept only after a word that names them, whatever Presidio's confidence.
DIGITS_ONLY = {"NhsRecognizer", "PlPeselRecognizer", "TrNationalIdRecognizer", "ZaIdNumberRecognizer", "NgNinRecognizer",
               "CaSinRecognizer", "DeTaxIdRecognizer", "AuTfnRecognizer", "ThTninRecognizer", "InAadhaarRecognizer",
               "KrRrnRecognizer", "UsPassportRecognizer", "UkPassportRecognizer", "UsItinRecognizer"}  # fmt: skip


@functools.lru_cache(maxsize=1)
def _recognizers() -> tuple:
    import presidio_analyzer.predefined_recognizers as predefined  # noqa: PLC0415 - heavy, once

    built = []
    for name in RECOGNIZERS:
        if not hasattr(predefined, name):
            continue
        recognizer = getattr(predefined, name)()
        # Patterns whose lookaheads scan to the end of the text at every position (PAN's "Low": quadratic, 60 s
        # on 200 kB of nested tags) are dropped; they score below MIN_SCORE anyway.
        slow = [p for p in getattr(recognizer, "patterns", []) if "(?=.*" in p.regex]
        if slow:
            recognizer = getattr(predefined, name)(patterns=[p for p in recognizer.patterns if p not in slow])
        built.append(recognizer)
    return tuple(built)


def _cued(text: str, start: int, context: list[str]) -> bool:
    before = text[max(0, start - CONTEXT_CHARS) : start]
    lowered = before.lower()
    return bool(ID_CUES.search(before)) or any(re.search(rf"\b{re.escape(word.lower())}\b", lowered) for word in context)


def id_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for recognizer in _recognizers():
        for result in recognizer.analyze(text, recognizer.supported_entities, None) or []:
            if result.end <= result.start:
                continue
            glued = re.match(r"[A-Za-z0-9\-_]", text[result.start - 1 : result.start] or " ") or re.match(
                r"[A-Za-z0-9\-_]", text[result.end : result.end + 1] or " "
            )
            if glued:  # the tail of a UUID, a hash or a longer code: not a number of its own
                continue
            confident = result.score >= MIN_SCORE and type(recognizer).__name__ not in DIGITS_ONLY
            if confident or _cued(text, result.start, list(getattr(recognizer, "context", None) or [])):
                spans.append((result.start, result.end, "ID"))
    return spans


def dob_spans(text: str) -> list[tuple[int, int, str]]:
    return [(m.start("date"), m.end("date"), "DOB") for pattern in (DOB, DOB_BEFORE) for m in pattern.finditer(text)]


def passport_spans(text: str) -> list[tuple[int, int, str]]:
    """A passport number after a word that names it: six to nine capitals and digits, one digit at least."""
    return [(m.start("value"), m.end("value"), "ID") for m in PASSPORT_CUE.finditer(text)]


def identity_spans(text: str) -> list[tuple[int, int, str]]:
    """Identity numbers and dates of birth in ``text``."""
    return id_spans(text) + dob_spans(text) + passport_spans(text)
