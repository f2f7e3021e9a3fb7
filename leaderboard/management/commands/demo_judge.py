"""``manage.py demo_judge``: the demo's judge, for ``make demo`` (after ``arena_models_sync``). Idempotent.

Configures ``smollm2-judge``: SmolLM2-135M-Instruct judging the arena's SmolLM2 variants against the
sampled one (``smollm2-135m-t0.9``) on 8 real instructions (LLMBar), answers up to 64 tokens, with
AlpacaEval's log-prob verdict in both orders. Queues a run for every arena model (the leaderboard
submission, the same catalogue entry as the greedy arena model, is judged when its suite finishes, or
now if it already has) and an audit on the first 16 labelled LLMBar pairs, which shows how far the
small judge is from trustworthy (position bias, accuracy near chance). Interrupted runs are sent again.

Also configures ``smollm2-grader``: the same SmolLM2 grading the arena models' answers to two of the
bundled two-turn sample questions (writing; maths, against its reference) on MT-Bench's 1-10 scale
(inactive: it does not judge new submissions). A 135M judge rarely writes the ``[[n]]`` rating, so the
grader reads log-prob grades instead (``mt-bench-single-logprob``): the expected rating under the
judge's probabilities of "1]]" ... "10]]" after "Rating: [[", with the mass it put on the scale and how
flat it was (a small judge's near-uniform distribution pulls every grade toward 5.5). A grader left
by an older demo with the parsed ``mt-bench-single`` is switched over (its runs are queued again).

``--backend vllm`` (``PODIUM_DEMO_BACKEND=vllm make demo``) runs the judge on vLLM, with the engine
arguments of the demo's vLLM arena models, so the worker's one engine serves the arena and the judge.
"""

from django.core.management.base import BaseCommand
from django.db import transaction

from arena.models import LanguageModel
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions
from leaderboard.judging.configs import default_instructions
from leaderboard.judging.services import (
    judge_audit_request,
    judge_audit_requeue,
    judge_candidates,
    judge_config_save,
    judge_run_request,
    judge_run_requeue,
)
from leaderboard.models import JudgeAudit, JudgeConfig, JudgeRun

DEMO_JUDGE = "smollm2-judge"
DEMO_JUDGE_MODEL = "SmolLM2-135M-Instruct"  # under PODIUM_MODELS_DIR
DEMO_BASELINE = "smollm2-135m-t0.9"
DEMO_INSTRUCTIONS = 8
DEMO_MAX_NEW_TOKENS = 64
DEMO_AUDIT_PAIRS = 16
DEMO_GRADER = "smollm2-grader"
DEMO_GRADER_CATEGORIES = ("writing", "math")
DEMO_GRADER_PROTOCOL = "mt-bench-single-logprob"  # the expected rating: a grade from any answer


# The same engine arguments as config/arena_models.demo.vllm.yaml: one pool key, one engine.
VLLM_ARGS = {"path": DEMO_JUDGE_MODEL, "kv_cache_gb": 0.5, "max_model_len": 2048}
BACKEND_ARGS = {"hf": {"path": DEMO_JUDGE_MODEL, "dtype": "float32"}, "vllm": VLLM_ARGS}


class Command(BaseCommand):
    help = "Configure the demo's judge (SmolLM2 judging the SmolLM2 variants) and queue its runs and audit."

    def add_arguments(self, parser):
        parser.add_argument("--backend", choices=sorted(BACKEND_ARGS), default="hf", help="the judge's engine")

    def handle(self, *args, **options):
        backend = options["backend"]
        baseline = LanguageModel.objects.filter(name=DEMO_BASELINE).first()
        if baseline is None:
            self.stdout.write(f"No model {DEMO_BASELINE!r} in the catalogue (run arena_models_sync first): no demo judge.")
            return
        name = DEMO_JUDGE if backend == "hf" else f"{DEMO_JUDGE}-{backend}"  # one judge per engine, both kept
        config = JudgeConfig.objects.filter(name=name).first()
        if config is None:
            config = judge_config_save(JudgeConfig(
                name=name, judge_backend=backend, judge_model_args=BACKEND_ARGS[backend],
                protocol_name="alpacaeval-logprob", baseline=baseline,
                instructions=default_instructions(DEMO_INSTRUCTIONS), max_new_tokens=DEMO_MAX_NEW_TOKENS,
            ))  # fmt: skip
        with transaction.atomic():
            queued = [run for model in judge_candidates() if (run := judge_run_request(config, model))]
            for run in config.runs.filter(status__in=JudgeRun.ACTIVE).exclude(pk__in=[r.pk for r in queued]):
                judge_run_requeue(run)  # interrupted by the last Ctrl-C
            if not config.audits.exclude(status=JudgeAudit.Status.FAILED).exists():
                judge_audit_request(config, limit=DEMO_AUDIT_PAIRS)
            else:
                for audit in config.audits.filter(status__in=(JudgeAudit.Status.PENDING, JudgeAudit.Status.RUNNING)):
                    judge_audit_requeue(audit)
        self.stdout.write(f"Judge {name}: {len(queued)} model(s) queued for judging against {DEMO_BASELINE}; "
                          f"scores at /leaderboard/judges/{config.pk}/")  # fmt: skip
        self._grader(backend)

    def _grader(self, backend: str) -> None:
        """The MT-Bench-style grader: SmolLM2 grades the arena models' answers to the bundled two-turn
        sample (1-10, turn 2 in context, maths/reasoning/coding against the questions' references).
        Inactive: it does not judge every new submission; its runs are queued here."""
        name = DEMO_GRADER if backend == "hf" else f"{DEMO_GRADER}-{backend}"
        config = JudgeConfig.objects.filter(name=name).first()
        if config is None:
            # Two of the bundled sample's two-turn questions (writing, and maths with its reference): each
            # grade is up to 512 generated tokens, several seconds each on a CPU worker.
            sample = [q for q in read_questions(SAMPLE_QUESTIONS) if q.category in DEMO_GRADER_CATEGORIES]
            items = [{"id": q.question_id, "turns": list(q.turns), "category": q.category, "references": list(q.references)}
                     if q.references else {"id": q.question_id, "turns": list(q.turns), "category": q.category}
                     for q in sample]  # fmt: skip
            config = judge_config_save(JudgeConfig(
                name=name, judge_backend=backend, judge_model_args=BACKEND_ARGS[backend],
                protocol_name=DEMO_GRADER_PROTOCOL, instructions=items, max_new_tokens=DEMO_MAX_NEW_TOKENS, active=False,
            ))  # fmt: skip
        elif config.protocol_name == "mt-bench-single" and not config.protocol_yaml.strip():
            config.protocol_name = DEMO_GRADER_PROTOCOL  # an older demo's parsed grader, which graded nothing
            config = judge_config_save(config)
        with transaction.atomic():
            queued = [run for model in judge_candidates() if model.in_arena and (run := judge_run_request(config, model))]
            for run in config.runs.filter(status__in=JudgeRun.ACTIVE).exclude(pk__in=[r.pk for r in queued]):
                judge_run_requeue(run)
        self.stdout.write(f"Grader {name}: {len(queued)} arena model(s) queued; grades at /leaderboard/judges/{config.pk}/")
