"""Benchmark of the HuggingFace backend's score mode (issue 17): candidates scored in one batched pass over the
prompt's KV cache, against one full pass of prompt + command per candidate.

A decision is a tier-1-like prompt (a context window of rules and memories, the task, the observation; about
``--prompt-tokens`` tokens) and ``--candidates`` admissible commands of the household world. The model is a random
GPT-2 (``--layers`` × ``--width``) with a byte-level BPE tokenizer, written to a temporary folder by
``experiments.models.write_random_causal_lm`` (nothing is downloaded; random weights cost what trained ones of the
same shape cost).

Measured in one run, on the same decisions, interleaved:
  - ``kv_cache``: ``HFPolicy.score_commands`` — one forward pass of the prompt, then the candidates packed into one
    sequence over its cache under a tree attention mask;
  - ``expanded_cache``: one forward pass of the prompt, its cache expanded to one row per candidate
    (``DynamicCache.batch_repeat_interleave``), one batched pass of the right-padded candidates over it;
  - ``per_candidate``: one forward pass of prompt + command per candidate (batch 1) — the alternative;
  - ``padded_batch``: one padded batch of prompt + command for all candidates (the backend's previous method).
All four are checked to give the same log-likelihoods (max abs difference printed).

Times are CPU time of this process (``time.process_time``) with ``--threads`` torch threads (default 1, so CPU time
is the compute), the best of ``--repeats`` interleaved passes: the shared machine runs other jobs, and wall-clock
time would mostly measure their load (it is printed too). tokens/s counts the decision's own tokens (prompt + every
command once), the same numerator for every method.

Usage:  python benchmarks/policies.py [--candidates 10] [--prompt-tokens 300] [--layers 4] [--width 256]
Prints a few readable lines, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

COMMANDS = (
    "go to countertop 1",
    "go to cabinet 3",
    "take mug 1 from countertop 2",
    "put mug 1 in/on coffeemachine 1",
    "open fridge 1",
    "heat potato 2 with microwave 1",
    "clean plate 1 with sinkbasin 1",
    "cool apple 1 with fridge 1",
    "slice bread 1 with knife 1",
    "examine diningtable 1",
    "go to stoveburner 4",
    "take knife 1 from drawer 2",
    "put pan 1 in/on stoveburner 2",
    "use desklamp 1",
    "inventory",
    "look",
)


def _decision(n: int, prompt_tokens: int, tokenizer):
    from scars.agents.policies.base import ContextItem, PolicyInput
    from scars.synthesis.dsl import Action

    if n > len(COMMANDS):
        raise SystemExit(f"--candidates {n} is more than the {len(COMMANDS)} commands of this benchmark")
    actions = tuple(Action.env(c.split()[0], c) for c in COMMANDS[:n])
    window: list[ContextItem] = [ContextItem("persona", "You are a careful household robot.")]
    k = 0
    while True:
        window.append(
            ContextItem("memory", f"Trial {k}: I heated a potato with microwave {k % 3 + 1}; it was broken.")
        )
        window.append(
            ContextItem("rule", f"Do not put a mug in/on cabinet {k % 5 + 1} while the fridge is open.")
        )
        inp = PolicyInput(
            "You are in the kitchen. On the countertop 1 you see a mug 1.",
            "heat some potato",
            {},
            actions,
            tuple(window),
        )
        from scars.agents.policies.base import build_prompt

        if len(tokenizer(build_prompt(inp))["input_ids"]) >= prompt_tokens:
            return inp
        k += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--decisions", type=int, default=5, help="Decisions per timed pass.")
    args = parser.parse_args()

    import numpy as np
    import torch

    from scars.agents.policies.hf import HFPolicy
    from scars.experiments.models import write_random_causal_lm

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_random_causal_lm(Path(tmp) / "lm", layers=args.layers, width=args.width, heads=4)
        policy = HFPolicy.from_pretrained(str(folder), device="cpu", dtype="float32")
    params = sum(p.numel() for p in policy.model.parameters())
    inp = _decision(args.candidates, args.prompt_tokens, policy.tokenizer)
    prompt = policy._prompt_ids(inp)
    commands = [policy._command_ids(a.text) for a in inp.actions]
    own_tokens = len(prompt) + sum(len(c) for c in commands)

    def per_candidate():
        out = []
        with torch.no_grad():
            for c in commands:
                logp = torch.log_softmax(policy.model(torch.tensor([prompt + c])).logits[0].float(), -1)
                out.append(sum(float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(c)))
        return np.array(out)

    def padded_batch():
        rows = [prompt + c for c in commands]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), policy.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            attn[i, : len(r)] = 1
        with torch.no_grad():
            logp = torch.log_softmax(policy.model(input_ids=ids, attention_mask=attn).logits.float(), -1)
        return np.array(
            [
                sum(float(logp[i, len(prompt) - 1 + k, t]) for k, t in enumerate(c))
                for i, c in enumerate(commands)
            ]
        )

    def expanded_cache():
        n, width = len(commands), max(len(c) for c in commands)
        with torch.no_grad():
            head = policy.model(input_ids=torch.tensor([prompt]), use_cache=True)
            first = torch.log_softmax(head.logits[0, -1].float(), -1)
            cache = head.cache
            cache.batch_repeat_interleave(n)
            ids = torch.full((n, width), policy.tokenizer.pad_token_id, dtype=torch.long)
            attn = torch.zeros((n, len(prompt) + width), dtype=torch.long)
            attn[:, : len(prompt)] = 1
            for i, c in enumerate(commands):
                ids[i, : len(c)] = torch.tensor(c)
                attn[i, len(prompt) : len(prompt) + len(c)] = 1
            pos = torch.arange(len(prompt), len(prompt) + width).expand(n, -1)
            out = policy.model(
                input_ids=ids, attention_mask=attn, position_ids=pos, cache=cache, use_cache=False
            )
            logp = torch.log_softmax(out.logits.float(), -1)
        return np.array(
            [
                float(first[c[0]]) + sum(float(logp[i, k, t]) for k, t in enumerate(c[1:]))
                for i, c in enumerate(commands)
            ]
        )

    def kv_cache():
        return policy.score_commands(prompt, commands)

    methods = {
        "kv_cache": kv_cache,
        "expanded_cache": expanded_cache,
        "per_candidate": per_candidate,
        "padded_batch": padded_batch,
    }
    reference = per_candidate()
    diffs = {name: float(np.max(np.abs(fn() - reference))) for name, fn in methods.items()}
    best = {name: (float("inf"), float("inf")) for name in methods}
    for _ in range(args.repeats):
        for name, fn in methods.items():  # interleaved: the machine's load hits every method alike
            wall0, cpu0 = time.perf_counter(), time.process_time()
            for _ in range(args.decisions):
                fn()
            wall = (time.perf_counter() - wall0) / args.decisions
            cpu = (time.process_time() - cpu0) / args.decisions
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    speedup = best["per_candidate"][1] / best["kv_cache"][1]
    print(
        f"model: random GPT-2 {args.layers}x{args.width} ({params / 1e6:.1f} M parameters), {args.threads} torch "
        f"thread(s); decision: {len(prompt)} prompt tokens, {len(commands)} commands "
        f"({sum(len(c) for c in commands)} command tokens)"
    )
    for name, (wall, cpu) in best.items():
        print(
            f"  {name:<14} {cpu * 1e3:8.1f} ms CPU/decision (wall {wall * 1e3:7.1f} ms)  "
            f"{own_tokens / cpu:9.0f} tokens/s  max |Δ log-lik| vs per-candidate {diffs[name]:.1e}"
        )
    wall_speedup = best["per_candidate"][0] / best["kv_cache"][0]
    print(
        f"  kv_cache speed-up over one pass per candidate: {speedup:.1f}x CPU, {wall_speedup:.1f}x wall (goal >= 5x)"
    )
    print(
        json.dumps(
            {
                "candidates": len(commands),
                "prompt_tokens": len(prompt),
                "parameters": params,
                "threads": args.threads,
                **{f"{n}_cpu_ms": round(c * 1e3, 2) for n, (_, c) in best.items()},
                **{f"{n}_wall_ms": round(w * 1e3, 2) for n, (w, _) in best.items()},
                **{f"{n}_tokens_per_s": round(own_tokens / c) for n, (_, c) in best.items()},
                "speedup_vs_per_candidate": round(speedup, 2),
                "speedup_vs_per_candidate_wall": round(wall_speedup, 2),
                "speedup_vs_padded_batch": round(best["padded_batch"][1] / best["kv_cache"][1], 2),
                "speedup_vs_expanded_cache": round(best["expanded_cache"][1] / best["kv_cache"][1], 2),
                "max_abs_diff": max(diffs.values()),
            }
        )
    )


if __name__ == "__main__":
    main()
