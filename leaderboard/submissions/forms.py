"""The submission form: it runs every checkpoint check before anything is stored or queued."""

from __future__ import annotations

import io
import re
from pathlib import Path

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from common.query import LICENCE_PATTERN
from evalcore.contamination.corpus import SUFFIXES as CORPUS_SUFFIXES
from leaderboard.models import Submission
from leaderboard.submissions import checkpoints, services

MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")  # the arena catalogue's name rule
TRAINING_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
TRAINING_FILES_MAX = 16
CLOSED_LICENCES = {"proprietary", "closed", "closed-source"}  # say the weights are not published


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        if isinstance(data, (list, tuple)):
            return [super(MultipleFileField, self).clean(item, initial) for item in data]
        return [super().clean(data, initial)] if data else []


def limits() -> checkpoints.Limits:
    return services.checkpoint_limits()


def uploaded_checkpoint_file(upload: UploadedFile) -> checkpoints.CheckpointFile:
    """An upload as a CheckpointFile: read from its temporary file (or, when small, from memory)."""
    if hasattr(upload, "temporary_file_path"):
        path = upload.temporary_file_path()
        return checkpoints.CheckpointFile(upload.name, upload.size, lambda: open(path, "rb"))
    upload.seek(0)
    data = upload.read()
    return checkpoints.CheckpointFile(upload.name, len(data), lambda: io.BytesIO(data))


NAME_HELP = (
    "The public name, e.g. my-org/my-model-7b. A name is one model on the board: yours from your first "
    "submission, and one submission or upload at a time (a failed one frees it), so a new version takes a "
    "new name (e.g. -v2)."
)


class SubmissionMetadataForm(forms.Form):
    """How to name and evaluate a checkpoint: the form's fields and rules without the files (the
    submissions API and resumable uploads check their metadata with it)."""

    model_name = forms.RegexField(
        regex=MODEL_NAME, max_length=200,
        error_messages={"invalid": "Use letters, digits and . _ : / @ + - (starting with a letter or digit)."},
        help_text=NAME_HELP,
    )  # fmt: skip
    precision = forms.ChoiceField(choices=Submission.Precision.choices, initial=Submission.Precision.BFLOAT16)
    model_type = forms.ChoiceField(choices=Submission.ModelType.choices)
    base_model = forms.CharField(
        required=False, max_length=200, help_text="Required for fine-tunes and merges."
    )
    licence = forms.RegexField(
        regex=LICENCE_PATTERN, max_length=100, help_text="e.g. apache-2.0, mit, llama3.1",
        error_messages={"invalid": "A licence name such as apache-2.0: letters, digits, spaces and . + _ ( ) / - only."},
    )  # fmt: skip
    open_weights = forms.BooleanField(
        required=False, label="Open weights",
        help_text="Anyone may download these weights (e.g. from a public Hugging Face repository). "
        "Shown on the board and the model's page; left unticked, the weights are listed as not open.",
    )  # fmt: skip
    apply_chat_template = forms.BooleanField(required=False)
    private = forms.BooleanField(required=False, label="Private variant (visible only to you until published)")

    def clean_base_model(self) -> str:
        return self.cleaned_data["base_model"].strip()

    def clean_licence(self) -> str:
        return self.cleaned_data["licence"].strip()

    def clean(self):
        data = super().clean()
        if data.get("model_type") in Submission.NEEDS_BASE_MODEL and not data.get("base_model"):
            self.add_error("base_model", "Name the base model of a fine-tune or merge.")
        if data.get("open_weights") and (data.get("licence") or "").lower() in CLOSED_LICENCES:
            self.add_error("open_weights", f"Open weights under a {data['licence']!r} licence: name the licence the "
                                           "weights are published under, or untick open weights.")  # fmt: skip
        return data


