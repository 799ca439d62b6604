"""HuggingFace generation under the scars gate: a tiny randomly initialised GPT-2 (built here, no download) writes its
next call through the gate's LogitsProcessor; the masked call cannot be spelled even when the model prefers it.
Needs torch and transformers (``pip install torch==2.13.0 && pip install -e '.[hf]'``); says so and exits 0 without."""

import sys
import tempfile
from pathlib import Path

try:
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
except ImportError:
    print(
        "skipped: torch/transformers are not installed (pip install torch==2.13.0 && pip install -e '.[hf]')"
    )
    sys.exit(0)

from scars.agents.runtime import ToolSignature, open_gate
from scars.agents.runtime.adapters.hf import logits_processor

words = ["[UNK]", "[EOS]", "call", "search", "delete", "cats", "all"]
tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(
    transformers.GPT2Config(
        vocab_size=len(words), n_embd=16, n_layer=1, n_head=2, bos_token_id=1, eos_token_id=1
    )
)

with open_gate(
    Path(tempfile.mkdtemp()) / "ledger.sqlite", core=['if user == "guest" then forbid_tool_call("delete")']
) as gate:
    gate.mapping.declare(ToolSignature("search", {"q": (str,)}))
    gate.mapping.declare(ToolSignature("delete", {"what": (str,)}))
    candidates = [("search cats", ("search", {"q": "cats"})), ("delete all", ("delete", {"what": "all"}))]
    prompt = [words.index("call")]
    processor, allowed = logits_processor(gate, tokenizer, len(prompt), candidates, {"user": "guest"})
    prefer_delete = torch.zeros(len(words))
    prefer_delete[words.index("delete")] = 50.0
    out = model.generate(
        input_ids=torch.tensor([prompt]),
        attention_mask=torch.ones((1, 1), dtype=torch.long),
        logits_processor=transformers.LogitsProcessorList([lambda ids, s: s + prefer_delete, processor]),
        max_new_tokens=4,
        do_sample=False,
        pad_token_id=tokenizer.eos_token_id,
    )
    print("the model wanted 'delete'; it generated:", tokenizer.decode(out[0, 1:], skip_special_tokens=True))
