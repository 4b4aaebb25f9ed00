"""Export an albertkit run to a Hugging Face directory and check PyTorch computes the same.

The Python-API version of docs/howto/export-to-hf.md.

    python examples/export_to_hf.py --run runs/pretrain-local --hf-dir exported/albert-local
    python examples/export_to_hf.py --tiny      # pretrains a few steps first, ~1 minute

The export holds config.json, model.safetensors and the tokenizer files; transformers'
PyTorch classes (AlbertForPreTraining, AlbertForQuestionAnswering,
AlbertForSequenceClassification) load it with from_pretrained. When torch and
transformers are installed the script loads it that way and compares the logits with
albertkit's on one sentence (install the CPU build with `pip install torch`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import _shared


def albertkit_logits(run_dir: Path, batch: dict) -> dict:
    """albertkit's own outputs for ``batch`` from the run's newest checkpoint."""
    from albertkit.training import load_run_model

    _, model = load_run_model(run_dir)
    return {k: v.numpy() for k, v in model(batch, training=False).items()}


def pytorch_logits(hf_dir: Path, batch: dict) -> dict:
    """The same batch through transformers' PyTorch ALBERT loaded from the export."""
    import torch
    from transformers import AlbertForPreTraining

    model = AlbertForPreTraining.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(batch["input_ids"]),
                    attention_mask=torch.tensor(batch["input_mask"]),
                    token_type_ids=torch.tensor(batch["segment_ids"]))
    positions = torch.tensor(batch["masked_lm_positions"]).long()
    mlm = torch.gather(out.prediction_logits, 1,
                       positions[..., None].expand(-1, -1, out.prediction_logits.shape[-1]))
    return {"mlm_logits": mlm.numpy(), "sop_logits": out.sop_logits.numpy()}


def main() -> int:
    p = _shared.parser(__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=None,
                   help="albertkit pretraining run directory (default: pretrain one first)")
    p.add_argument("--hf-dir", type=Path, default=None, help="export here (default: OUT/hf)")
    args = p.parse_args()
    _shared.quiet_tensorflow()
    _shared.setup_logging()
    out = _shared.out_dir(args, __file__)

    import numpy as np

    from albertkit.training import export_run

    run_dir = args.run
    if run_dir is None:
        from pretrain_from_text import pretrain_from_text, write_default_corpus

        print("no --run given: pretraining a small model first (examples/pretrain_from_text.py)")
        run_dir = pretrain_from_text(write_default_corpus(out / "corpus", args.tiny),
                                     out / "pretrain", tiny=args.tiny,
                                     steps=None if args.tiny else 200)

    # The export (what `albertkit export --format hf RUN_DIR OUT_DIR` does).
    # overwrite: running the example again replaces its own previous export (only that)
    hf_dir = export_run(run_dir, args.hf_dir or out / "hf", format="hf", overwrite=True)
    print(f"exported {run_dir} -> {hf_dir}: "
          + ", ".join(sorted(f.name for f in hf_dir.iterdir())))

    if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):
        print("PyTorch check skipped: pip install torch transformers")
        return 0

    # One sentence pair, tokenised by transformers from the exported tokenizer files.
    from transformers import AlbertTokenizer

    tokenizer = AlbertTokenizer.from_pretrained(hf_dir)
    enc = tokenizer("The tower is tall.", "Its light can be seen from far away.",
                    return_token_type_ids=True)  # v5 tokenizers omit token types unless asked
    ids = np.array([enc["input_ids"]], np.int32)
    batch = {"input_ids": ids,
             "input_mask": np.array([enc["attention_mask"]], np.int32),
             "segment_ids": np.array([enc["token_type_ids"]], np.int32),
             "masked_lm_positions": np.array([[1, 2, 3]], np.int32)}
    print(f"tokens: {tokenizer.convert_ids_to_tokens(enc['input_ids'])}")

    ours, theirs = albertkit_logits(run_dir, batch), pytorch_logits(hf_dir, batch)
    worst = 0.0
    for key in ("mlm_logits", "sop_logits"):
        diff = float(np.max(np.abs(ours[key] - theirs[key])))
        worst = max(worst, diff)
        print(f"{key}: max |albertkit - PyTorch| = {diff:.2e}")
    if worst > 1e-4:
        print("error: PyTorch disagrees with albertkit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
