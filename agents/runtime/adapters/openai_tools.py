"""Middleware for OpenAI-style tool calling (the ``openai`` client's chat-completions request and response shapes).

Before the request: the function tools of ``tools=[{"type": "function", "function": {"name", "parameters"}}]`` are
declared in the gate's context mapping (from their JSON Schema) and the tools a rule forbids outright in the current
context are removed from what the model is offered. After the response: every returned ``tool_calls`` entry is
decided (its JSON ``arguments`` must fit the declared schema); a blocked one is replaced, before anything executes
it, by a call of the fallback a⊥ (``function.name`` = the gate's fallback, e.g. ``safe_refusal``; ``arguments`` =
``{"refused": tool, "rules": [...], "reason": ...}``), keeping its id so the conversation stays well formed.
:meth:`OpenAIToolGate.run_tool_calls` executes the allowed calls and answers fallback calls with the refusal.

Streaming is refused (``stream=True`` raises ``GateError``): tool calls would reach the caller before being screened.
Works with any object with ``chat.completions.create(**kwargs)`` returning a ``ChatCompletion`` (``openai.OpenAI``,
an OpenAI-compatible server such as vLLM or llama.cpp behind it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scars.agents.runtime.gate import ContextMappingError, Gate, GateDecision, GateError, ToolSignature


class OpenAIToolGate:
    """The gate as OpenAI tool-calling middleware (module docstring)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.fallback = gate.fallback_name
        self.decisions: list[GateDecision] = []  # the decisions of the last screened response

    def declare(self, tools: Sequence[Mapping[str, Any]]) -> None:
        """Declare every function tool of an OpenAI ``tools`` list in the gate's context mapping."""
        for tool in tools:
            fn = tool.get("function") if tool.get("type") == "function" else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise ContextMappingError(f"not an OpenAI function tool: {dict(tool)!r:.200}")
            self.gate.mapping.declare(ToolSignature.from_json_schema(fn["name"], fn.get("parameters")))

    def offered(self, tools: Sequence[Mapping[str, Any]], context: Mapping[str, Any] | None = None) -> list:
        """``tools`` without the ones a rule forbids outright in ``context``."""
        self.declare(tools)
        names = [t["function"]["name"] for t in tools]
        masked = self.gate.masked_tools(names, context)
        return [t for t in tools if t["function"]["name"] not in masked]

    def screen(self, completion: Any, context: Mapping[str, Any] | None = None) -> Any:
        """A copy of ``completion`` whose blocked tool calls are replaced by fallback calls (module docstring)."""
        out = completion.model_copy(deep=True)
        self.decisions = []
        for choice in out.choices:
            calls = choice.message.tool_calls or []
            for i, call in enumerate(calls):
                if getattr(call, "type", "function") != "function":
                    decision = GateDecision(
                        False,
                        str(getattr(call, "type", "?")),
                        None,
                        (),
                        ContextMappingError("not a function call"),
                    )
                else:
                    decision = self._decide(call.function.name, call.function.arguments, context)
                self.decisions.append(decision)
                if not decision.allowed:
                    calls[i] = self._fallback_call(call, decision)
        return out

    def _decide(self, name: str, arguments: str, context: Mapping[str, Any] | None) -> GateDecision:
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            error = ContextMappingError(f"tool {name!r}: arguments are not JSON ({exc.msg} at {exc.pos})")
            return GateDecision(False, name, None, (), error)
        return self.gate.check(name, parsed, context)

    def _fallback_call(self, call: Any, decision: GateDecision) -> Any:
        body = {"refused": decision.tool, "rules": list(decision.fired), "reason": decision.reason}
        return call.model_copy(
            update={
                "function": call.function.model_copy(
                    update={"name": self.fallback, "arguments": json.dumps(body)}
                )
            }
        )

    def create(self, client: Any, *, context: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """``client.chat.completions.create(**kwargs)`` with the masked tools removed from ``tools`` and the
        response screened. When every tool is masked, the request goes without tools (the model can only answer)."""
        if kwargs.get("stream"):
            raise GateError(
                "stream=True: a streamed response's tool calls would reach the caller before they are screened; "
                "call without stream (the middleware screens whole responses)"
            )
        tools = kwargs.pop("tools", None)
        if tools:
            offered = self.offered(tools, context)
            if offered:
                kwargs["tools"] = offered
            else:
                kwargs.pop("tool_choice", None)
        return self.screen(client.chat.completions.create(**kwargs), context)

    def run_tool_calls(
        self,
        completion: Any,
        functions: Mapping[str, Callable[..., Any]],
        context: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Execute a screened completion's tool calls: allowed ones through ``functions[name](**arguments)``, fallback
        ones answered with the refusal. Returns the ``{"role": "tool", "tool_call_id", "content"}`` messages."""
        messages = []
        for call in completion.choices[0].message.tool_calls or []:
            name, arguments = call.function.name, json.loads(call.function.arguments or "{}")
            if name == self.fallback:
                content = f"refused by the scars gate: {arguments.get('reason', 'no reason given')}"
            else:
                self.gate.enforce(
                    name, arguments, context
                )  # defence in depth: an unscreened completion fails closed here
                content = str(functions[name](**arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return messages
