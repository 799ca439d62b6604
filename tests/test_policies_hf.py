"""The HuggingFace backend on a tiny randomly initialised causal LM built here (no download)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the 'hf' extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

from agents.policies import PolicyInput  # noqa: E402
from agents.policies.hf import HFPolicy  # noqa: E402
from synthesis.dsl import Action  # noqa: E402

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
    cont = policy.tokenizer(" go to fridge 1", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(torch.tensor([prompt + cont])).logits[0], -1)
    manual = sum(float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(cont))
    assert scores[2] == pytest.approx(manual, abs=1e-4)
    np.testing.assert_allclose(scores, policy.logits(_inp(), np.random.default_rng(1)))


def test_generation_under_the_scars_logits_processor_never_emits_a_masked_command(policy):
    free = policy.generate(_inp(), [False, False, False])
    for i in range(3):
        masked = [j == i for j in range(3)]
        masked[(i + 1) % 3] = True  # two of three masked: the processor must steer to the third
        chosen = policy.generate(_inp(), masked)
        assert chosen == ACTIONS[(i + 2) % 3]
    masked = [a == free for a in ACTIONS]
    assert policy.generate(_inp(), masked) != free
