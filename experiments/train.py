"""``scars train``: RL learners on the worlds' RL views, shielded or not (issue 29).

Learners (``TrainConfig.learner``):

- ``maskable-ppo`` — sb3-contrib's MaskablePPO on the household (``envs.rl.HouseholdRLView`` in a
  ``DummyVecEnv``), its policy a shared *slot scorer* (``SlotScorer``: one small MLP scores every slot from the
  global features and that slot's features, DRRN/TWOSOME-style, so what is learned about one slot holds for all).
- ``rllib-ppo`` — RLlib's PPO on the new API stack with the action mask applied in the RLModule
  (``ray.rllib.examples.rl_modules.classes.action_masking_rlm.ActionMaskingTorchRLModule``): single-agent on the
  household (``dict_obs``), multi-agent on the commons (``envs.rl.ResourceRLView`` under RLlib's
  ``ParallelPettingZooEnv``, five learning seats sharing one policy; punishment is an action of its phase).

Shields: none, scars, oracle, blocklist — ``agents.shield.ScarShield`` on the household,
``agents.shield.ParallelScarShield`` (one scars agent per seat) on the commons.

A run folder holds ``config.json`` (replay: ``scars train --config RUN/config.json``), ``episodes.csv`` (one row
per training episode: timesteps, return, world return, success, violations, cumulative violations, length, slots
masked; commons: GovSim's suite per episode), ``summary.json`` (final evaluation on held-out seeds with n, training
totals, the scars learned), ``checkpoints/`` (``--resume RUN`` continues from the latest), ``ledger.jsonl`` (the
scars shield's decisions) and ``provenance.json``.
"""

from __future__ import annotations

import csv
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scars.experiments.config import TrainConfig
from scars.experiments.metrics import (
    RULE_SET_COLUMNS,
    RuleSetTrace,
    probe_vectors,
    rule_set_decision,
    rule_set_flat,
    rule_set_on_probes,
    rule_set_quality,
)
from scars.experiments.report import save_figure, write_json
from scars.experiments.stats import bootstrap_ci
from scars.experiments.tracking import Tracker, TrackingSettings
from scars.synthesis.errors import ConfigError

EPISODE_COLUMNS = (
    "episode",
    "timesteps",
    "return",
    "world_return",
    "success",
    "violations",
    "cumulative_violations",
    "length",
    "masked",
)
EVAL_SEED_BASE = 1_000_000
"""Evaluation games are drawn from seeds EVAL_SEED_BASE + i: never a training episode's seed."""


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"the learner needs {module!r} ({exc.name} is not installed); install the rl extra: "
            "pip install torch==2.13.0 && pip install -e '.[rl]'"
        ) from None


# ---------------------------------------------------------------------------------------------- environments


def household_world(cfg: TrainConfig, *, dict_obs: bool = False, shaping: float | None = None):
    """One household RL view for ``cfg`` (the rules, the task type, the shaping)."""
    from scars.envs.household import RULE_LIBRARY, RuleSchedule
    from scars.envs.rl import make_household_view

    schedule = RuleSchedule.from_ids(RULE_LIBRARY) if cfg.rules == "library" else RuleSchedule()
    return make_household_view(
        schedule=schedule,
        task_type=None if cfg.task_type == "any" else cfg.task_type,
        max_steps=cfg.max_steps,
        shaping=cfg.shaping if shaping is None else shaping,
        gamma=cfg.gamma,
        dict_obs=dict_obs,
    )


def shielded(cfg: TrainConfig, view, out: Path | None, share_with=None):
    """The view behind ``cfg.shield``; the learner's vectorised envs share one scars agent (``share_with``: the
    first env's shield), whose ledger is ``out/ledger.jsonl``."""
    from scars.agents.shield import ScarShield

    ledger = out / "ledger.jsonl" if out is not None and cfg.shield in ("scars", "blocklist") else None
    return ScarShield(
        view,
        shield=cfg.shield,
        ledger_path=ledger,
        seed=cfg.seed,
        search_iterations=cfg.search_iterations,
        share_with=share_with,
        adapter=view.adapter,  # the world as the shield's agent sees it: the shield names none
    )


