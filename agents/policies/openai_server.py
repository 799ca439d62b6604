"""OpenAI-compatible server backend (vLLM, llama.cpp's server, llama-cpp-python): π_0 from a model behind an HTTP API.

Two modes (``agents.policies.base.POLICY_MODES``), both on ``/v1/completions`` with the prompt of ``build_prompt``:

- **score** (``logits``): the server echoes prompt + command with ``logprobs`` (and one generated token, not counted);
  a command's logit is the sum of the log-probs of its own tokens (text offsets from the prompt's end to the end of
  the command). The commands of one decision
  go in one request (the completions API takes a list of prompts) when the server accepts a list, else as
  concurrent requests. vLLM and llama-cpp-python support echo; llama.cpp's C++ server does not (use generate there).
- **generate** (``generate``): the server writes the command under a structured-output choice over the UNMASKED
  commands only, so it cannot write a masked one. The parameter differs between servers (``CHOICE_PARAMS``):
  ``structured_outputs`` = ``{"choice": [...]}`` (vLLM ≥ 0.10.2; the older ``guided_choice`` was removed in 0.12),
  ``guided_choice`` (vLLM < 0.12), ``grammar`` (a GBNF alternation: llama.cpp's server and llama-cpp-python).
  ``auto`` reads the server's ``owned_by`` from ``/v1/models``. An answer outside the allowed commands means the
  server ignored the parameter: a ``ServerError`` that names the setting to change (fail closed).

At construction the backend checks the server (reachable, an OpenAI-compatible API, serving the model, accepting the
API key, and in score mode returning prompt log-probs), so a bad server fails before a run writes anything.
Only the standard library is used (urllib, threads), so the default install stays light.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from scars.agents.policies.base import (
    POLICY_MODES,
    Generation,
    PolicyInput,
    build_prompt,
    unmasked_commands,
    utterance_prompt,
)
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError, ScarsError

CHOICE_PARAMS: tuple[str, ...] = ("auto", "structured_outputs", "guided_choice", "grammar")
"""How generate mode tells the server the allowed commands (module docstring)."""
OWNERS: dict[str, str] = {"vllm": "structured_outputs", "llamacpp": "grammar", "me": "grammar"}
"""``owned_by`` in ``/v1/models`` → the choice parameter that server takes (``me`` is llama-cpp-python's server)."""


class ServerError(ScarsError):
    """The model server is unreachable, answers with an error, or answers something that is not the API."""


def gbnf_choice(commands: Sequence[str]) -> str:
    """A GBNF grammar whose only sentences are the commands (an optional leading space, then one command)."""

    def literal(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return 'root ::= " "? (' + " | ".join(literal(c) for c in commands) + ")"


class OpenAICompatiblePolicy:
    name = "openai"
    writes_text = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        policy_mode: str = "score",
        api_key: str = "",
        choice_param: str = "auto",
        timeout: float = 60.0,
        workers: int = 8,
    ):
        if policy_mode not in POLICY_MODES:
            raise ConfigError(f"policy_mode = {policy_mode!r} is not one of {POLICY_MODES}")
        if choice_param not in CHOICE_PARAMS:
            raise ConfigError(f"choice_param = {choice_param!r} is not one of {CHOICE_PARAMS}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.policy_mode = policy_mode
        self.api_key = api_key
        self.timeout = timeout
        self.workers = workers
        self.owner = self._check_model()
        self.choice_param = choice_param
        if policy_mode == "generate" and choice_param == "auto":
            self.choice_param = self._detect_choice_param()
        self.batched_prompts = False
        # echoed prompt log-probs are a function of the text alone: a text scored once is not sent again (a re-plan
        # the prompt does not show, or a step whose prompt did not change, re-scores the same texts)
        self._scored: OrderedDict[str, tuple[list, list]] = OrderedDict()
        self.cache_size = 4096
        self.scored_requests = 0
        if policy_mode == "score":
            self.batched_prompts = self._probe_prompt_logprobs()

    # -- HTTP ---------------------------------------------------------------------------------------------------
    def _request(self, path: str, body: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers=headers,
        )
        url = f"{self.base_url}{path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            if exc.code in (401, 403):
                raise ServerError(
                    f"{url} refused the API key (HTTP {exc.code}): pass --api-key or set OPENAI_API_KEY"
                ) from exc
            raise ServerError(f"{url} answered HTTP {exc.code}: {detail}") from exc
        except TimeoutError as exc:
            raise ServerError(
                f"the model server at {self.base_url} did not answer {path} within {self.timeout:g} s "
                "(server_timeout)"
            ) from exc
        except (urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise ServerError(
                    f"the model server at {self.base_url} did not answer {path} within {self.timeout:g} s "
                    "(server_timeout)"
                ) from exc
            raise ServerError(
                f"cannot reach the model server at {self.base_url} ({reason}): is it running?"
            ) from exc
        try:
            reply = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ServerError(
                f"{url} did not answer with JSON ({raw[:80]!r}…): {self.base_url} is not an OpenAI-compatible API"
            ) from exc
        if not isinstance(reply, dict):
            raise ServerError(f"{url} answered {reply!r:.80}, not an OpenAI-compatible response object")
        return reply

    def _check_model(self) -> str:
        """GET /v1/models: the server is an OpenAI-compatible API and serves ``self.model``; returns its owner."""
        listing = self._request("/v1/models")
        data = listing.get("data")
        if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m for m in data):
            raise ServerError(
                f"{self.base_url}/v1/models has no model list ('data'): not an OpenAI-compatible API"
            )
        served = {str(m["id"]): str(m.get("owned_by", "")) for m in data}
        if self.model not in served:
            raise ServerError(
                f"model {self.model!r} is not served by {self.base_url}; it serves: {', '.join(served) or 'nothing'}"
            )
        return served[self.model]

    def _detect_choice_param(self) -> str:
        try:
            return OWNERS[self.owner]
        except KeyError:
            raise ServerError(
                f"cannot tell which structured-output parameter {self.base_url} takes (owned_by {self.owner!r}); "
                f"set --choice-param to one of {CHOICE_PARAMS[1:]}"
            ) from None

    # -- score mode ---------------------------------------------------------------------------------------------
    def _echo_body(self, prompts: str | list[str]) -> dict:
        return {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": 1,  # 0 means "unlimited" on llama-cpp-python; the one generated token is not counted
            "echo": True,
            "logprobs": 1,
            "temperature": 0.0,
        }

    def _no_echo(self, why: str) -> ServerError:
        return ServerError(
            f"{self.base_url} returns no prompt log-probs for echo=True ({why}); score mode needs them — "
            "use --policy-mode generate with this server"
        )

    def _probe_prompt_logprobs(self) -> bool:
        """Score mode needs echoed prompt log-probs; returns whether the server scores a list of prompts at once."""
        try:
            one = self._request("/v1/completions", self._echo_body("Hello there"))
        except ServerError as exc:
            raise self._no_echo(str(exc)) from exc
        self._parse_logprobs(one, 1)
        try:
            two = self._request("/v1/completions", self._echo_body(["Hello there", "Good night"]))
            self._parse_logprobs(two, 2)
        except ServerError:
            return False  # one prompt per request: the commands go as concurrent requests
        return True

    def _parse_logprobs(self, reply: dict, n: int) -> list[tuple[list[int], list[float | None]]]:
        try:
            choices = sorted(reply["choices"], key=lambda c: c.get("index", 0))
            if len(choices) != n:
                raise ServerError(f"the server answered {len(choices)} choices for {n} prompts")
            out = []
            for choice in choices:
                lp = choice["logprobs"]
                offsets, token_logprobs = list(lp["text_offset"]), list(lp["token_logprobs"])
                if not offsets or len(offsets) != len(token_logprobs):
                    raise self._no_echo("empty or mismatched text_offset / token_logprobs")
                out.append((offsets, token_logprobs))
            return out
        except (KeyError, IndexError, TypeError) as exc:
            raise self._no_echo(f"no logprobs in the answer: {exc!r}") from exc

    def logits(self, inp: PolicyInput, rng: np.random.Generator) -> np.ndarray:
        """Score mode: the log-likelihood of each admissible command (in the order of ``inp.actions``)."""
        prompt = build_prompt(inp)
        texts = [f"{prompt} {a.text or a.name}" for a in inp.actions]
        missing = list(dict.fromkeys(t for t in texts if t not in self._scored))
        if missing:
            self.scored_requests += len(missing)
            if self.batched_prompts:
                fresh = self._parse_logprobs(
                    self._request("/v1/completions", self._echo_body(missing)), len(missing)
                )
            else:
                with ThreadPoolExecutor(max_workers=min(self.workers, len(missing))) as pool:
                    replies = list(
                        pool.map(lambda t: self._request("/v1/completions", self._echo_body(t)), missing)
                    )
                fresh = [self._parse_logprobs(r, 1)[0] for r in replies]
            for text, scored in zip(missing, fresh, strict=True):
                self._scored[text] = scored
        for text in texts:
            self._scored.move_to_end(text)
        parsed = [self._scored[t] for t in texts]
        while len(self._scored) > max(self.cache_size, len(texts)):
            self._scored.popitem(last=False)
        # a command's tokens: those at or past the prompt's end and inside the echoed text (not the generated token)
        return np.array(
            [
                float(
                    sum(
                        p
                        for o, p in zip(offsets, lps, strict=True)
                        if len(prompt) <= o < len(t) and p is not None
                    )
                )
                for t, (offsets, lps) in zip(texts, parsed, strict=True)
            ]
        )

    # -- generate mode ------------------------------------------------------------------------------------------
    def _choice_fields(self, commands: list[str]) -> dict:
        if self.choice_param == "structured_outputs":
            return {"structured_outputs": {"choice": commands}}
        if self.choice_param == "guided_choice":
            return {"guided_choice": commands}
        return {"grammar": gbnf_choice(commands)}

    def generate(self, inp: PolicyInput, masked: Sequence[bool]) -> Generation:
        """Generate mode: the server writes one of the unmasked commands (structured-output choice)."""
        allowed = unmasked_commands(inp, masked)
        commands = [text for _, text in allowed]
        body = {
            "model": self.model,
            "prompt": build_prompt(inp),
            "max_tokens": 64,
            "temperature": 0.0,
            **self._choice_fields(commands),
        }
        reply = self._request("/v1/completions", body)
        try:
            answer = str(reply["choices"][0]["text"])
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(f"the server's completion has no text ({exc!r})") from exc
        written = answer.strip()
        for index, text in allowed:
            if written == text:
                return Generation(index, answer, True)
        raise ServerError(
            f"the server wrote {written[:80]!r}, none of the {len(commands)} allowed commands: it ignored the "
            f"structured-output parameter {self.choice_param!r}; set --choice-param to the one it takes "
            f"({', '.join(CHOICE_PARAMS[1:])})"
        )

    # -- text ---------------------------------------------------------------------------------------------------
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
            return str(
                self._request("/v1/chat/completions", body)["choices"][0]["message"]["content"]
            ).strip()
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(f"the server's chat completion has no message content ({exc})") from exc
