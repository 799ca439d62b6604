"""The scars mask behind vLLM's per-request logits-processor interface (issue 18).

vLLM's per-request logits processor is a callable invoked once per generated token as ``fn(output_token_ids, logits)``
or ``fn(prompt_token_ids, output_token_ids, logits)`` — ``logits`` a 1-D tensor over the vocabulary — whose returned
tensor is sampled from. The V0 engine takes it as ``SamplingParams(logits_processors=[fn])``; the V1 engine (vLLM ≥
0.10) runs such callables through a subclass of ``vllm.v1.sample.logits_processor.AdapterLogitsProcessor`` whose
``new_req_logits_processor(params)`` returns one (vLLM cannot be installed here: the tests check the callable contract
with both signatures, on numpy arrays and torch tensors). :class:`VLLMLogitsProcessor` accepts both forms: it sets −inf on every
token that does not continue an allowed candidate call (the gate decides the candidates, as in ``adapters.hf``) and
returns the same tensor. It only indexes ``logits`` (works on a torch tensor or a numpy array); vLLM is not imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scars.agents.runtime.adapters.hf import Candidate, allowed_candidates
from scars.agents.runtime.adapters.token_mask import CommandTrie
from scars.agents.runtime.gate import Gate
from scars.synthesis.errors import ConfigError


class VLLMLogitsProcessor:
    """A vLLM logits processor restricted to the calls the gate allows (module docstring).

    encode: text → token ids (e.g. ``lambda s: tokenizer.encode(s, add_special_tokens=False)``), applied to each
    candidate's text as given; eos_token_id: the token that ends a generation once a call is spelled.
    """

    def __init__(
        self,
        gate: Gate,
        encode: Callable[[str], Sequence[int]],
        eos_token_id: int,
        candidates: Sequence[Candidate],
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self.allowed = allowed_candidates(gate, candidates, context)
        self.sequences = [tuple(int(t) for t in encode(text)) for text, _ in self.allowed]
        if any(not s for s in self.sequences):
            raise ConfigError("a candidate's text encodes to no token; every candidate needs at least one")
        self.eos = int(eos_token_id)
        self.trie = CommandTrie(self.sequences, self.eos)

    def __call__(self, *args: Any) -> Any:
        if len(args) == 2:
            output_ids, logits = args
        elif len(args) == 3:
            _, output_ids, logits = args
        else:
            raise TypeError(
                f"a vLLM logits processor is called with (output_token_ids, logits) or "
                f"(prompt_token_ids, output_token_ids, logits); got {len(args)} arguments"
            )
        idx = sorted(self.trie.allowed_after(tuple(int(t) for t in output_ids)))
        keep = logits[idx]
        logits[:] = float("-inf")
        logits[idx] = keep
        return logits

    def call_of(self, output_ids: Sequence[int]) -> Any:
        """The allowed call a finished generation spells (None if it spells none)."""
        generated = tuple(int(t) for t in output_ids)
        for (_, call), seq in zip(self.allowed, self.sequences, strict=True):
            if generated[: len(seq)] == seq and generated[len(seq) : len(seq) + 1] in ((), (self.eos,)):
                return call
        return None
