"""A ``transformers.LogitsProcessor`` factory for HuggingFace generation under the scars gate (issue 18).

The model writes its next call as text. The caller lists the candidate calls (their surface text and the call:
a DSL ``Action`` or ``(tool, arguments)``); the gate decides each one in the context, and the processor
(``agents.runtime.adapters.token_mask.make_scars_logits_processor``, the one the HF backend uses) sets −inf on every token that does
not continue an allowed candidate's tokens (``" " + text``), so a masked call gets probability exactly 0 at the token
level. ``transformers`` is imported only when the factory is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scars.agents.runtime.adapters.token_mask import CommandTrie, make_scars_logits_processor
from scars.agents.runtime.gate import Gate, GateError
from scars.synthesis.dsl import Action

Candidate = tuple[str, "Action | tuple[str, Mapping[str, Any]]"]


def allowed_candidates(
    gate: Gate, candidates: Sequence[Candidate], context: Mapping[str, Any] | None = None
) -> list[tuple[str, Action | tuple[str, Mapping[str, Any]]]]:
    """The candidates the gate allows in ``context`` (a call that does not fit the mapping is not allowed); raises
    ``GateError`` when none is left — the caller takes the fallback a⊥ instead of generating."""
    allowed = []
    for text, call in candidates:
        tool, arguments = (call.name, dict(call.args)) if isinstance(call, Action) else call
        if gate.check(tool, arguments, context).allowed:
            allowed.append((text, call))
    if not allowed:
        raise GateError(
            f"every one of the {len(candidates)} candidate call(s) is masked in this context; "
            f"take the fallback {gate.fallback_name!r} instead of generating"
        )
    return allowed


def logits_processor(
    gate: Gate,
    tokenizer: Any,
    prompt_len: int,
    candidates: Sequence[Candidate],
    context: Mapping[str, Any] | None = None,
):
    """``(processor, allowed)``: a ``transformers.LogitsProcessor`` for ``model.generate(...,
    logits_processor=LogitsProcessorList([processor]))`` whose generations can only spell an allowed candidate, and
    the allowed candidates (match the generated tokens against them to get the call)."""
    allowed = allowed_candidates(gate, candidates, context)
    sequences = [tokenizer(" " + text, add_special_tokens=False)["input_ids"] for text, _ in allowed]
    processor = make_scars_logits_processor(CommandTrie(sequences, tokenizer.eos_token_id), prompt_len)
    return processor, allowed
