#!/usr/bin/env python3
"""Train tiny decoder-only LMs that differ only in their attention, for kvrank demos and tests.

Six variants share everything else (byte vocabulary, 4 Llama-style blocks with RMSNorm, RoPE and a
SwiGLU MLP, tied embeddings, seed, data order, AdamW, LR schedule, number of steps):

  mha       8 query heads, 8 key/value heads, head_dim 16
  gqa       8 query heads, 2 key/value heads
  mqa       8 query heads, 1 key/value head
  mla       DeepSeek-V2 multi-head latent attention (kv_lora_rank 64, nope 16, rope 8, v 16)
  lrkv-r2   low-rank KV: W_K^h = W_shared + B_h A_h with rank r = d_h/8 (the paper's r=16 at d_h=128)
  lrkv-r8   the same with r = d_h/2 (the paper's r=64 at d_h=128)

Each model is written to OUT/<variant>/{config.json,model.safetensors} in BF16 with the tensor
names and layouts of docs/families.md (HF llama names; deepseek_v2 names for MLA; the
project's LRKV layout). OUT/losses.json records the final validation loss of each model.

Corpus: the top-level *.py files of the Python standard library (/usr/lib/python3.11, PSF licence),
concatenated in sorted order; the last 5 % of the bytes are the validation split.

Usage:
  nice -n 10 python3 scripts/train_tiny.py --steps 400 --seed 0 --out data/tiny [--variants mha,gqa]
  nice -n 10 python3 scripts/train_tiny.py --steps 60 --warmup 10 --keep-steps 0,10,20,40,60 \
      --variants mha,lrkv-r2 --eval-windows 64 --out data/tiny-steps
  python3 scripts/train_tiny.py --verify --out data/tiny   # numpy-only read-back of what is there

--keep-steps writes, instead of the final model, OUT/<variant>/checkpoint-N/ after N optimiser
steps (0: the initialisation) holding only the attention tensors (the names with "self_attn"), so
that a training trajectory stays small; OUT/losses.json then records the validation loss of each
kept checkpoint.

Needs PyTorch (Debian python3-torch) for training; --verify needs only numpy. Runs on one CPU thread
by default (--threads) so that it is reproducible and does not crowd a shared machine.
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np

# ---------------------------------------------------------------------------------------------
# Shared architecture (everything except attention is identical across variants).

VOCAB = 256            # bytes
D_MODEL = 128
N_LAYERS = 4
N_HEADS = 8
HEAD_DIM = 16
INTERMEDIATE = 256     # SwiGLU hidden size (kept small so that data/tiny stays under 10 MB)
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
MLA_KV_LORA_RANK = 64  # DeepSeek-V2-Lite ratio: kv_lora_rank = 4 x qk_nope_head_dim
MLA_ROPE_DIM = 8       # DeepSeek ratio: rope = nope / 2

VARIANTS = {
    "mha": {"kind": "llama", "kv_heads": N_HEADS},
    "gqa": {"kind": "llama", "kv_heads": N_HEADS // 4},
    "mqa": {"kind": "llama", "kv_heads": 1},
    "mla": {"kind": "mla"},
    "lrkv-r2": {"kind": "lrkv", "rank": HEAD_DIM // 8},
    "lrkv-r8": {"kind": "lrkv", "rank": HEAD_DIM // 2},
}

CORPUS_ROOT = Path("/usr/lib/python3.11")
VALID_FRACTION = 0.05


# ---------------------------------------------------------------------------------------------
# Corpus


def load_corpus(root):
    """Bytes of the sorted top-level *.py files of `root`, each preceded by a '# file: NAME' line."""
    files = sorted(p for p in root.glob("*.py") if p.is_file())
    if not files:
        sys.exit(f"train_tiny: error: no *.py files under {root}")
    parts = [b"# file: " + p.name.encode() + b"\n" + p.read_bytes() + b"\n" for p in files]
    data = b"".join(parts)
    return data, [p.name for p in files]


def split_corpus(data):
    cut = int(len(data) * (1.0 - VALID_FRACTION))
    return data[:cut], data[cut:]


def unigram_cross_entropy(train, valid):
    """Cross-entropy (nats/byte) on `valid` of the add-one-smoothed byte unigram of `train`."""
    counts = np.bincount(np.frombuffer(train, dtype=np.uint8), minlength=VOCAB) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[np.frombuffer(valid, dtype=np.uint8)].mean())


# ---------------------------------------------------------------------------------------------
# Safetensors writing (our own minimal writer) and numpy-only reading (for --verify)


def write_safetensors(path, tensors):
    """Write {name: torch tensor} as BF16 safetensors: 8-byte LE header size, JSON, raw bytes."""
    import torch

    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.bfloat16).contiguous().cpu()
        raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the header is conventionally padded to 8 bytes
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def read_safetensors_numpy(path):
    """Return {name: float32 array} from a BF16/F32 safetensors file, using only numpy."""
    buf = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    base, out, expected_offset = 8 + n, {}, 0
    entries = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][0])
    for name, info in entries:
        begin, end = info["data_offsets"]
        assert begin == expected_offset, f"{name}: gap or overlap at {begin}"
        expected_offset = end
        raw = buf[base + begin:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:
            raise ValueError(f"{name}: unexpected dtype {info['dtype']}")
        assert arr.size == int(np.prod(info["shape"])), f"{name}: size does not match shape"
        out[name] = arr.reshape(info["shape"])
    assert base + expected_offset == len(buf), "buffer not fully used"
    return out


# ---------------------------------------------------------------------------------------------
# Expected tensor shapes, written independently of the torch modules so that --verify checks them.


def expected_shapes(variant):
    spec = VARIANTS[variant]
    d, h, dh, r = D_MODEL, N_HEADS, HEAD_DIM, spec.get("rank")
    shapes = {"model.embed_tokens.weight": [VOCAB, d], "model.norm.weight": [d]}
    for i in range(N_LAYERS):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [d], p + "post_attention_layernorm.weight": [d],
                       p + "mlp.gate_proj.weight": [INTERMEDIATE, d],
                       p + "mlp.up_proj.weight": [INTERMEDIATE, d],
                       p + "mlp.down_proj.weight": [d, INTERMEDIATE]})
        a = p + "self_attn."
        if spec["kind"] == "llama":
            kv = spec["kv_heads"]
            shapes.update({a + "q_proj.weight": [h * dh, d], a + "k_proj.weight": [kv * dh, d],
                           a + "v_proj.weight": [kv * dh, d], a + "o_proj.weight": [d, h * dh]})
        elif spec["kind"] == "lrkv":
            shapes.update({a + "q_proj.weight": [h * dh, d], a + "o_proj.weight": [d, h * dh]})
            for kv in "kv":
                shapes.update({a + f"{kv}_shared_proj.weight": [dh, d],
                               a + f"{kv}_lora_a.weight": [h * r, d],
                               a + f"{kv}_lora_b.weight": [h * dh, r]})
        else:  # mla
            c, rope, nope, vd = MLA_KV_LORA_RANK, MLA_ROPE_DIM, HEAD_DIM, HEAD_DIM
            shapes.update({a + "q_proj.weight": [h * (nope + rope), d],
                           a + "kv_a_proj_with_mqa.weight": [c + rope, d],
                           a + "kv_a_layernorm.weight": [c],
                           a + "kv_b_proj.weight": [h * (nope + vd), c],
                           a + "o_proj.weight": [d, h * vd]})
    return shapes


def make_config(variant, context):
    spec = VARIANTS[variant]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": VOCAB, "hidden_size": D_MODEL, "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": N_LAYERS, "num_attention_heads": N_HEADS,
        "num_key_value_heads": N_HEADS, "head_dim": HEAD_DIM, "hidden_act": "silu",
        "max_position_embeddings": context, "rms_norm_eps": RMS_EPS, "rope_theta": ROPE_THETA,
        "attention_bias": False, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "bos_token_id": None, "eos_token_id": None, "tokenizer": "bytes (token id = byte value)",
    }
    if spec["kind"] == "llama":
        config["num_key_value_heads"] = spec["kv_heads"]
    elif spec["kind"] == "lrkv":
        config.update({"attention_variant": "lrkv", "lrkv_rank": spec["rank"]})
    else:
        del config["head_dim"]
        config.update({
            "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
            "kv_lora_rank": MLA_KV_LORA_RANK, "q_lora_rank": None,
            "qk_nope_head_dim": HEAD_DIM, "qk_rope_head_dim": MLA_ROPE_DIM,
            "v_head_dim": HEAD_DIM, "n_routed_experts": None, "n_shared_experts": None,
            "first_k_dense_replace": 0, "moe_layer_freq": 1,
            "note": "rope rows use the rotate_half (llama) convention, not DeepSeek's interleaved one",
        })
    return config


# ---------------------------------------------------------------------------------------------
# Model (torch is imported lazily so that --verify runs with numpy alone)


def build_model(variant, context):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    spec = VARIANTS[variant]

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * self.weight

    def rope_tables(dim):
        inv = 1.0 / ROPE_THETA ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
        ang = torch.outer(torch.arange(context, dtype=torch.float32), inv)
        ang = torch.cat([ang, ang], dim=-1)
        return ang.cos(), ang.sin()

    def apply_rope(x, cos, sin):  # HF llama convention: rotate_half on [first half | second half]
        t = x.shape[-2]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos[:t] + rotated * sin[:t]

    def causal_attention(q, k, v):  # q,k: [B,H,T,dq], v: [B,H,T,dv]
        t = q.shape[-2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v

    def heads(x, n, dim):  # [B,T,n*dim] -> [B,n,T,dim]
        b, t, _ = x.shape
        return x.view(b, t, n, dim).transpose(1, 2)

    def merge(x):  # [B,H,T,dim] -> [B,T,H*dim]
        b, h, t, dim = x.shape
        return x.transpose(1, 2).reshape(b, t, h * dim)

    class LlamaAttention(nn.Module):  # MHA / GQA / MQA
        def __init__(self, kv_heads):
            super().__init__()
            self.kv_heads = kv_heads
            self.q_proj = nn.Linear(D_MODEL, N_HEADS * HEAD_DIM, bias=False)
            self.k_proj = nn.Linear(D_MODEL, kv_heads * HEAD_DIM, bias=False)
            self.v_proj = nn.Linear(D_MODEL, kv_heads * HEAD_DIM, bias=False)
            self.o_proj = nn.Linear(N_HEADS * HEAD_DIM, D_MODEL, bias=False)
            self.cos, self.sin = rope_tables(HEAD_DIM)

        def forward(self, x):
            q = apply_rope(heads(self.q_proj(x), N_HEADS, HEAD_DIM), self.cos, self.sin)
            k = apply_rope(heads(self.k_proj(x), self.kv_heads, HEAD_DIM), self.cos, self.sin)
            v = heads(self.v_proj(x), self.kv_heads, HEAD_DIM)
            group = N_HEADS // self.kv_heads  # query head h uses KV head h // group
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            return self.o_proj(merge(causal_attention(q, k, v)))

    class LrkvAttention(nn.Module):  # W_K^h = W_shared + B_h A_h (same for V)
        def __init__(self, rank):
            super().__init__()
            self.rank = rank
            self.q_proj = nn.Linear(D_MODEL, N_HEADS * HEAD_DIM, bias=False)
            self.o_proj = nn.Linear(N_HEADS * HEAD_DIM, D_MODEL, bias=False)
            for kv in "kv":
                setattr(self, f"{kv}_shared_proj", nn.Linear(D_MODEL, HEAD_DIM, bias=False))
                setattr(self, f"{kv}_lora_a", nn.Linear(D_MODEL, N_HEADS * rank, bias=False))
                setattr(self, f"{kv}_lora_b", nn.Linear(rank, N_HEADS * HEAD_DIM, bias=False))
            self.cos, self.sin = rope_tables(HEAD_DIM)

        def per_head(self, x, kv):
            b, t, _ = x.shape
            shared = getattr(self, f"{kv}_shared_proj")(x).unsqueeze(1)           # [B,1,T,dh]
            low = getattr(self, f"{kv}_lora_a")(x).view(b, t, N_HEADS, self.rank)  # [B,T,H,r]
            up = getattr(self, f"{kv}_lora_b").weight.view(N_HEADS, HEAD_DIM, self.rank)
            return shared + torch.einsum("bthr,hdr->bhtd", low, up)

        def forward(self, x):
            q = apply_rope(heads(self.q_proj(x), N_HEADS, HEAD_DIM), self.cos, self.sin)
            k = apply_rope(self.per_head(x, "k"), self.cos, self.sin)
            return self.o_proj(merge(causal_attention(q, k, self.per_head(x, "v"))))

    class MlaAttention(nn.Module):  # DeepSeek-V2 layout, no q_lora
        def __init__(self):
            super().__init__()
            self.nope, self.rope, self.vdim, self.c = HEAD_DIM, MLA_ROPE_DIM, HEAD_DIM, MLA_KV_LORA_RANK
            self.q_proj = nn.Linear(D_MODEL, N_HEADS * (self.nope + self.rope), bias=False)
            self.kv_a_proj_with_mqa = nn.Linear(D_MODEL, self.c + self.rope, bias=False)
            self.kv_a_layernorm = RMSNorm(self.c)
            self.kv_b_proj = nn.Linear(self.c, N_HEADS * (self.nope + self.vdim), bias=False)
            self.o_proj = nn.Linear(N_HEADS * self.vdim, D_MODEL, bias=False)
            self.cos, self.sin = rope_tables(self.rope)

        def forward(self, x):
            b, t, _ = x.shape
            q = heads(self.q_proj(x), N_HEADS, self.nope + self.rope)
            q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)
            latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.c, self.rope], dim=-1)
            kv = heads(self.kv_b_proj(self.kv_a_layernorm(latent)), N_HEADS, self.nope + self.vdim)
            k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
            k_rope = apply_rope(k_rope.unsqueeze(1), self.cos, self.sin).expand(b, N_HEADS, t, -1)
            q = torch.cat([q_nope, apply_rope(q_rope, self.cos, self.sin)], dim=-1)
            k = torch.cat([k_nope, k_rope], dim=-1)
            return self.o_proj(merge(causal_attention(q, k, v)))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(D_MODEL, INTERMEDIATE, bias=False)
            self.up_proj = nn.Linear(D_MODEL, INTERMEDIATE, bias=False)
            self.down_proj = nn.Linear(INTERMEDIATE, D_MODEL, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(D_MODEL)
            self.post_attention_layernorm = RMSNorm(D_MODEL)
            if spec["kind"] == "llama":
                self.self_attn = LlamaAttention(spec["kv_heads"])
            elif spec["kind"] == "lrkv":
                self.self_attn = LrkvAttention(spec["rank"])
            else:
                self.self_attn = MlaAttention()
            self.mlp = Mlp()

        def forward(self, x):
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    class Body(nn.Module):  # named "model" in the LM so that tensor names match HF
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(VOCAB, D_MODEL)
            self.layers = nn.ModuleList(Block() for _ in range(N_LAYERS))
            self.norm = RMSNorm(D_MODEL)

    class CausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Body()
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)
                if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                    nn.init.normal_(p, std=0.02 / math.sqrt(2 * N_LAYERS))

        def forward(self, tokens):
            x = self.model.embed_tokens(tokens)
            for block in self.model.layers:
                x = block(x)
            return self.model.norm(x) @ self.model.embed_tokens.weight.t()  # tied lm_head

    return CausalLM()


# ---------------------------------------------------------------------------------------------
# Training


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def evaluate(model, valid, context, max_windows):
    import torch
    n = min(max_windows, (len(valid) - 1) // context)
    starts = torch.arange(n) * context
    total = 0.0
    with torch.no_grad():
        for chunk in starts.split(64):
            x = torch.stack([valid[s:s + context] for s in chunk.tolist()])
            y = torch.stack([valid[s + 1:s + context + 1] for s in chunk.tolist()])
            logits = model(x)
            total += torch.nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), y.reshape(-1), reduction="sum").item()
    return total / (n * context)


def train_one(variant, args, train, valid, log):
    import torch

    torch.manual_seed(args.seed)
    model = build_model(variant, args.context)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    data_gen = torch.Generator().manual_seed(args.seed)  # same batches for every variant
    params = sum(p.numel() for p in model.parameters())
    log(f"[{variant}] {params} parameters")
    start, running = time.time(), None
    kept = {}
    for step in range(args.steps):
        if step in args.keep_steps:
            kept[step] = keep_checkpoint(model, variant, step, args, valid, log)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        offsets = torch.randint(0, len(train) - args.context - 1, (args.batch,), generator=data_gen)
        x = torch.stack([train[o:o + args.context] for o in offsets.tolist()])
        y = torch.stack([train[o + 1:o + args.context + 1] for o in offsets.tolist()])
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % args.log_every == 0 or step == args.steps - 1:
            log(f"[{variant}] step {step:5d} loss {loss.item():.4f} (smoothed {running:.4f}) "
                f"lr {lr_at(step, args.steps, args.lr, args.warmup):.2e} "
                f"{time.time() - start:.0f}s")
    if args.steps in args.keep_steps:
        kept[args.steps] = keep_checkpoint(model, variant, args.steps, args, valid, log)
    model.eval()
    val = evaluate(model, valid, args.context, args.eval_windows)
    seconds = time.time() - start
    log(f"[{variant}] final validation loss {val:.4f} nats/byte ({seconds:.0f}s)")
    entry = {"val_loss": round(val, 4), "train_loss_smoothed": round(running, 4),
             "parameters": params, "seconds": round(seconds, 1)}
    if kept:
        entry["checkpoints"] = {f"checkpoint-{step}": {"step": step, "val_loss": loss}
                                for step, loss in sorted(kept.items())}
    return model, entry


def keep_checkpoint(model, variant, step, args, valid, log):
    """Writes OUT/<variant>/checkpoint-STEP/ with the attention tensors only; returns its
    validation loss (the model is put back in training mode)."""
    import torch

    folder = Path(args.out) / variant / f"checkpoint-{step}"
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {n: t for n, t in model.state_dict().items() if "self_attn" in n}
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(make_config(variant, args.context), indent=2) + "\n")
    model.eval()
    with torch.no_grad():
        loss = round(evaluate(model, valid, args.context, args.eval_windows), 4)
    model.train()
    log(f"[{variant}] kept {folder} (validation loss {loss:.4f})")
    return loss


def save_model(model, variant, args):
    folder = Path(args.out) / variant
    folder.mkdir(parents=True, exist_ok=True)
    tensors = dict(model.state_dict())
    unexpected = set(tensors) ^ set(expected_shapes(variant))
    if unexpected:
        sys.exit(f"train_tiny: internal error: tensor names differ from the layout: {unexpected}")
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(make_config(variant, args.context), indent=2) + "\n")


def update_losses(out, variant, entry, meta):
    path = Path(out) / "losses.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc.update(meta)
    doc.setdefault("models", {})[variant] = entry
    path.write_text(json.dumps(doc, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# Verification with numpy only


def erank(sim):
    lam = np.clip(np.linalg.eigvalsh(sim), 0.0, None)
    p = lam / lam.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def per_head_factors(variant, w, layer):
    """Return (W_Q^h rows, W_K^h rows) per query head, [d_h', d] each, as docs/families.md defines."""
    spec = VARIANTS[variant]
    a = f"model.layers.{layer}.self_attn."
    if spec["kind"] == "llama":
        q, k = w[a + "q_proj.weight"], w[a + "k_proj.weight"]
        group = N_HEADS // spec["kv_heads"]
        return [(q[h * HEAD_DIM:(h + 1) * HEAD_DIM],
                 k[(h // group) * HEAD_DIM:(h // group + 1) * HEAD_DIM]) for h in range(N_HEADS)]
    if spec["kind"] == "lrkv":
        r, q = spec["rank"], w[a + "q_proj.weight"]
        shared, la, lb = (w[a + n] for n in ("k_shared_proj.weight", "k_lora_a.weight",
                                            "k_lora_b.weight"))
        return [(q[h * HEAD_DIM:(h + 1) * HEAD_DIM],
                 shared + lb[h * HEAD_DIM:(h + 1) * HEAD_DIM] @ la[h * r:(h + 1) * r])
                for h in range(N_HEADS)]
    c, rope, nope = MLA_KV_LORA_RANK, MLA_ROPE_DIM, HEAD_DIM
    q, kv_a = w[a + "q_proj.weight"], w[a + "kv_a_proj_with_mqa.weight"]
    gamma, kv_b = w[a + "kv_a_layernorm.weight"], w[a + "kv_b_proj.weight"]
    out = []
    for h in range(N_HEADS):
        k_nope = kv_b[h * (2 * nope):h * (2 * nope) + nope] @ (gamma[:, None] * kv_a[:c])
        out.append((q[h * (nope + rope):(h + 1) * (nope + rope)], np.vstack([k_nope, kv_a[c:]])))
    return out


def layer_erank(variant, w, layer, repr_):
    """Uncentred erank of the cosine Gram of the per-head A_h, built naively as d x d matrices.

    repr_ "qk": A_h = W_Q^h (W_K^h)^T; "k": A_h = W_K^h (W_K^h)^T (the key head query head h uses).
    """
    mats = []
    for qh, kh in per_head_factors(variant, w, layer):
        left = qh if repr_ == "qk" else kh
        mats.append(left.astype(np.float64).T @ kh.astype(np.float64))
    flat = np.stack([m.ravel() / np.linalg.norm(m) for m in mats])
    return erank(flat @ flat.T)


def verify(out):
    ok = True
    for variant in VARIANTS:
        folder = Path(out) / variant
        if not (folder / "model.safetensors").exists():
            print(f"{variant:8s} missing")
            ok = False
            continue
        w = read_safetensors_numpy(folder / "model.safetensors")
        config = json.loads((folder / "config.json").read_text())
        want = expected_shapes(variant)
        bad = [n for n in set(w) | set(want) if n not in w or n not in want
               or list(w[n].shape) != want[n] or not np.isfinite(w[n]).all()]
        ok = ok and not bad
        print(f"{variant:8s} {len(w):3d} tensors: {'names/shapes/finite ok' if not bad else 'BAD ' + str(sorted(bad))}")
        for repr_ in ("qk", "k"):
            curve = [layer_erank(variant, w, i, repr_) for i in range(config["num_hidden_layers"])]
            print(f"         {repr_:2s} erank per layer " + " ".join(f"{e:.4f}" for e in curve))
    return ok


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="data/tiny")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated subset of " + ",".join(VARIANTS))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-windows", type=int, default=1024,
                    help="non-overlapping validation windows scored at the end")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--corpus-root", default=str(CORPUS_ROOT))
    ap.add_argument("--keep-steps", default="",
                    help="comma list of steps N: write only OUT/<variant>/checkpoint-N/ (attention "
                         "tensors) after N steps, not the final model")
    ap.add_argument("--verify", action="store_true",
                    help="only read OUT/*/ back with numpy, check names/shapes, print qk and k erank")
    args = ap.parse_args()
    args.keep_steps = {int(n) for n in args.keep_steps.split(",") if n}
    if any(n < 0 or n > args.steps for n in args.keep_steps):
        sys.exit(f"train_tiny: error: --keep-steps must lie in 0..{args.steps}")

    if args.verify:
        sys.exit(0 if verify(args.out) else 1)

    import torch
    torch.set_num_threads(args.threads)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"train_tiny: error: unknown variant(s) {unknown}; expected {list(VARIANTS)}")

    data, files = load_corpus(Path(args.corpus_root))
    train_bytes, valid_bytes = split_corpus(data)
    meta = {
        "corpus": {"root": args.corpus_root, "files": len(files), "bytes": len(data),
                   "sha256": hashlib.sha256(data).hexdigest(),
                   "train_bytes": len(train_bytes), "valid_bytes": len(valid_bytes)},
        "unigram_val_loss": round(unigram_cross_entropy(train_bytes, valid_bytes), 4),
        "uniform_loss": round(math.log(VOCAB), 4),
        "loss_units": "nats per byte, mean over the scored validation tokens",
        "training": {"steps": args.steps, "seed": args.seed, "batch": args.batch,
                     "context": args.context, "lr": args.lr, "warmup": args.warmup,
                     "schedule": "linear warmup then cosine to 10 %", "optimizer": "AdamW(0.9,0.95)",
                     "weight_decay": args.weight_decay, "grad_clip": 1.0,
                     "eval_windows": args.eval_windows, "threads": args.threads,
                     "keep_steps": sorted(args.keep_steps),
                     "torch": torch.__version__},
    }
    print(f"corpus {len(files)} files, {len(data)} bytes, sha256 {meta['corpus']['sha256'][:16]}…; "
          f"unigram val loss {meta['unigram_val_loss']}", flush=True)
    train = torch.frombuffer(bytearray(train_bytes), dtype=torch.uint8).long()
    valid = torch.frombuffer(bytearray(valid_bytes), dtype=torch.uint8).long()

    for variant in variants:
        model, entry = train_one(variant, args, train, valid, lambda s: print(s, flush=True))
        if not args.keep_steps:
            save_model(model, variant, args)
        update_losses(args.out, variant, entry, meta)


if __name__ == "__main__":
    main()
