"""The HuggingFace backend on a tiny randomly initialised causal LM built here (no download)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the 'hf' extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

from scars.agents.policies import PolicyInput  # noqa: E402
from scars.agents.policies.hf import CommandTrie, HFPolicy, resolve_device, resolve_dtype  # noqa: E402
from scars.synthesis.dsl import Action  # noqa: E402
from scars.synthesis.errors import ConfigError  # noqa: E402

WORDS = "task observation next action clean cup plate with sinkbasin bathtubbasin go to fridge take from 1 2 : .".split()


@pytest.fixture(scope="module")
def policy():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[EOS]": 1, **{w: i + 2 for i, w in enumerate(dict.fromkeys(WORDS))}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(vocab), n_positions=256, n_embd=32, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    return HFPolicy(model, fast)


ACTIONS = (
    Action.env("clean", "clean cup 1 with sinkbasin 1"),
    Action.env("clean", "clean cup 1 with bathtubbasin 1"),
    Action.env("go", "go to fridge 1"),
)


def _inp():
    return PolicyInput("observation", "clean cup", {}, ACTIONS)


def test_choice_scores_are_sequence_log_likelihoods(policy):
    scores = policy.logits(_inp(), np.random.default_rng(0))
    assert scores.shape == (3,) and np.all(np.isfinite(scores)) and np.all(scores < 0)
    # the score of a command equals the sum of its token log-probs computed independently
    prompt = policy._prompt_ids(_inp())
    cont = policy._command_ids("go to fridge 1")
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(torch.tensor([prompt + cont])).logits[0], -1)
    manual = sum(float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(cont))
    assert scores[2] == pytest.approx(manual, abs=1e-4)
    np.testing.assert_allclose(scores, policy.logits(_inp(), np.random.default_rng(1)))


def test_generation_under_the_scars_logits_processor_never_emits_a_masked_command(policy):
    free = policy.generate(_inp(), [False, False, False])
    assert free.constrained and free.text == ACTIONS[free.index].text
    for i in range(3):
        masked = [j == i for j in range(3)]
        masked[(i + 1) % 3] = True  # two of three masked: the processor must steer to the third
        assert policy.generate(_inp(), masked).index == (i + 2) % 3
    masked = [i == free.index for i in range(3)]
    assert policy.generate(_inp(), masked).index != free.index
    with pytest.raises(ConfigError, match="every admissible command is masked"):
        policy.generate(_inp(), [True, True, True])


def test_batched_kv_cache_scores_equal_one_full_pass_per_command(policy):
    """Commands of different lengths (1 to 7 tokens): the batched pass over the expanded cache gives each command's
    log-likelihood as a full pass of prompt + command would."""
    one_token = (Action.env("go", "go"), Action.env("take", "take"))  # the prompt pass alone scores these
    for actions in ((*ACTIONS, *one_token, Action.env("take", "take cup 1 from sinkbasin 1 .")), one_token):
        _check_against_full_passes(policy, actions)


def _check_against_full_passes(policy, actions):
    inp = PolicyInput("observation : clean cup 2 .", "clean cup", {}, actions)
    scores = policy.logits(inp, np.random.default_rng(0))
    prompt = policy._prompt_ids(inp)
    for action, score in zip(actions, scores, strict=True):
        cont = policy._command_ids(action.text)
        with torch.no_grad():
            logp = torch.log_softmax(policy.model(torch.tensor([prompt + cont])).logits[0], -1)
        assert score == pytest.approx(
            sum(float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(cont)), abs=1e-4
        )


def test_the_command_trie_follows_prefixes_and_ends_with_eos():
    trie = CommandTrie([(5, 6), (5, 6, 7), (8,)], eos=1)
    assert trie.allowed_after(()) == {5, 8}
    assert trie.allowed_after((5, 6)) == {7, 1}  # a full command that prefixes a longer one: stop or go on
    assert trie.allowed_after((5, 6, 7)) == {1}
    assert trie.allowed_after((9,)) == {1}  # off every path: only EOS
    assert (
        trie.command_of([5, 6, 1, 4]) == 0
        and trie.command_of([5, 6, 7]) == 1
        and trie.command_of([5]) is None
    )


def test_a_masked_command_that_prefixes_an_allowed_one_cannot_be_written(policy):
    short, long = Action.env("go", "go to fridge 1"), Action.env("go", "go to fridge 1 .")
    inp = PolicyInput("observation", "clean cup", {}, (short, long))
    assert policy.generate(inp, [True, False]).index == 1
    assert policy.generate(inp, [False, True]).index == 0


def test_a_name_that_is_not_a_local_model_folder_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not a local folder"):
        HFPolicy.from_pretrained("gpt2")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="could not be loaded as a causal LM"):
        HFPolicy.from_pretrained(str(tmp_path))


def test_device_and_dtype_are_checked():
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            resolve_device("cuda")
    assert resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(ConfigError, match="cannot run on device 'cpu'"):
        resolve_dtype("float16", "cpu")
    assert (
        resolve_dtype("auto", "cpu") == torch.float32 and resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    )
    with pytest.raises(ConfigError, match="not one of"):
        resolve_device("tpu")