class EpisodeLog:
    """Per-episode rows from step results (one accumulator per env), written to ``episodes.csv`` as they end."""

    def __init__(self, path: Path, *, tracker: Tracker | None = None, start: Mapping | None = None):
        self.path, self.tracker = path, tracker
        start = start or {}
        self.episodes = int(start.get("episode", 0))
        self.cumulative = int(start.get("cumulative_violations", 0))
        self.rows: list[dict[str, Any]] = []
        self._acc: dict[Any, dict[str, float]] = {}
        new = not path.exists()
        self._file = path.open("a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=EPISODE_COLUMNS)
        if new:
            self._writer.writeheader()

    @staticmethod
    def _fresh() -> dict[str, float]:
        return {"return": 0.0, "world_return": 0.0, "violations": 0, "length": 0, "masked": 0}

    def step(self, env: Any, reward: float, info: Mapping[str, Any], done: bool, timesteps: int) -> None:
        """One step of env ``env`` (any key: one accumulator per env)."""
        acc = self._acc.setdefault(env, self._fresh())
        acc["return"] += float(reward)
        acc["world_return"] += float(info.get("world_reward", reward))
        violations = len(info.get("violations", ()))
        acc["violations"] += violations
        self.cumulative += violations
        acc["length"] += 1
        mask = info.get("action_mask")
        if mask is not None:
            acc["masked"] += int(len(info.get("admissible_commands", ())) - int(np.sum(mask)))
        if done:
            self.episodes += 1
            row = {
                "episode": self.episodes,
                "timesteps": timesteps,
                "success": int(bool(info.get("won", False))),
                "cumulative_violations": self.cumulative,
                **{k: round(v, 6) if isinstance(v, float) else v for k, v in acc.items()},
            }
            self._writer.writerow(row)
            self.rows.append(row)
            if self.tracker is not None:
                self.tracker.log({f"episode/{k}": v for k, v in row.items()}, step=timesteps)
            del self._acc[env]

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_episodes(path: Path) -> list[dict[str, float]]:
    with path.open(encoding="utf-8") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _last_row(path: Path) -> dict[str, float]:
    rows = read_episodes(path) if path.exists() else []
    return rows[-1] if rows else {}


# ---------------------------------------------------------------------------------------------- MaskablePPO


def slot_scorer_policy():
    """sb3-contrib's ``MaskableActorCriticPolicy`` with a shared slot scorer (module docstring); torch imported here."""
    torch = _require("torch")
    nn = torch.nn
    policies = _require("sb3_contrib.common.maskable.policies")
    layers = _require("stable_baselines3.common.torch_layers")
    from scars.envs.rl.household import GLOBAL_FEATURES, SLOT_FEATURES

    g, s = len(GLOBAL_FEATURES), len(SLOT_FEATURES)

    class SlotFeatures(layers.BaseFeaturesExtractor):
        """Features = [one score per slot, a state embedding]: the scores come from one MLP over (global, slot)."""

        def __init__(self, observation_space, hidden: int = 64):
            dim = int(observation_space.shape[0])
            self.slots = (dim - g) // s
            super().__init__(observation_space, features_dim=self.slots + hidden)
            self.scorer = nn.Sequential(
                nn.Linear(g + s, hidden),
                nn.Tanh(),
                nn.Linear(hidden, hidden),
                nn.Tanh(),
                nn.Linear(hidden, 1),
            )
            self.state = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh())

        def forward(self, obs):
            glob = obs[:, :g].unsqueeze(1).expand(-1, self.slots, -1)
            slots = obs[:, g:].reshape(-1, self.slots, s)
            scores = self.scorer(torch.cat([glob, slots], -1)).squeeze(-1)
            return torch.cat([scores, self.state(obs)], -1)

    class Scores(nn.Module):
        """The action head: the slot scores are the logits."""

        def __init__(self, k: int):
            super().__init__()
            self.k = k

        def forward(self, latent):
            return latent[..., : self.k]

    class SlotScorer(policies.MaskableActorCriticPolicy):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("features_extractor_class", SlotFeatures)
            kwargs.setdefault("net_arch", {"pi": [], "vf": [64]})
            # the value function learns on its own copy of the features: sharing them lets its regression disturb
            # the slot scores (measured: with shared features, no task-mixed run won an episode in 80k steps)
            kwargs.setdefault("share_features_extractor", False)
            super().__init__(*args, **kwargs)

        def _build(self, lr_schedule) -> None:
            super()._build(lr_schedule)
            self.action_net = Scores(int(self.action_space.n))
            self.optimizer = self.optimizer_class(
                self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
            )

    return SlotScorer


def _sb3_envs(cfg: TrainConfig, out: Path | None):
    vec = _require("stable_baselines3.common.vec_env")
    first = shielded(cfg, household_world(cfg), out)
    envs = [first] + [
        shielded(cfg, household_world(cfg), out, share_with=first) for _ in range(cfg.num_envs - 1)
    ]
    venv = vec.DummyVecEnv([lambda e=e: e for e in envs])
    venv.seed(cfg.seed)
    return venv


