"""HuggingFace transformers backend (optional extra ``hf``): a real causal LM as the base policy π_0.

Two modes (``agents.policies.base.POLICY_MODES``):

- **score** (``logits``): each admissible command is scored by its log-likelihood under the model given the prompt
  built from the context window (``build_prompt``): l(a) = Σ_k log p(tok_k | prompt, tok_<k). The prompt is run
  once and every command is scored in one more forward pass over its KV cache, the commands packed into one
  sequence under a tree attention mask (``score_commands``), instead of one pass of prompt + command per command.
- **generate** (``generate``): the model writes its action greedily while a real ``transformers.LogitsProcessor``
  (:class:`ScarsLogitsProcessor`) lets it emit only the token sequences that spell an admissible, unmasked command:
  a masked command gets probability exactly 0 at the token level (paper §3.1: "the mechanism may be a logits
  processor").

Works with any local model folder (``HFPolicy.from_pretrained(path, device=…, dtype=…)``); nothing is downloaded at
run time (``local_files_only=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scars.agents.policies.base import (
    Generation,
    PolicyInput,
    build_prompt,
    unmasked_commands,
    utterance_prompt,
)
from scars.agents.runtime.adapters.token_mask import (
    CommandTrie,
    make_scars_logits_processor,
    require_transformers,
)
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
DTYPES: tuple[str, ...] = ("auto", "float32", "float16", "bfloat16")


def resolve_device(device: str) -> str:
    """``auto`` → cuda when torch sees a GPU, else cpu; ``cuda`` without a GPU is a ``ConfigError``."""
    torch, _ = require_transformers()
    if device not in DEVICES:
        raise ConfigError(f"device = {device!r} is not one of {DEVICES}")
    has_cuda = bool(torch.cuda.is_available())
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        raise ConfigError(
            "device = 'cuda' but torch sees no CUDA GPU on this machine; use --device cpu or auto"
        )
    return device


def resolve_dtype(dtype: str, device: str):
    """The torch dtype for ``dtype`` on a resolved device; float16 on the CPU is refused (use bfloat16 or float32)."""
    torch, _ = require_transformers()
    if dtype not in DTYPES:
        raise ConfigError(f"dtype = {dtype!r} is not one of {DTYPES}")
    if dtype == "auto":
        if device == "cpu":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if dtype == "float16" and device == "cpu":
        raise ConfigError("dtype = 'float16' cannot run on device 'cpu'; use float32 or bfloat16 there")
    if dtype == "bfloat16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("dtype = 'bfloat16' is not supported by this GPU; use float16 or float32")
    return getattr(torch, dtype)


def check_model_folder(path: str) -> Path:
    """``path`` must be a local HuggingFace model folder (a directory holding ``config.json``)."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(
            f"model_path = {path!r} is not a local folder; give the folder of a saved HuggingFace model "
            "(models are never downloaded at run time)"
        )
    if not (folder / "config.json").is_file():
        raise ConfigError(f"model_path = {path!r} holds no config.json: it is not a HuggingFace model folder")
    return folder


