"""Issue 31 §3: what a model is (organisation, licence, parameters, open weights, cutoff, link) and its
retirement, declared in the catalogue file; hostile values refused naming the key, nothing half-synced."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from arena.catalogue.sync import UNDECLARED_REASON, catalogue_parse, catalogue_sync
from arena.models import LanguageModel
from arena.play.battles import arena_candidates
from arena.play.sampling import sample_pair

ENTRY = "  - name: {name}\n    backend: hf\n    model_args: {{path: x}}\n"
DESCRIBED = """models:
  - name: open-one
    backend: hf
    model_args: {path: x}
    organisation: HuggingFace
    licence: apache-2.0
    parameters: 135M
    open_weights: true
    knowledge_cutoff: 2024-06
    link: https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct
  - name: closed-two
    backend: hf
    model_args: {path: x}
    maker: Acme
    parameters: 7000000000
    knowledge_cutoff: 2023-12-31
  - name: secret-three
    backend: hf
    model_args: {path: x}
    organisation: Acme
    public: false
    name_withheld: true
"""


def write(tmp_path, text):
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


@pytest.mark.django_db
def test_description_fields_sync(tmp_path):
    catalogue_sync(catalogue_parse(write(tmp_path, DESCRIBED)))
    one = LanguageModel.objects.get(name="open-one")
    assert (one.organisation, one.licence, one.parameter_count, one.open_weights, one.knowledge_cutoff) == (
        "HuggingFace", "apache-2.0", 135_000_000, True, "2024-06",
    )  # fmt: skip
    assert one.link.startswith("https://huggingface.co/") and one.public and not one.name_withheld
    two = LanguageModel.objects.get(name="closed-two")
    assert two.organisation == "Acme"  # the maker, when no organisation is given
    assert (two.parameter_count, two.open_weights, two.knowledge_cutoff) == (
        7_000_000_000,
        False,
        "2023-12-31",
    )
    three = LanguageModel.objects.get(name="secret-three")
    assert not three.public and three.name_withheld


@pytest.mark.django_db
def test_retiring_stops_sampling_and_undeclared_models_are_retired_in_the_open(tmp_path):
    text = "models:\n" + "".join(ENTRY.format(name=n) for n in ("a", "b", "c"))
    catalogue_sync(catalogue_parse(write(tmp_path, text)))
    assert {c.key for c in arena_candidates()} == set(LanguageModel.objects.values_list("pk", flat=True))
    retired = text + "    retired: {reason: superseded by d, date: 2026-11-30}\n"  # on c
    report = catalogue_sync(catalogue_parse(write(tmp_path, retired)))
    assert report.retired == ("c",)
    c = LanguageModel.objects.get(name="c")
    assert c.retired_at == datetime(2026, 11, 30, tzinfo=UTC) and c.retired_reason == "superseded by d"
    assert c.in_arena  # still declared, with its votes and rating, but no longer sampled
    assert LanguageModel.objects.get(name="c").pk not in {cand.key for cand in arena_candidates()}
    # A model dropped from the file is retired too, with a reason saying so (never a silent removal).
    report = catalogue_sync(catalogue_parse(write(tmp_path, "models:\n" + ENTRY.format(name="a"))))
    assert set(report.retired) == {"b", "c"}
    b = LanguageModel.objects.get(name="b")
    assert not b.in_arena and b.retired_at is not None and b.retired_reason == UNDECLARED_REASON
    assert LanguageModel.objects.get(name="c").retired_reason == "superseded by d"  # its own reason kept


@pytest.mark.django_db
def test_a_battle_never_draws_a_retired_model(tmp_path):
    text = "models:\n" + "".join(ENTRY.format(name=n) for n in ("a", "b", "c"))
    catalogue_sync(catalogue_parse(write(tmp_path, text + "    retired: old\n")))
    c = LanguageModel.objects.get(name="c")
    rng = np.random.default_rng(0)
    drawn = {cand.key for _ in range(200) for cand in sample_pair(arena_candidates(), rng=rng)}
    assert c.pk not in drawn and len(drawn) == 2
    catalogue_sync(
        catalogue_parse(
            write(tmp_path, text.replace("  - name: b", "  - name: b\n    retired: x") + "    retired: old\n")
        )
    )
    with pytest.raises(ValueError, match="at least two models"):
        sample_pair(arena_candidates(), rng=rng)


BASE = "models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n"
HOSTILE = [
    ("    organisation: [1, 2]\n", "organisation: must be one line"),
    ('    organisation: "Acme\\nEvil"\n', "organisation: must be one line"),
    ('    organisation: "Acme\\u202eevil"\n', "organisation: must be one line"),
    ('    organisation: "Ac\\u200bme"\n', "organisation: must be one line of text without invisible"),
    ('    licence: "<script>"\n', "licence: letters, digits"),
    ("    parameters: lots\n", "parameters: expected a whole number"),
    ("    parameters: -5\n", "parameters: must be between"),
    ("    parameters: 10e40\n", "parameters: expected a whole number"),
    ("    parameters: 999999999999999999999999\n", "parameters: must be between"),
    ("    parameters: true\n", "parameters: expected a whole number"),
    ("    open_weights: yes please\n", "open_weights: must be true or false"),
    ("    knowledge_cutoff: 2024-13\n", "knowledge_cutoff: must be YYYY"),
    ("    knowledge_cutoff: last spring\n", "knowledge_cutoff: must be YYYY"),
    ("    link: javascript:alert(1)\n", "link: must be an http"),
    ("    link: ftp://example.org/x\n", "link: must be an http"),
    ("    public: true\n    name_withheld: true\n", "name_withheld: only a model that is not public"),
    ("    retired: {date: 2026-01-01}\n", "retired.reason: required"),
    ("    retired: {reason: old, date: someday}\n", "retired.date: must be a date"),
    ("    retired: {reason: old, date: 2999-01-01}\n", "retired.date: is in the future"),
    ("    retired: {reason: old, when: 2026-01-01}\n", "retired: must be a reason"),
    ("    retired: [old]\n", "retired: must be a reason"),
    ('    retired: {reason: "' + "x" * 301 + '"}\n', "retired.reason: must be one line"),
]


@pytest.mark.parametrize(("extra", "message"), HOSTILE)
def test_hostile_description_values_are_refused_naming_the_key(tmp_path, extra, message):
    with pytest.raises(ValueError, match=message):
        catalogue_parse(write(tmp_path, BASE + extra))


@pytest.mark.django_db
def test_a_refused_file_changes_nothing(tmp_path):
    catalogue_sync(catalogue_parse(write(tmp_path, DESCRIBED)))
    before = list(LanguageModel.objects.values())
    with pytest.raises(ValueError):
        catalogue_parse(write(tmp_path, DESCRIBED + "    knowledge_cutoff: soon\n"))
    assert list(LanguageModel.objects.values()) == before


@pytest.mark.django_db
def test_the_admin_form_refuses_a_retirement_without_reason(admin_client):
    model = LanguageModel.objects.create(name="m", in_arena=True)
    url = f"/admin/arena/languagemodel/{model.pk}/change/"
    form = {
        "name": "m", "aliases": "[]", "model_args": "{}", "generation": "{}", "weight": "1.0", "in_arena": "on",
        "public": "on", "retired_at_0": "2026-11-30", "retired_at_1": "12:00:00", "retired_reason": "",
        "licence": "x<y>", "knowledge_cutoff": "2024-99", "link": "javascript:alert(1)", "parameter_count": "-3",
    }  # fmt: skip
    response = admin_client.post(url, form)
    assert response.status_code == 200  # the form again, with its errors
    text = response.content.decode()
    for message in ("needs its reason", "a licence name", "YYYY, YYYY-MM", "Enter a valid URL"):
        assert message in text, message
    model.refresh_from_db()
    assert model.retired_at is None and model.licence == ""
    form.update(
        retired_reason="withdrawn by its owner",
        licence="mit",
        knowledge_cutoff="2024",
        link="",
        parameter_count="",
    )
    assert admin_client.post(url, form).status_code == 302
    model.refresh_from_db()
    assert model.retired_reason == "withdrawn by its owner" and model.retired_at is not None