class SubmissionForm(SubmissionMetadataForm):
    """A checkpoint by upload or by a path on the model store, and how to evaluate it."""

    files = MultipleFileField(
        required=False, allow_empty_file=False,
        help_text="config.json, tokenizer files and *.safetensors (with model.safetensors.index.json when sharded).",
    )  # fmt: skip
    store_path = forms.CharField(
        required=False, max_length=500, help_text="Or: a folder on the shared model store, relative to its root."
    )
    training_data = MultipleFileField(
        required=False, allow_empty_file=False, label="Training data (optional)",
        help_text="Declare the training data: .txt or .jsonl files (a \"text\" field per line), either gzipped. "
        "They are scanned for benchmark items (13-gram overlap); unreadable lines are skipped and counted.",
    )  # fmt: skip
    field_order = ["model_name", "files", "store_path", "precision", "model_type", "base_model", "licence",
                   "open_weights", "apply_chat_template", "private", "training_data"]  # fmt: skip

    def __init__(self, *args, staff: bool = False, **kwargs):
        """``staff``: whether the submitter may name a folder on the server's model store (staff only: the
        store is the server's disk, not the owner's)."""
        super().__init__(*args, **kwargs)
        self.report: checkpoints.CheckpointReport | None = None
        self.checkpoint_files: list[checkpoints.CheckpointFile] = []
        self.store_folder: Path | None = None
        if not settings.LEADERBOARD_MODEL_STORE or not staff:
            del self.fields["store_path"]
        self.store_refusal = (
            "" if "store_path" in self.fields
            else "Only staff may name a folder on the server's model store; upload the checkpoint's files instead."
            if settings.LEADERBOARD_MODEL_STORE else "This server has no model store; upload the checkpoint's files."
        )  # fmt: skip

    def clean_training_data(self) -> list[UploadedFile]:
        """Names and sizes only: the content is read by the scan, which skips and counts bad lines."""
        uploads = self.cleaned_data.get("training_data") or []
        if len(uploads) > TRAINING_FILES_MAX:
            raise forms.ValidationError(f"At most {TRAINING_FILES_MAX} training-data files.")
        names = set()
        for upload in uploads:
            name = upload.name or ""
            if not TRAINING_FILE_NAME.match(name) or not name.endswith(CORPUS_SUFFIXES):
                raise forms.ValidationError(
                    f"Training-data file {name[:100]!r}: name it with letters, digits and . _ - ending in "
                    f"{', '.join(CORPUS_SUFFIXES)}."
                )
            if name in names:
                raise forms.ValidationError(f"Training-data file {name!r} is given twice.")
            names.add(name)
        total = sum(u.size for u in uploads)
        if total > settings.LEADERBOARD_TRAINING_DATA_MAX_BYTES:
            raise forms.ValidationError(
                f"The training data is {total} bytes; the limit is {settings.LEADERBOARD_TRAINING_DATA_MAX_BYTES}."
            )
        return uploads

    def clean(self):
        want_chat_template = bool(self.cleaned_data.get("apply_chat_template"))  # add_error drops fields
        data = super().clean()
        posted = self.data.get("store_path") if hasattr(self.data, "get") else None
        if self.store_refusal and isinstance(posted, str) and posted.strip():  # a field not offered, posted anyway
            raise forms.ValidationError(self.store_refusal)
        uploads = data.get("files") or []
        store_path = (data.get("store_path") or "").strip()
        if uploads and store_path:
            raise forms.ValidationError("Upload files or name a store path, not both.")
        if not uploads and not store_path:
            if "files" not in self.errors:
                raise forms.ValidationError("Upload the checkpoint's files or name a folder on the model store.")
            return data
        try:
            if store_path:
                root = Path(settings.LEADERBOARD_MODEL_STORE)
                self.store_folder = checkpoints.store_folder(root, store_path)
                self.checkpoint_files = checkpoints.folder_files(self.store_folder, root=root)
            else:
                self.checkpoint_files = [uploaded_checkpoint_file(u) for u in uploads]
        except checkpoints.CheckpointError as exc:
            raise forms.ValidationError(str(exc)) from None
        self.report = checkpoints.inspect_checkpoint(
            self.checkpoint_files, limits=limits(), want_chat_template=want_chat_template
        )
        if not self.report.ok:
            raise forms.ValidationError(self.report.errors)
        return data