class HFPolicy:
    """A causal LM: scores admissible commands by log-likelihood (one batched pass over the prompt's KV cache), or
    writes its command under the scars mask as a logits processor."""

    name = "hf"
    writes_text = True

    def __init__(self, model, tokenizer, *, max_prompt_tokens: int = 1024, device: str = "cpu"):
        self.torch, _ = require_transformers()
        self.device = device
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        positions = getattr(model.config, "max_position_embeddings", None) or getattr(
            model.config, "n_positions", None
        )
        # leave room for the command or the generated text after the prompt
        self.max_prompt_tokens = (
            max_prompt_tokens if positions is None else min(max_prompt_tokens, positions - 64)
        )

    @classmethod
    def from_pretrained(cls, path: str, *, device: str = "cpu", dtype: str = "auto", **kw) -> HFPolicy:
        """Load a local model folder on ``device`` in ``dtype`` (``ConfigError`` for anything else than a local
        HuggingFace model folder, an unusable device or dtype)."""
        _, transformers = require_transformers()
        folder = check_model_folder(path)
        resolved = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, resolved)
        try:
            tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, local_files_only=True, dtype=torch_dtype
            )
        except (OSError, ValueError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"model_path = {path!r} could not be loaded as a causal LM: {first}") from exc
        return cls(model, tok, device=resolved, **kw)

    def _prompt_ids(self, inp: PolicyInput) -> list[int]:
        ids = self.tokenizer(build_prompt(inp), add_special_tokens=False)["input_ids"]
        return ids[-self.max_prompt_tokens :]

    def _command_ids(self, command: str) -> list[int]:
        return self.tokenizer(" " + command, add_special_tokens=False)["input_ids"]

    def logits(self, inp: PolicyInput, rng: np.random.Generator) -> np.ndarray:
        """Score mode: the log-likelihood of each admissible command (in the order of ``inp.actions``)."""
        return self.score_commands(
            self._prompt_ids(inp), [self._command_ids(a.text or a.name) for a in inp.actions]
        )

    def score_commands(self, prompt: list[int], commands: Sequence[list[int]]) -> np.ndarray:
        """Σ_k log p(c_k | prompt, c_<k) for every command c, in two forward passes whatever the number of commands:

        1. the prompt, once; its last position scores every command's first token, and its KV cache is kept;
        2. every command without its last token, packed into ONE sequence after the prompt's cache, under a tree
           attention mask (each token sees the whole prompt and the earlier tokens of its own command, nothing of
           the other commands) with each command's own positions (``len(prompt) + k``).

        The cache is read once, not copied per command (``benchmarks/policies.py`` measures this against one full
        pass per command and against the cache expanded to one row per command)."""
        torch = self.torch
        if not prompt:
            raise ConfigError("the prompt tokenises to no tokens")
        if any(not c for c in commands):
            raise ConfigError("an admissible command tokenises to no tokens")
        feed: list[int] = []
        positions: list[int] = []
        owner: list[int] = []
        for i, c in enumerate(commands):
            feed += c[:-1]
            positions += range(len(prompt), len(prompt) + len(c) - 1)
            owner += [i] * (len(c) - 1)
        with torch.no_grad():
            head = self.model(input_ids=torch.tensor([prompt], device=self.device), use_cache=bool(feed))
            first = torch.log_softmax(head.logits[0, -1].float(), dim=-1)
            scores = np.array([float(first[c[0]]) for c in commands])
            if not feed:  # every command is one token: the prompt pass scored them all
                return scores
            q, dtype = len(feed), self.model.dtype
            mine = torch.tensor(owner, device=self.device)
            allowed = torch.ones((q, len(prompt) + q), dtype=torch.bool, device=self.device)
            allowed[:, len(prompt) :] = (mine[:, None] == mine[None, :]) & torch.ones(
                (q, q), dtype=torch.bool, device=self.device
            ).tril()
            mask = torch.zeros((1, 1, q, len(prompt) + q), dtype=dtype, device=self.device)
            mask = mask.masked_fill(~allowed, torch.finfo(dtype).min)
            out = self.model(
                input_ids=torch.tensor([feed], device=self.device),
                attention_mask=mask,
                position_ids=torch.tensor([positions], device=self.device),
                cache=head.cache,
                use_cache=False,
            )
            logp = torch.log_softmax(out.logits[0].float(), dim=-1)
        start = 0
        for i, c in enumerate(commands):
            if len(c) > 1:
                rows = torch.arange(start, start + len(c) - 1, device=self.device)
                scores[i] += float(logp[rows, torch.tensor(c[1:], device=self.device)].sum())
                start += len(c) - 1
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
                input_ids=torch.tensor([ids], device=self.device),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=self.device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return self.tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True).strip()

    def generate(self, inp: PolicyInput, masked: Sequence[bool]) -> Generation:
        """Generate mode: the model writes its action (greedy) under the scars mask as a logits processor."""
        torch, transformers = self.torch, require_transformers()[1]
        allowed = unmasked_commands(inp, masked)
        prompt = self._prompt_ids(inp)
        sequences = [self._command_ids(text) for _, text in allowed]
        trie = CommandTrie(sequences, self.tokenizer.eos_token_id)
        processor = make_scars_logits_processor(trie, len(prompt))
        with torch.no_grad():
            out = self.model.generate(
                input_ids=torch.tensor([prompt], device=self.device),
                attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=self.device),
                logits_processor=transformers.LogitsProcessorList([processor]),
                max_new_tokens=max(len(s) for s in sequences) + 1,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
            )
        generated = out[0, len(prompt) :].tolist()
        which = trie.command_of(generated)
        if (
            which is None
        ):  # the processor keeps every step on an allowed path; reaching here is a broken model call
            raise ConfigError(f"generation {generated!r} spells no allowed command")
        text = self.tokenizer.decode(generated, skip_special_tokens=True).strip()
        return Generation(allowed[which][0], text, processor.calls > 0)