def train_maskable_ppo(
    cfg: TrainConfig, out: Path, *, resume: bool, tracker: Tracker, echo
) -> dict[str, Any]:
    torch = _require("torch")
    sb3_contrib = _require("sb3_contrib")
    callbacks = _require("stable_baselines3.common.callbacks")
    torch.set_num_threads(cfg.threads)
    checkpoints = out / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    venv = _sb3_envs(cfg, out)
    latest = _latest_checkpoint(checkpoints, ".zip") if resume else None
    if latest is not None:
        model = sb3_contrib.MaskablePPO.load(latest, env=venv, device="cpu")
        echo(f"resumed from {latest} at {model.num_timesteps} timesteps")
    else:
        model = sb3_contrib.MaskablePPO(
            slot_scorer_policy(),
            venv,
            n_steps=cfg.n_steps,
            batch_size=cfg.batch_size,
            n_epochs=cfg.n_epochs,
            learning_rate=cfg.learning_rate,
            ent_coef=cfg.ent_coef,
            gamma=cfg.gamma,
            seed=cfg.seed,
            device="cpu",
            verbose=0,
        )
    log = EpisodeLog(out / "episodes.csv", tracker=tracker, start=_last_row(out / "episodes.csv"))
    rule_sets = ShieldRuleSets()
    started = time.time()

    class Record(callbacks.BaseCallback):
        def _on_training_start(self) -> None:
            for i, env in enumerate(venv.envs):  # the decisions the learner acts on first
                rule_sets.at(i, env)

        def _on_step(self) -> bool:
            rewards, dones, infos = self.locals["rewards"], self.locals["dones"], self.locals["infos"]
            for i, info in enumerate(infos):
                log.step(i, float(rewards[i]), info, bool(dones[i]), self.num_timesteps)
                rule_sets.taken(i, info, bool(dones[i]))
                rule_sets.at(i, venv.envs[i])  # the next decision (a finished episode's env is already reset)
            if self.num_timesteps % cfg.checkpoint_every < cfg.num_envs:
                self.model.save(checkpoints / f"step-{self.num_timesteps:09d}.zip")
                log.flush()
                recent = log.rows[-50:]
                rate = np.mean([r["success"] for r in recent]) if recent else float("nan")
                echo(
                    f"{self.num_timesteps:>9} steps  {log.episodes:>6} episodes  success(last {len(recent)}) "
                    f"{rate:.2f}  violations {log.cumulative}  {time.time() - started:.0f}s"
                )
            return True

    remaining = max(0, cfg.timesteps - model.num_timesteps)
    model.learn(remaining, callback=Record(), reset_num_timesteps=latest is None)
    model.save(checkpoints / f"step-{model.num_timesteps:09d}.zip")
    log.close()
    shield_stats = _shield_stats(venv.envs, cfg, rule_sets)
    venv.close()

    torch.manual_seed(cfg.seed)  # the sampled policy's draws

    def act(view, greedy: bool):
        def policy(obs):
            action, _ = model.predict(obs, action_masks=view.action_masks(), deterministic=greedy)
            return int(action)

        return policy

    return {"timesteps": int(model.num_timesteps), "evaluation": evaluate(cfg, act), **shield_stats}


def _shield_stats(envs: Sequence[Any], cfg: TrainConfig, rule_sets: ShieldRuleSets) -> dict[str, Any]:
    agent = envs[0].agent  # one scars agent for all the envs
    stats = {
        "shield_masked_slots": int(sum(e.masked_total for e in envs)),
        "shield_replaced": int(sum(e.replaced for e in envs)),
        "verifier_calls": int(sum(e.verifier_calls for e in envs)),
        "scar_quality": None,
    }
    if agent is not None:
        probes = probe_pairs(cfg)
        stats["scar_quality"] = scar_quality_of(cfg, agent.stats()["learned_scars"], probes=probes)
        stats.update(rule_sets.summary(cfg, probes))
    return stats


