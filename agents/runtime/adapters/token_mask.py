"""The scars mask at the token level: the allowed commands' token sequences as a prefix tree (``CommandTrie``) and a
``transformers.LogitsProcessor`` over it that lets a model spell nothing else (``make_scars_logits_processor``).

The HuggingFace adapter of the library (``adapters.hf``) and the experiment's HF backend (``agents.policies.hf``)
both use it; torch and transformers load when a processor is made, not on import.
"""

from __future__ import annotations

from collections.abc import Sequence

from scars.synthesis.errors import ConfigError


def require_transformers():
    """torch and transformers, or one ``ConfigError`` naming the extra that installs them."""
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ConfigError(
            "the HuggingFace parts need the optional extra: pip install torch==2.13.0 && pip install -e '.[hf]'"
        ) from exc
    return torch, transformers


class CommandTrie:
    """The token sequences of the allowed commands as a prefix tree: which tokens may follow a generated prefix.

    A complete command may be followed only by EOS (or by the continuation of a longer command it is a prefix of).
    """

    def __init__(self, sequences: Sequence[Sequence[int]], eos: int):
        self.eos = eos
        self.next: dict[tuple[int, ...], set[int]] = {}
        self.complete: dict[tuple[int, ...], int] = {}
        for index, seq in enumerate(sequences):
            seq = tuple(seq)
            if not seq:
                raise ConfigError(f"allowed command {index} tokenises to no tokens")
            for k in range(len(seq)):
                self.next.setdefault(seq[:k], set()).add(seq[k])
            self.complete.setdefault(seq, index)
            self.next.setdefault(seq, set()).add(eos)

    def allowed_after(self, prefix: tuple[int, ...]) -> set[int]:
        """Tokens that keep ``prefix`` on the path of some allowed command (only EOS when it left every path)."""
        return self.next.get(prefix, {self.eos})

    def command_of(self, generated: Sequence[int]) -> int | None:
        """Index of the allowed command ``generated`` spells (up to the first EOS), or None."""
        tokens = list(generated)
        if self.eos in tokens:
            tokens = tokens[: tokens.index(self.eos)]
        return self.complete.get(tuple(tokens))


def make_scars_logits_processor(trie: CommandTrie, prompt_len: int):
    """A ``LogitsProcessor`` that restricts generation to the token sequences of the trie's commands: −inf for
    every token that does not continue an allowed command. ``calls`` counts the decoding steps it governed."""
    torch, transformers = require_transformers()

    class ScarsLogitsProcessor(transformers.LogitsProcessor):
        """Hard mask at the token level (the scars mask as a logits processor)."""

        def __init__(self) -> None:
            self.calls = 0

        def __call__(self, input_ids, scores):
            self.calls += 1
            out = torch.full_like(scores, float("-inf"))
            for row in range(input_ids.shape[0]):
                prefix = tuple(input_ids[row, prompt_len:].tolist())
                idx = torch.tensor(sorted(trie.allowed_after(prefix)), dtype=torch.long, device=scores.device)
                out[row, idx] = scores[row, idx]
            return out

    return ScarsLogitsProcessor()
