"""The jail: untrusted programs (a model's code completions) run and judged where they cannot reach,
see or bend anything but their own answer.

One room, one job: run a program written by the model under evaluation in a fresh bubblewrap jail and
return a verdict built from plain values that the program cannot forge. The engine calls it only
through the names below; nothing here imports the engine.

Threat model (docs/security.md, "Running untrusted code: the jail"): the attacker is a submitter who
trains a model to cheat. Its completions may try to leave the jail (host files, the network, other
processes), exhaust the machine (memory, processes, descriptors, kernel pools shared by every jail),
forge the verdict, or see or bend the tests (read the hidden tests, rebind a name the tests compute
with). Out of scope: kernel exploits and memorised answers (a contamination question).

The rooms' modules:

- :mod:`~evalcore.jail.sandbox`: the jail itself (bwrap, namespaces, limits, a hand-built ``/dev``,
  descriptors in, bounded output out); :mod:`~evalcore.jail.seccomp` its syscall filter and
  :mod:`~evalcore.jail.jail_cgroup` its cgroup (memory, pids, TCP buffers);
- :mod:`~evalcore.jail.verdicts`: tests run against a candidate by the referee, static tampering checks;
  :mod:`~evalcore.jail.testplan` the names the tests may take from the candidate;
- inside the jail: :mod:`~evalcore.jail.jailside` (the referee and the candidate's host),
  :mod:`~evalcore.jail.jailwire` (the verdict's wire format), :mod:`~evalcore.jail.jailaudit` (state and
  reach audits);
- :mod:`~evalcore.jail.code_eval`: Hugging Face ``evaluate``'s ``code_eval`` with every program jailed.
"""

from evalcore.jail.code_eval import jailed_evaluate, uses_code_eval
from evalcore.jail.sandbox import (
    ExecutionResult,
    SandboxUnavailable,
    jail_protocol,
    require_jail,
    run_program,
)
from evalcore.jail.verdicts import (
    TestVerdict,
    collecting_tampering,
    report_tampering,
    require_referee,
    run_tests,
    static_tampering,
)

__all__ = [
    "ExecutionResult",
    "SandboxUnavailable",
    "TestVerdict",
    "collecting_tampering",
    "jail_protocol",
    "jailed_evaluate",
    "report_tampering",
    "require_jail",
    "require_referee",
    "run_program",
    "run_tests",
    "static_tampering",
    "uses_code_eval",
]