class ShieldRuleSets:
    """The shield's rule set in force at every decision the learner acted on, against the household's rules in force
    (issue 40, item 1: tier 1's measure, ``experiments.metrics``): each decision's active scars (the scars agent's
    S_t; temporary masks and H excluded), the actions they mask (its control plane's gate), the world verifier's
    verdicts on every admissible action, and whether a scar masked the expert's compliant next step. ``key``: one
    learner env (its episodes are clusters, numbered as they start). The experiment reads the world outside any
    method's turn; the learner's envs and the shield are only read."""

    def __init__(self) -> None:
        self.trace = RuleSetTrace()
        self.told: set[str] = set()
        self.lost: set[int] = set()
        self._episode: dict[Any, int] = {}
        self._pending: dict[Any, tuple] = {}
        self.episodes = 0

    def at(self, key: Any, shield: Any) -> None:
        """The decision ``shield`` now presents to the learner, measured now (the world moves on at the step) and
        counted when the learner acts on it (``taken``)."""
        from scars.experiments.tier1_summary import expert_step

        agent = shield.agent
        if agent is None:
            return
        view = shield.view
        decision = view.decision()
        q, actions = decision.context, decision.actions
        plane = agent.self_schema().plane
        active = frozenset(agent.scar_ids())
        fired = plane.govern(q, actions, np.zeros(len(actions)), decision.t).fired
        by_scar = {i for i, ids in fired if active.intersection(ids)}
        flagged = [[v.rule_id for v in view.adapter.check(q, a)] for a in actions]
        counts, safe = rule_set_decision(
            [a.is_control for a in actions],
            [bool(f) for f in flagged],
            [i in by_scar for i in range(len(actions))],
            [any(r in self.told for r in f) for f in flagged],
        )
        needed = expert_step(view.household) if safe else None
        counts["needed_masked"] = int(needed is not None and any(actions[i].text == needed for i in safe))
        self._pending[key] = (active, plane.scars, counts)

    def taken(self, key: Any, info: Mapping[str, Any], done: bool) -> None:
        """The learner acted on ``key``'s pending decision; ``info``: the world's answer (its verdicts tell the rule
        ids the run has now failed)."""
        pending = self._pending.pop(key, None)
        if pending is None:
            return
        if key not in self._episode:
            self._episode[key], self.episodes = self.episodes, self.episodes + 1
        cluster = self._episode[key]
        active, scars, counts = pending
        self.trace.record(cluster, active, scars)
        self.trace.count(cluster, counts)
        self.told.update(str(v["rule_id"]) for v in info.get("violations", ()))
        if done:
            if not info.get("won") and self.trace.counts[cluster]["needed_masked"]:
                self.lost.add(cluster)
            del self._episode[key]

    def summary(self, cfg: TrainConfig, probes: Sequence[tuple]) -> dict[str, Any]:
        """``rule_set`` (``experiments.metrics.rule_set_quality``; n = training episodes, on the learner's decisions
        and on ``probes``) and the flat ``rule_set_*`` keys; nothing before the first decision."""
        from scars.envs.household import RULE_LIBRARY
        from scars.envs.household.spec import OBJECT_CLASSES
        from scars.experiments.tier1_summary import rule_truth
        from scars.synthesis.dsl.semantics import fires

        if not self.episodes:
            return {}
        rules = self.trace.rules
        truths = {r.id: rule_truth(r) for r in RULE_LIBRARY.values()} if cfg.rules == "library" else {}
        masks = probe_vectors(rules, probes, lambda sid, q, a: fires(rules[sid], q, a, OBJECT_CLASSES))
        in_force = {r.id: r.rule for r in RULE_LIBRARY.values() if r.id in truths}
        unsafe = probe_vectors(in_force, probes, lambda rid, q, a: truths[rid](q, a))
        segments = self.trace.segments(lambda _c: frozenset(truths), lambda _c: 0)
        counts = rule_set_on_probes(
            {(0, k): v for k, v in masks.items()},
            {(0, k): v for k, v in unsafe.items()},
            segments,
            len(probes),
        )
        clusters = range(self.episodes)
        per = np.array([counts.get(c, (0.0, 0.0, 0.0)) for c in clusters], dtype=float).reshape(-1, 3)
        decisions = {
            col: np.array([self.trace.counts.get(c, {}).get(col, 0) for c in clusters], dtype=float)
            for col in RULE_SET_COLUMNS
        }
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 4040]))
        quality = rule_set_quality(per, decisions, rng, probes=len(probes), clusters="episodes")
        quality["decisions"]["tasks_lost_to_scars"] = len(self.lost)
        return {"rule_set": quality, **rule_set_flat(quality)}


