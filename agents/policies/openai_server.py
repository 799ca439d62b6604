"""OpenAI-compatible server backend (vLLM, Ollama, llama.cpp server): π_0 from a model behind an HTTP API.

Two ways to choose, picked by ``mode``:
- ``"logprobs"``: choice scoring. For each admissible command the server's ``/v1/completions`` endpoint is asked to
  echo the prompt + command with ``logprobs`` and ``max_tokens=0``; the command's logit is the sum of the log-probs
  of its own tokens (those past the prompt's text offset). vLLM and llama.cpp's server support this.
- ``"guided_choice"``: for servers without prompt log-probs (e.g. Ollama). ``/v1/chat/completions`` is asked to
  answer with one of the commands (vLLM's ``guided_choice`` extra field; other servers get the list in the prompt)
  and the answer gets logit 0, every other command ``-unchosen_penalty``. The scars mask is applied BEFORE choice:
  masked commands are removed from the list the server may choose from, so it cannot pick one.

Only the standard library is used (urllib), so the default install stays light.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence

import numpy as np

from agents.policies.base import PolicyInput, build_prompt, utterance_prompt
from synthesis.dsl import Action
from synthesis.errors import ConfigError, ScarsError

MODES = ("logprobs", "guided_choice")


class ServerError(ScarsError):
    """The model server answered with an error or something that is not an OpenAI-compatible response."""


class OpenAICompatiblePolicy:
    name = "openai"
    writes_text = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        mode: str = "logprobs",
        api_key: str = "EMPTY",
        timeout: float = 60.0,
        unchosen_penalty: float = 20.0,
    ):
        if mode not in MODES:
            raise ConfigError(f"server mode {mode!r} is not one of {MODES}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.mode = mode
        self.api_key = api_key
        self.timeout = timeout
        self.unchosen_penalty = unchosen_penalty

    def _post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ServerError(
                f"{self.base_url}{path} answered HTTP {exc.code}: {exc.read()[:300]!r}"
            ) from exc
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
            raise ServerError(f"{self.base_url}{path} failed: {exc}") from exc

    def utter(self, inp: PolicyInput, action: Action, blocked) -> str:
        """The model's own short sentence about its chosen action (its text output, read by z_I)."""
        return self.write_text(utterance_prompt(inp, action), max_tokens=24)

    def write_text(self, prompt: str, *, max_tokens: int = 256) -> str:
        """Free text from the model (reflections, skill descriptions, LLM-only patches)."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
            "max_tokens": max_tokens,
        }
        try:
            return str(self._post("/v1/chat/completions", body)["choices"][0]["message"]["content"]).strip()
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(f"the server's chat completion has no message content ({exc})") from exc

    def _score(self, prompt: str, command: str) -> float:
        body = {
            "model": self.model,
            "prompt": f"{prompt} {command}",
            "max_tokens": 0,
            "echo": True,
            "logprobs": 1,
            "temperature": 0.0,
        }
        try:
            lp = self._post("/v1/completions", body)["choices"][0]["logprobs"]
            offsets, token_logprobs = lp["text_offset"], lp["token_logprobs"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(
                f"the server returned no prompt log-probs ({exc}); use mode='guided_choice'"
            ) from exc
        return float(
            sum(p for o, p in zip(offsets, token_logprobs, strict=True) if o >= len(prompt) and p is not None)
        )

    def logits(
        self, inp: PolicyInput, rng: np.random.Generator, masked: Sequence[bool] | None = None
    ) -> np.ndarray:
        prompt = build_prompt(inp)
        commands = [a.text or a.name for a in inp.actions]
        if self.mode == "logprobs":
            return np.array([self._score(prompt, c) for c in commands])
        allowed = [c for c, m in zip(commands, masked or [False] * len(commands), strict=True) if not m]
        if not allowed:
            return np.zeros(len(commands))
        listing = "\n".join(f"- {c}" for c in allowed)
        body = {
            "model": self.model,
            "messages": [
                {
                    "role": "user",
                    "content": f"{prompt}\nAnswer with exactly one of these commands:\n{listing}",
                }
            ],
            "temperature": 0.0,
            "max_tokens": 64,
            "guided_choice": allowed,
        }
        answer = self._post("/v1/chat/completions", body)["choices"][0]["message"]["content"].strip()
        chosen = answer if answer in allowed else next((c for c in allowed if answer.startswith(c)), None)
        if chosen is None:
            raise ServerError(f"the server answered {answer!r}, which is none of the allowed commands")
        return np.array([0.0 if c == chosen else -self.unchosen_penalty for c in commands])
