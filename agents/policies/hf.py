"""HuggingFace transformers backend (optional extra ``hf``): a real causal LM as the base policy π_0.

Choice scoring: each admissible command is scored by its log-likelihood under the model given the prompt built
from the context window (``build_prompt``): l(a) = Σ_k log p(tok_k | prompt, tok_<k). Generation: when the model
writes its action freely, the scars mask is a real ``transformers.LogitsProcessor`` (:class:`ScarsLogitsProcessor`)
that lets the model emit only token sequences that spell an admissible, unmasked command — a masked command gets
probability exactly 0 at the token level (paper §3.1: "the mechanism may be a logits processor").

Works with any local model path (``HFPolicy.from_pretrained(path)``); nothing is downloaded at run time
(``local_files_only=True``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.policies.base import PolicyInput, build_prompt, utterance_prompt
from synthesis.dsl import Action
from synthesis.errors import ConfigError


def _require_transformers():
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ConfigError(
            "backend 'hf' needs the optional extra: pip install torch==2.13.0 && pip install -e '.[hf]'"
        ) from exc
    return torch, transformers


def allowed_next_tokens(
    sequences: Sequence[tuple[int, ...]], generated: tuple[int, ...], eos: int
) -> list[int]:
    """The tokens that continue some allowed token sequence after ``generated`` (EOS once one is complete; only EOS
    when ``generated`` left every allowed path, which a processor built on this never lets happen)."""
    n = len(generated)
    nxt = {seq[n] if len(seq) > n else eos for seq in sequences if seq[:n] == generated}
    return sorted(nxt) if nxt else [eos]


def make_scars_logits_processor(tokenizer, prompt_len: int, allowed: Sequence[str]):
    """Build a ``LogitsProcessor`` that restricts generation to the token sequences of ``allowed`` commands.

    The allowed set is the admissible commands minus those the control plane masks, so a masked command can
    never be generated. After a full command the only allowed token is EOS.
    """
    torch, transformers = _require_transformers()
    eos = tokenizer.eos_token_id
    sequences = [tuple(tokenizer(" " + cmd, add_special_tokens=False)["input_ids"]) for cmd in allowed]
    if not sequences:
        raise ConfigError(
            "every admissible command is masked; the caller must take the safe fallback instead"
        )

    class ScarsLogitsProcessor(transformers.LogitsProcessor):
        """Hard mask at the token level: −inf for every token that does not continue an allowed command."""

        def __call__(self, input_ids, scores):
            out = torch.full_like(scores, float("-inf"))
            for row in range(input_ids.shape[0]):
                generated = tuple(input_ids[row, prompt_len:].tolist())
                idx = torch.tensor(allowed_next_tokens(sequences, generated, eos), dtype=torch.long)
                out[row, idx] = scores[row, idx]
            return out

    return ScarsLogitsProcessor(), sequences


class HFPolicy:
    """A causal LM scoring admissible commands by log-likelihood; generation governed by a logits processor."""

    name = "hf"
    writes_text = True

    def __init__(self, model, tokenizer, *, max_prompt_tokens: int = 1024):
        self.torch, _ = _require_transformers()
        self.model = model.eval()
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.max_prompt_tokens = max_prompt_tokens

    @classmethod
    def from_pretrained(cls, path: str, **kw) -> HFPolicy:
        _, transformers = _require_transformers()
        tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        return cls(model, tok, **kw)

    def _prompt_ids(self, inp: PolicyInput) -> list[int]:
        ids = self.tokenizer(build_prompt(inp), add_special_tokens=False)["input_ids"]
        return ids[-self.max_prompt_tokens :]

    def logits(self, inp: PolicyInput, rng: np.random.Generator) -> np.ndarray:
        torch = self.torch
        prompt = self._prompt_ids(inp)
        conts = [
            self.tokenizer(" " + (a.text or a.name), add_special_tokens=False)["input_ids"]
            for a in inp.actions
        ]
        rows = [prompt + c for c in conts]
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            attn[i, : len(r)] = 1
        with torch.no_grad():
            logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=attn).logits.float(), dim=-1)
        scores = np.empty(len(rows))
        for i, c in enumerate(conts):
            start = len(prompt)
            positions = torch.arange(start - 1, start - 1 + len(c))
            scores[i] = float(logp[i, positions, torch.tensor(c)].sum())
        return scores

    def utter(self, inp: PolicyInput, action: Action, blocked) -> str:
        """The model's own short sentence about its chosen action (its text output, read by z_I)."""
        return self.write_text(utterance_prompt(inp, action), max_new_tokens=24)

    def write_text(self, prompt: str, *, max_new_tokens: int = 96) -> str:
        """Free text from the model (greedy): reflections, skill descriptions, LLM-only patches."""
        torch = self.torch
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"][-self.max_prompt_tokens :]
        with torch.no_grad():
            out = self.model.generate(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return self.tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True).strip()

    def generate(self, inp: PolicyInput, masked: Sequence[bool], *, max_new_tokens: int = 24) -> Action:
        """Let the model write its action, under the scars mask as a logits processor. Greedy decoding."""
        torch, transformers = self.torch, _require_transformers()[1]
        allowed = [a for a, m in zip(inp.actions, masked, strict=True) if not m]
        prompt = self._prompt_ids(inp)
        processor, sequences = make_scars_logits_processor(
            self.tokenizer, len(prompt), [a.text or a.name for a in allowed]
        )
        out = self.model.generate(
            input_ids=torch.tensor([prompt]),
            attention_mask=torch.ones((1, len(prompt)), dtype=torch.long),
            logits_processor=transformers.LogitsProcessorList([processor]),
            max_new_tokens=min(max_new_tokens, max(len(s) for s in sequences) + 1),
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        generated = tuple(out[0, len(prompt) :].tolist())
        for action, seq in zip(allowed, sequences, strict=True):
            if generated[: len(seq)] == seq:
                return action
        raise ConfigError(f"generation {generated!r} spells no allowed command (max_new_tokens too small?)")