def probe_pairs(cfg: TrainConfig, games: int = 20) -> tuple[tuple[Any, Any], ...]:
    """Probe pairs of scar and rule-set quality: every admissible control action at every state of random masked
    walks through ``games`` held-out games (the experiment's measurement, after training)."""
    probes = []
    rng = np.random.default_rng(cfg.seed)
    for i in range(games):
        view = household_world(cfg, shaping=0.0)
        view.reset(seed=EVAL_SEED_BASE + 10_000 + i)
        done = False
        while not done:
            decision = view.decision()
            probes += [(decision.context, a) for a in decision.actions if a.is_control]
            _, _, terminated, truncated, _ = view.step(int(rng.choice(np.flatnonzero(view.action_masks()))))
            done = terminated or truncated
    return tuple(probes)


def scar_quality_of(
    cfg: TrainConfig,
    learned: Sequence[Mapping[str, Any]],
    games: int = 20,
    probes: Sequence[tuple] | None = None,
) -> dict[str, Any]:
    """Every scar the shield admitted against the rules it was told it broke (``experiments.metrics.scar_quality``:
    precision, recall, class, with n), on ``probes`` (default :func:`probe_pairs` over ``games`` held-out games)."""
    from scars.envs.household import RULE_LIBRARY
    from scars.envs.household.spec import OBJECT_CLASSES
    from scars.experiments.metrics import scar_quality
    from scars.experiments.tier1_summary import rule_truth
    from scars.synthesis.dsl import parse_rule

    probes = probe_pairs(cfg, games) if probes is None else probes
    truth = {r.id: rule_truth(r) for r in RULE_LIBRARY.values()} if cfg.rules == "library" else {}
    scars = [(s["rule"], parse_rule(s["rule"]), s["told"]) for s in learned]
    return scar_quality(scars, truth, list(probes), OBJECT_CLASSES)


def _latest_checkpoint(folder: Path, suffix: str) -> Path | None:
    found = sorted(p for p in folder.glob(f"step-*{suffix}"))
    return found[-1] if found else None


def evaluate(cfg: TrainConfig, policy_for: Callable[[Any, bool], Callable[[Any], int]]) -> dict[str, Any]:
    """The trained policy on ``eval_episodes`` held-out games (seeds EVAL_SEED_BASE + i), unshaped, unshielded:
    ``policy`` samples from it (as it acted in training), ``policy_greedy`` takes its most likely slot (which can
    loop on a command that changes nothing, e.g. ``look``) — and, on the same games, the random masked policy (the
    baseline a learner must beat)."""
    rng = np.random.default_rng(cfg.seed)
    out: dict[str, Any] = {"n": cfg.eval_episodes}
    for name in ("policy", "policy_greedy", "random"):
        wins, violations, lengths = [], [], []
        for i in range(cfg.eval_episodes):
            view = household_world(cfg, shaping=0.0, dict_obs=cfg.learner == "rllib-ppo")
            obs, _ = view.reset(seed=EVAL_SEED_BASE + i)
            act = policy_for(view, name == "policy_greedy") if name != "random" else None
            done, steps, broken = False, 0, 0
            while not done:
                a = act(obs) if act is not None else int(rng.choice(np.flatnonzero(view.action_masks())))
                obs, _, terminated, truncated, info = view.step(a)
                broken += len(info["violations"])
                steps += 1
                done = terminated or truncated
            wins.append(int(terminated))
            violations.append(broken)
            lengths.append(steps)
        lo, hi = bootstrap_ci(wins, np.random.default_rng(cfg.seed))
        out[name] = {
            "success": float(np.mean(wins)),
            "success_ci": [lo, hi],
            "violations_per_episode": float(np.mean(violations)),
            "length": float(np.mean(lengths)),
        }
    return out


# ---------------------------------------------------------------------------------------------- RLlib


_RECORDERS: dict[str, tuple] = {}
"""Run name → (episode log, step counter, shields, their ``ShieldRuleSets``) of the RLlib runs in this process: RLlib pickles env creators, so
they carry only the name and find the (unpicklable) log here, in the process that steps the envs."""


def _make_env(name: str, cfg: TrainConfig):
    log, counter, shields, rule_sets = _RECORDERS[name]
    if cfg.world == "household":
        return _recorded_household(cfg, log, counter, shields, rule_sets)
    return _recorded_commons(cfg, log, counter, shields)


class _Counter:
    """Environment steps taken in this process (RLlib's local env runner steps its envs here)."""

    def __init__(self, start: int = 0) -> None:
        self.steps = start


