"""Tiny llama-architecture GGUF language models, generated here so that no model is downloaded.

    PYTHONPATH=<llama.cpp>/gguf-py python make_models.py --vocab <vocab-only.gguf> \
        --quantize build/x86_64/llama-quantize --out build/models

writes, per size in SIZES, `tinyllama-<size>-f16.gguf` and, through llama-quantize,
`-q8_0.gguf` and `-q4_0.gguf`. The weights are seeded random numbers (the text they generate is
noise, but llama.cpp does exactly the work a trained model of the same shape costs: the same
matrix shapes, the same bytes read per token), the tokenizer is llama.cpp's vocab-only
ggml-vocab-llama-spm.gguf (LLaMA's 32,000-token SentencePiece vocabulary) copied field by field.
Everything is a function of the size table and the seed: two runs write identical files (no
date, path or host in the metadata), which `--check` verifies against the sha256 of each.

The output matrix is tied to the token embedding (no output.weight: llama.cpp then reads
token_embd for the logits, as many small models do), so the vocabulary's rows are paid once.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

ARCH = "llama"
SEED = 20261207
CONTEXT_LENGTH = 2048
RMS_EPS = 1e-5
QUANTS = ("q8_0", "q4_0")


@dataclass(frozen=True)
class Size:
    name: str
    n_embd: int
    n_layer: int
    n_head: int
    n_ff: int


# Row lengths are multiples of 32 (Q8_0 and Q4_0 quantise blocks of 32 along a row).
SIZES = (
    Size("s", n_embd=64, n_layer=2, n_head=4, n_ff=192),
    Size("m", n_embd=256, n_layer=4, n_head=8, n_ff=704),
    Size("l", n_embd=512, n_layer=8, n_head=8, n_ff=1376),
)


def copy_tokenizer(vocab: Path, writer: gguf.GGUFWriter) -> int:
    """Every tokenizer.* field of the vocab-only GGUF into `writer`; returns the vocabulary size."""
    reader = gguf.GGUFReader(vocab)
    n_vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        main = field.types[0]
        value = field.contents()
        if main is gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, value, main, sub_type=field.types[-1])
            if field.name == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        else:
            writer.add_key_value(field.name, value, main)
    if n_vocab == 0:
        raise SystemExit(f"{vocab}: no tokenizer.ggml.tokens (not a vocab GGUF)")
    return n_vocab


def write_f16(size: Size, vocab: Path, path: Path) -> None:
    rng = np.random.default_rng([SEED, SIZES.index(size)])
    writer = gguf.GGUFWriter(str(path), ARCH)
    writer.add_name(f"farm tinyllama {size.name}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(size.n_embd)
    writer.add_block_count(size.n_layer)
    writer.add_feed_forward_length(size.n_ff)
    writer.add_head_count(size.n_head)
    writer.add_head_count_kv(size.n_head)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_rope_dimension_count(size.n_embd // size.n_head)
    n_vocab = copy_tokenizer(vocab, writer)
    writer.add_vocab_size(n_vocab)

    def weight(rows: int, cols: int) -> np.ndarray:
        # numpy shape (out, in): GGUF stores it as ne = [in, out], the layout llama.cpp expects.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def norm() -> np.ndarray:
        return np.ones(size.n_embd, dtype=np.float32)

    writer.add_tensor("token_embd.weight", weight(n_vocab, size.n_embd))
    writer.add_tensor("output_norm.weight", norm())
    for i in range(size.n_layer):
        e, f = size.n_embd, size.n_ff
        writer.add_tensor(f"blk.{i}.attn_norm.weight", norm())
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(e, e))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(e, e))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(e, e))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(e, e))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", norm())
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(f, e))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(f, e))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(e, f))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=Path, required=True)
    parser.add_argument("--quantize", type=Path, required=True, help="llama-quantize for this host")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for size in SIZES:
        f16 = args.out / f"tinyllama-{size.name}-f16.gguf"
        write_f16(size, args.vocab, f16)
        outputs = [f16]
        for quant in QUANTS:
            target = args.out / f"tinyllama-{size.name}-{quant}.gguf"
            done = subprocess.run(
                [str(args.quantize), str(f16), str(target), quant.upper()], capture_output=True, text=True
            )
            if done.returncode != 0:
                tail = done.stderr.strip().splitlines()[-3:]
                print(f"{args.quantize} {f16.name} {quant}: exit {done.returncode}: {' | '.join(tail)}", file=sys.stderr)
                return 1
            outputs.append(target)
        lines += [f"{sha256(p)}  {p.name}" for p in outputs]
        for p in outputs:
            print(f"{p.name}: {p.stat().st_size} bytes")
    # sha256sum's own format: `cd build/models && sha256sum -c SHA256SUMS` checks them.
    (args.out / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