def _recorded_household(
    cfg: TrainConfig, log: EpisodeLog, counter: _Counter, shields: list, rule_sets: ShieldRuleSets
):
    """The env RLlib builds for the household: the shielded view (sharing the first env's scars agent), its
    episodes written to ``log`` as they end."""
    import gymnasium as gym

    shield = shielded(
        cfg, household_world(cfg, dict_obs=True), log.path.parent, share_with=shields[0] if shields else None
    )
    shields.append(shield)

    class Recorded(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            out = self.env.reset(seed=seed, options=options)
            rule_sets.at(id(self), shield)
            return out

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            counter.steps += 1
            log.step(id(self), reward, info, terminated or truncated, counter.steps)
            rule_sets.taken(id(self), info, terminated or truncated)
            if not (terminated or truncated):
                rule_sets.at(id(self), shield)
            return obs, reward, terminated, truncated, info

    return Recorded(shield)


def _recorded_commons(cfg: TrainConfig, log: EpisodeLog, counter: _Counter, shields: list):
    """The env RLlib builds for the commons: the RL view under ``ParallelPettingZooEnv``, one row per episode —
    return: the seats' mean reward; success: the pool survived every month; violations: seat-months whose catch
    exceeded the sustainable share f(t)/|I(t)| (GovSim's over-usage events)."""
    from pettingzoo.utils.wrappers import BaseParallelWrapper
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from scars.envs.commons import commons_v0
    from scars.envs.commons.metrics import episode_metrics
    from scars.envs.rl import ResourceRLView

    class Recorded(BaseParallelWrapper):
        def reset(self, seed=None, options=None):
            self.total, self.length = 0.0, 0
            return self.env.reset(seed=seed, options=options)

        def step(self, actions):
            out = self.env.step(actions)
            counter.steps += 1
            self.length += 1
            self.total += float(sum(out[1].values()))
            if not self.env.agents:  # the episode's end
                record = self.env.unwrapped.episode_record()
                metrics = episode_metrics(record)
                over = sum(
                    int(c > m.harvest.sustainable_share)
                    for m in record.months
                    for c, here in zip(m.harvest.catches, m.harvest.present, strict=True)
                    if here
                )
                info = {
                    "world_reward": self.total / len(record.agents),
                    "won": metrics["survived"],
                    "violations": range(over),
                }
                log.step(id(self), self.total / len(record.agents), info, True, counter.steps)
            return out

    view = ResourceRLView(commons_v0.parallel_env(arena=cfg.arena))
    if cfg.shield != "none":
        from scars.agents.shield import ParallelScarShield

        view = ParallelScarShield(
            view,
            shield=cfg.shield,
            ledger_dir=log.path.parent,
            seed=cfg.seed,
            search_iterations=cfg.search_iterations,
            adapters=view.seat_adapters(overuse_verdicts=True),  # each seat's world: the shield names none
        )
        shields.append(view)
    return ParallelPettingZooEnv(Recorded(view))


def _rllib_config(cfg: TrainConfig, out: Path, log: EpisodeLog, counter: _Counter):
    _require("torch")
    ray = _require("ray")
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    if not ray.is_initialized():
        ray.init(
            address=cfg.address or None,
            num_cpus=None if cfg.address else max(1, cfg.threads),
            include_dashboard=False,
            log_to_driver=False,
            ignore_reinit_error=True,
        )
    name = f"scars-{cfg.world}-{out.resolve().name}"
    model = {"fcnet_hiddens": [128, 128], "head_fcnet_hiddens": []}
    _RECORDERS[name] = (log, counter, [], ShieldRuleSets())
    register_env(name, lambda _: _make_env(name, cfg))
    if cfg.world == "household":
        module = RLModuleSpec(module_class=ActionMaskingTorchRLModule, model_config=model)
        envs_per_runner = cfg.num_envs
    else:
        module = MultiRLModuleSpec(
            rl_module_specs={
                "shared": RLModuleSpec(module_class=ActionMaskingTorchRLModule, model_config=model)
            }
        )
        envs_per_runner = 1  # RLlib steps one multi-agent env per runner
    config = (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .environment(name)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=envs_per_runner)
        .training(
            lr=cfg.learning_rate,
            gamma=cfg.gamma,
            train_batch_size_per_learner=cfg.n_steps * cfg.num_envs,
            minibatch_size=cfg.batch_size,
            num_epochs=cfg.n_epochs,
            entropy_coeff=cfg.ent_coef,
        )
        .rl_module(rl_module_spec=module)
        .debugging(seed=cfg.seed)
    )
    if cfg.world == "commons":
        config = config.multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, *a, **k: "shared")
    return config


def train_rllib_ppo(cfg: TrainConfig, out: Path, *, resume: bool, tracker: Tracker, echo) -> dict[str, Any]:
    """RLlib's PPO from its local env runner (the envs step in this process, so every episode is recorded as it
    ends); ``cfg.address`` connects to a Ray cluster for the learner."""
    start = _last_row(out / "episodes.csv")
    log = EpisodeLog(out / "episodes.csv", tracker=tracker, start=start)
    counter = _Counter(int(start.get("timesteps", 0)))
    config = _rllib_config(cfg, out, log, counter)
    algo = config.build_algo()
    checkpoints = out / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    latest = _latest_checkpoint(checkpoints, "") if resume else None
    if latest is not None:
        algo.restore_from_path(str(latest.resolve()))
        echo(f"resumed from {latest} at {counter.steps} timesteps")
    started, saved_at = time.time(), counter.steps
    while counter.steps < cfg.timesteps:
        algo.train()
        log.flush()
        if counter.steps - saved_at >= cfg.checkpoint_every or counter.steps >= cfg.timesteps:
            algo.save_to_path(str((checkpoints / f"step-{counter.steps:09d}").resolve()))
            saved_at = counter.steps
        recent = log.rows[-50:]
        rate = np.mean([r["success"] for r in recent]) if recent else float("nan")
        ret = np.mean([r["return"] for r in recent]) if recent else float("nan")
        echo(
            f"{counter.steps:>9} steps  {log.episodes:>6} episodes  return(last {len(recent)}) {ret:.2f}  "
            f"success {rate:.2f}  violations {log.cumulative}  {time.time() - started:.0f}s"
        )
    log.close()
    summary: dict[str, Any] = {"timesteps": counter.steps}
    torch = _require("torch")
    if cfg.world == "household":
        module = algo.get_module()

        draws = np.random.default_rng(cfg.seed)

        def act(view, greedy: bool):
            def policy(obs):
                batch = {"obs": {k: torch.as_tensor(v[None]) for k, v in obs.items()}}
                logits = module.forward_inference(batch)["action_dist_inputs"][0].detach().numpy()
                if greedy:
                    return int(np.argmax(logits))
                p = np.exp(logits - logits.max())
                return int(draws.choice(len(p), p=p / p.sum()))

            return policy

        summary["evaluation"] = evaluate(cfg, act)
        _, _, shields, rule_sets = _RECORDERS[str(config.env)]
        if shields:
            summary.update(_shield_stats(shields, cfg, rule_sets))
    else:
        summary["govsim"] = govsim_suite(cfg, algo)
        shields = _RECORDERS[str(config.env)][2]
        if shields:
            summary["shield_masked_slots"] = int(sum(s.masked_total for s in shields))
            summary["verifier_calls"] = int(sum(s.verifier_calls for s in shields))
            summary["scars"] = {seat: list(t) for seat, t in shields[-1].scars().items()}
    algo.stop()
    return summary


def govsim_suite(cfg: TrainConfig, algo) -> dict[str, Any]:
    """GovSim's suite (``envs.commons.metrics.summary``) for the trained population: every seat the shared policy,
    greedy on its masked logits, over ``eval_episodes`` episodes (seeds EVAL_SEED_BASE + i)."""
    torch = _require("torch")
    from scars.envs.commons import commons_v0
    from scars.envs.commons.metrics import summary
    from scars.envs.rl import ResourceRLView

    module = algo.get_module("shared")
    records = []
    for i in range(cfg.eval_episodes):
        view = ResourceRLView(commons_v0.parallel_env(arena=cfg.arena))
        obs, _ = view.reset(seed=EVAL_SEED_BASE + i)
        while view.agents:
            batch = {
                "obs": {
                    k: torch.as_tensor(np.stack([obs[a][k] for a in view.agents]))
                    for k in ("observations", "action_mask")
                }
            }
            logits = module.forward_inference(batch)["action_dist_inputs"].detach().numpy()
            actions = {a: int(np.argmax(logits[j])) for j, a in enumerate(view.agents)}
            obs, *_ = view.step(actions)
        records.append(view.unwrapped.episode_record())
    return {"n": len(records), **{k: float(v) for k, v in summary(records).items()}}


# ---------------------------------------------------------------------------------------------- the run


def run_training(cfg: TrainConfig, out: Path, *, resume: bool = False, echo=print) -> dict[str, Any]:
    """One training run into ``out`` (module docstring); returns the summary it writes."""
    from scars.experiments.provenance import write_provenance

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "config.json", cfg.to_dict())
    tracker = Tracker(
        TrackingSettings(enabled=cfg.wandb, project=cfg.wandb_project, directory=str(out)),
        name=cfg.run_name,
        config=cfg.to_dict(),
        out=out,
        job_type=f"train/{cfg.learner}",
        tags=(cfg.world, f"shield:{cfg.shield}", f"seed:{cfg.seed}"),
    )
    train = train_maskable_ppo if cfg.learner == "maskable-ppo" else train_rllib_ppo
    result = train(cfg, out, resume=resume, tracker=tracker, echo=echo)
    rows = read_episodes(out / "episodes.csv")
    summary = {
        "run": cfg.run_name,
        "config": cfg.to_dict(),
        **result,
        "training": {
            "episodes": len(rows),
            "cumulative_violations": int(rows[-1]["cumulative_violations"]) if rows else 0,
            "success_rate": float(np.nanmean([r["success"] for r in rows]))
            if rows and cfg.world == "household" and cfg.learner == "maskable-ppo"
            else None,
        },
        "seconds": round(time.time() - started, 1),
    }
    write_json(out / "summary.json", summary)
    write_provenance(out, cfg.to_dict(), tier="train", started=started, ended=time.time())
    tracker.summary({k: v for k, v in summary["training"].items()})
    tracker.log_artifact(f"{cfg.run_name}-files", "run", [out / "episodes.csv", out / "summary.json"])
    tracker.finish()
    return summary


# ---------------------------------------------------------------------------------------------- curves


CURVES = (
    ("return", "return per episode"),
    ("success", "success rate"),
    ("violations", "violations per episode"),
    ("cumulative_violations", "cumulative violations"),
)


def curve_frame(runs: Mapping[str, Sequence[Path]], bins: int = 20) -> dict[str, dict[str, np.ndarray]]:
    """Per label (a shield) and metric: the bin centres in timesteps, the mean over seeds and its bootstrap CI."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for label, folders in runs.items():
        per_seed = [read_episodes(Path(f) / "episodes.csv") for f in folders]
        horizon = max(max((r["timesteps"] for r in rows), default=0) for rows in per_seed)
        edges = np.linspace(0, horizon, bins + 1)
        entry: dict[str, np.ndarray] = {"t": (edges[:-1] + edges[1:]) / 2, "n": np.array([len(per_seed)])}
        for metric, _ in CURVES:
            table = np.full((len(per_seed), bins), np.nan)
            for s, rows in enumerate(per_seed):
                t = np.array([r["timesteps"] for r in rows])
                v = np.array([r[metric] for r in rows])
                for b in range(bins):
                    inside = (t > edges[b]) & (t <= edges[b + 1])
                    if inside.any():
                        table[s, b] = (
                            v[inside].max() if metric == "cumulative_violations" else v[inside].mean()
                        )
            rng = np.random.default_rng(0)
            with warnings.catch_warnings():  # a bin no seed has an episode in stays NaN (a gap in the curve)
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(table, axis=0)
            cis = np.array([bootstrap_ci(col[~np.isnan(col)], rng) for col in table.T])
            entry[metric], entry[f"{metric}_lo"], entry[f"{metric}_hi"] = mean, cis[:, 0], cis[:, 1]
        out[label] = entry
    return out


def plot_curves(runs: Mapping[str, Sequence[Path]], path: Path, title: str = "") -> Path:
    """Learning curves per label (shield) with 95% bootstrap CIs over seeds: return, success, violations per
    episode, cumulative violations, against training timesteps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames = curve_frame(runs)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, (metric, label) in zip(axes, CURVES, strict=True):
        for name, f in frames.items():
            ax.plot(f["t"], f[metric], label=f"{name} (n={int(f['n'][0])} seeds)")
            ax.fill_between(f["t"], f[f"{metric}_lo"], f[f"{metric}_hi"], alpha=0.2)
        ax.set_xlabel("training timesteps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title or "learning curves (mean over seeds, 95% bootstrap CI)")
    fig.tight_layout()
    return save_figure(fig, path)


def save_curves_table(runs: Mapping[str, Sequence[Path]], path: Path) -> Path:
    frames = curve_frame(runs)
    data = {
        name: {k: [None if np.isnan(x) else float(x) for x in v] for k, v in f.items()}
        for name, f in frames.items()
    }
    write_json(path, data)
    return path


__all__ = [
    "EPISODE_COLUMNS",
    "EpisodeLog",
    "curve_frame",
    "evaluate",
    "plot_curves",
    "read_episodes",
    "run_training",
]
