#!/usr/bin/env python3
"""Writes a GGUF v3 file from a Hugging Face llama-layout safetensors checkpoint, the way llama.cpp's
convert_hf_to_gguf.py + llama-quantize lay it out — independently of kvrank's C++ reader.

  write_gguf.py SRC OUT.gguf [--type F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q2_K|Q3_K|Q4_K|Q5_K|
        Q6_K|IQ4_NL|IQ4_XS] [--arch llama]
        [--alignment N] [--dequantized DIR]

SRC: a folder with config.json and *.safetensors (llama names: model.layers.{i}.self_attn.
{q,k,v,o}_proj.weight, optional q_norm/k_norm; or DeepSeek MLA names with --arch deepseek2, whose
kv_lora_rank, q_lora_rank and rope dimension go into the metadata). Attention weights are quantized to --type (a
weight whose rows are not whole blocks falls back to F16, as llama-quantize does); every other
tensor is written F32. For --arch llama the rows of Q and K are permuted within each head as
llama.cpp does for its RoPE layout; for gemma* the q/k norm gains are stored as 1 + w (as llama.cpp
does). Metadata: general.*, {arch}.block_count, embedding_length, attention.head_count,
head_count_kv, key_length, value_length, and a tokenizer vocabulary (a long string array).

--dequantized DIR writes what the GGUF holds, dequantized here in numpy and un-permuted, as a
llama-layout safetensors checkpoint (config.json + model.safetensors, F32): scripts/reference.py on
it gives the numbers kvrank must report for OUT.gguf. stdlib + numpy only; also importable.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import reference  # noqa: E402  (scripts/reference.py: its tiny safetensors reader)

GGML_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8,
              "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "IQ2_XXS": 16,
              "IQ4_NL": 20, "IQ4_XS": 23, "BF16": 30}
BLOCK = {"IQ2_XXS": 256, "F32": 1, "F16": 1, "BF16": 1, "Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32,
         "IQ4_NL": 32, "Q2_K": 256, "Q3_K": 256, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256,
         "IQ4_XS": 256}

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)


# ---- quantizers: each returns (block bytes, the float32 values the blocks decode to) -----------

def f16(values):
    """Scales as stored (float16) and as decoded (float32)."""
    half = np.asarray(values, dtype=np.float32).astype(np.float16)
    return half, half.astype(np.float32)


def safe_div(a, b):
    return np.divide(a, b, out=np.zeros_like(a), where=b != 0)


def quantize_q8_0(x):  # x: [blocks, 32] float32
    d_half, d = f16(np.abs(x).max(axis=1) / 127)
    q = np.clip(np.rint(safe_div(x, d[:, None])), -127, 127).astype(np.int8)
    raw = np.concatenate([d_half.view(np.uint8).reshape(-1, 2), q.view(np.uint8)], axis=1)
    return raw, q.astype(np.float32) * d[:, None]


def quantize_q4_0(x):
    extreme = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]  # signed value of largest magnitude
    d_half, d = f16(extreme / -8)
    q = np.clip(np.floor(safe_div(x, d[:, None]) + 8.5), 0, 15).astype(np.uint8)
    packed = q[:, :16] | (q[:, 16:] << 4)
    raw = np.concatenate([d_half.view(np.uint8).reshape(-1, 2), packed], axis=1)
    return raw, (q.astype(np.float32) - 8) * d[:, None]


def k_scales(x, levels):
    """8 sub-blocks of 32 per super-block: 6-bit scales and mins, f16 super-scales."""
    sub = x.reshape(len(x), 8, 32)
    low = np.minimum(sub.min(axis=2), 0)
    scale = (sub.max(axis=2) - low) / levels
    d_half, d = f16(scale.max(axis=1) / 63)
    dmin_half, dmin = f16(-low.min(axis=1) / 63)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), 0, 63).astype(np.uint8)
    mn = np.clip(np.rint(safe_div(-low, dmin[:, None])), 0, 63).astype(np.uint8)
    step = d[:, None] * sc.astype(np.float32)  # [blocks, 8]
    offset = dmin[:, None] * mn.astype(np.float32)
    q = np.clip(np.rint(safe_div(sub + offset[:, :, None], np.broadcast_to(step[:, :, None], sub.shape))),
                0, levels).astype(np.uint8)
    values = step[:, :, None] * q.astype(np.float32) - offset[:, :, None]
    packed = np.zeros((len(x), 12), dtype=np.uint8)
    for j in range(4):
        packed[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        packed[:, j + 4] = (mn[:, j] & 63) | ((mn[:, j + 4] >> 4) << 6)
        packed[:, j + 8] = (sc[:, j + 4] & 0xF) | ((mn[:, j + 4] & 0xF) << 4)
    head = np.concatenate([d_half.view(np.uint8).reshape(-1, 2),
                           dmin_half.view(np.uint8).reshape(-1, 2), packed], axis=1)
    return head, q, values.reshape(len(x), 256)


def nibbles(q):
    """q: [blocks, 8, 32] → 128 bytes: run r holds sub-block 2r (low) and 2r + 1 (high)."""
    low, high = q[:, 0::2, :] & 0xF, q[:, 1::2, :] & 0xF
    return (low | (high << 4)).reshape(len(q), 128)


def quantize_q4_k(x):
    head, q, values = k_scales(x, 15)
    return np.concatenate([head, nibbles(q)], axis=1), values


def quantize_q5_k(x):
    head, q, values = k_scales(x, 31)
    qh = np.zeros((len(x), 32), dtype=np.uint8)
    for sub in range(8):
        qh |= ((q[:, sub, :] >> 4) & 1) << sub
    return np.concatenate([head, qh, nibbles(q)], axis=1), values


def quantize_q6_k(x):
    sub = x.reshape(len(x), 16, 16)
    scale = np.abs(sub).max(axis=2) / 31
    d_half, d = f16(scale.max(axis=1) / 127)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), -128, 127).astype(np.int8)
    step = d[:, None] * sc.astype(np.float32)
    q = np.clip(np.rint(safe_div(sub, np.broadcast_to(step[:, :, None], sub.shape))), -32, 31)
    values = (step[:, :, None] * q.astype(np.float32)).reshape(len(x), 256)
    u = (q + 32).astype(np.uint8).reshape(len(x), 2, 4, 32)  # [block, half, k, l]: value 128h+32k+l
    ql = np.zeros((len(x), 2, 64), dtype=np.uint8)
    ql[:, :, :32] = (u[:, :, 0] & 0xF) | ((u[:, :, 2] & 0xF) << 4)
    ql[:, :, 32:] = (u[:, :, 1] & 0xF) | ((u[:, :, 3] & 0xF) << 4)
    qh = np.zeros((len(x), 2, 32), dtype=np.uint8)
    for k in range(4):
        qh |= ((u[:, :, k] >> 4) & 3) << (2 * k)
    raw = np.concatenate([ql.reshape(len(x), 128), qh.reshape(len(x), 64), sc.view(np.uint8),
                          d_half.view(np.uint8).reshape(-1, 2)], axis=1)
    return raw, values


def low_high_nibbles(q):
    """q: [blocks, 32] of 0..15 → 16 bytes: value j in the low nibble of byte j, j + 16 high."""
    return (q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)


def affine_32(x, levels):
    """Q4_1 / Q5_1: x ≈ d·q + m, q in 0..levels, m the block's minimum."""
    m_half, m = f16(x.min(axis=1))
    d_half, d = f16((x.max(axis=1) - m) / levels)
    q = np.clip(np.rint(safe_div(x - m[:, None], np.broadcast_to(d[:, None], x.shape))), 0,
                levels).astype(np.uint8)
    head = np.concatenate([d_half.view(np.uint8).reshape(-1, 2), m_half.view(np.uint8).reshape(-1, 2)],
                          axis=1)
    return head, q, d[:, None] * q.astype(np.float32) + m[:, None]


def fifth_bits(q):
    """The 32 fifth bits of a block as a little-endian uint32 (bit j: value j)."""
    bits = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)
    return bits.sum(axis=1, dtype=np.uint32).astype("<u4").view(np.uint8).reshape(-1, 4)


def quantize_q4_1(x):
    head, q, values = affine_32(x, 15)
    return np.concatenate([head, low_high_nibbles(q)], axis=1), values


def quantize_q5_1(x):
    head, q, values = affine_32(x, 31)
    return np.concatenate([head, fifth_bits(q), low_high_nibbles(q)], axis=1), values


def quantize_q5_0(x):
    extreme = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
    d_half, d = f16(extreme / -16)
    q = np.clip(np.floor(safe_div(x, np.broadcast_to(d[:, None], x.shape)) + 16.5), 0,
                31).astype(np.uint8)
    raw = np.concatenate([d_half.view(np.uint8).reshape(-1, 2), fifth_bits(q), low_high_nibbles(q)],
                         axis=1)
    return raw, (q.astype(np.float32) - 16) * d[:, None]


IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                      dtype=np.float32)


def nearest_iq4(scaled):
    return np.abs(scaled[..., None] - IQ4_VALUES).argmin(axis=-1).astype(np.uint8)


def quantize_iq4_nl(x):
    d_half, d = f16(np.abs(x).max(axis=1) / 127)
    q = nearest_iq4(safe_div(x, np.broadcast_to(d[:, None], x.shape)))
    raw = np.concatenate([d_half.view(np.uint8).reshape(-1, 2), low_high_nibbles(q)], axis=1)
    return raw, d[:, None] * IQ4_VALUES[q]


def quantize_iq4_xs(x):
    sub = x.reshape(len(x), 8, 32)
    scale = np.abs(sub).max(axis=2) / 127
    d_half, d = f16(scale.max(axis=1) / 31)
    ls = (np.clip(np.rint(safe_div(scale, np.broadcast_to(d[:, None], scale.shape))), -32, 31)
          + 32).astype(np.uint16)  # 6 bits, offset 32
    step = d[:, None] * (ls.astype(np.float32) - 32)
    q = nearest_iq4(safe_div(sub, np.broadcast_to(step[:, :, None], sub.shape)))
    values = (step[:, :, None] * IQ4_VALUES[q]).reshape(len(x), 256)
    scales_h = np.zeros(len(x), dtype=np.uint16)
    scales_l = np.zeros((len(x), 4), dtype=np.uint8)
    for ib in range(8):
        scales_h |= ((ls[:, ib] >> 4) & 3) << (2 * ib)
        scales_l[:, ib // 2] |= ((ls[:, ib] & 0xF) << (4 * (ib % 2))).astype(np.uint8)
    qs = np.concatenate([low_high_nibbles(q[:, ib]) for ib in range(8)], axis=1)
    raw = np.concatenate([d_half.view(np.uint8).reshape(-1, 2),
                          scales_h.astype("<u2").view(np.uint8).reshape(-1, 2), scales_l, qs], axis=1)
    return raw, values


def two_bit_planes(q):
    """q: [blocks, 256] of 0..3 → 64 bytes: value 128n + 32j + 16h + l in bits 2j of byte 32n + 16h + l."""
    planes = q.reshape(len(q), 2, 4, 32)  # [block, n, j, 16h + l]
    packed = np.zeros((len(q), 2, 32), dtype=np.uint8)
    for j in range(4):
        packed |= (planes[:, :, j] & 3) << (2 * j)
    return packed.reshape(len(q), 64)


def quantize_q2_k(x):
    sub = x.reshape(len(x), 16, 16)
    low = np.minimum(sub.min(axis=2), 0)
    scale = (sub.max(axis=2) - low) / 3
    d_half, d = f16(scale.max(axis=1) / 15)
    dmin_half, dmin = f16(-low.min(axis=1) / 15)
    sc = np.clip(np.rint(safe_div(scale, np.broadcast_to(d[:, None], scale.shape))), 0, 15).astype(np.uint8)
    mn = np.clip(np.rint(safe_div(-low, np.broadcast_to(dmin[:, None], low.shape))), 0, 15).astype(np.uint8)
    step = d[:, None] * sc.astype(np.float32)
    offset = dmin[:, None] * mn.astype(np.float32)
    q = np.clip(np.rint(safe_div(sub + offset[:, :, None], np.broadcast_to(step[:, :, None], sub.shape))),
                0, 3).astype(np.uint8)
    values = (step[:, :, None] * q.astype(np.float32) - offset[:, :, None]).reshape(len(x), 256)
    raw = np.concatenate([sc | (mn << 4), two_bit_planes(q.reshape(len(x), 256)),
                          d_half.view(np.uint8).reshape(-1, 2), dmin_half.view(np.uint8).reshape(-1, 2)],
                         axis=1)
    return raw, values


def quantize_q3_k(x):
    sub = x.reshape(len(x), 16, 16)
    scale = np.abs(sub).max(axis=2) / 4
    d_half, d = f16(scale.max(axis=1) / 31)
    sc = np.clip(np.rint(safe_div(scale, np.broadcast_to(d[:, None], scale.shape))), -32, 31)
    step = d[:, None] * sc.astype(np.float32)
    q = np.clip(np.rint(safe_div(sub, np.broadcast_to(step[:, :, None], sub.shape))), -4, 3)
    values = (step[:, :, None] * q.astype(np.float32)).reshape(len(x), 256)
    q3 = (q + 4).astype(np.uint8).reshape(len(x), 256)  # 0..7: two low bits and a high bit
    hmask = np.zeros((len(x), 32), dtype=np.uint8)
    high = (q3 >> 2).reshape(len(x), 2, 4, 32)  # [block, n, j, 16h + l]: bit 4n + j of hmask[16h + l]
    for n in range(2):
        for j in range(4):
            hmask |= high[:, n, j] << (4 * n + j)
    u = (sc + 32).astype(np.uint8)  # 6-bit scales
    packed = np.zeros((len(x), 12), dtype=np.uint8)
    for i in range(16):
        packed[:, i % 8] |= (u[:, i] & 0xF) << (4 * (i // 8))
        packed[:, 8 + i % 4] |= ((u[:, i] >> 4) & 3) << (2 * (i // 4))
    raw = np.concatenate([hmask, two_bit_planes(q3 & 3), packed, d_half.view(np.uint8).reshape(-1, 2)],
                         axis=1)
    return raw, values


QUANTIZERS = {"Q8_0": quantize_q8_0, "Q4_0": quantize_q4_0, "Q4_K": quantize_q4_k,
              "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k, "Q4_1": quantize_q4_1,
              "Q5_0": quantize_q5_0, "Q5_1": quantize_q5_1, "Q2_K": quantize_q2_k,
              "Q3_K": quantize_q3_k, "IQ4_NL": quantize_iq4_nl, "IQ4_XS": quantize_iq4_xs}


def bf16_bits(values):
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def encode(values, type_name):
    """A 2-D [out, in] (or 1-D) float array → (ggml type name, raw bytes, decoded float32 values)."""
    x = np.ascontiguousarray(values, dtype=np.float32)
    if type_name in QUANTIZERS and x.shape[-1] % BLOCK[type_name] != 0:
        type_name = "F16"  # rows that are not whole blocks: llama-quantize's fallback
    if type_name == "IQ2_XXS":  # a type kvrank does not read: zero blocks, values unknown
        return type_name, bytes(x.size // 256 * 66), np.full_like(x, np.nan)
    if type_name == "F32":
        return type_name, x.astype("<f4").tobytes(), x
    if type_name == "F16":
        half = x.astype("<f2")
        return type_name, half.tobytes(), half.astype(np.float32)
    if type_name == "BF16":
        bits = bf16_bits(x)
        return type_name, bits.astype("<u2").tobytes(), (bits.astype(np.uint32) << 16).view(np.float32)
    raw, decoded = QUANTIZERS[type_name](x.reshape(-1, BLOCK[type_name]))
    return type_name, raw.astype(np.uint8).tobytes(), decoded.reshape(x.shape).astype(np.float32)


# ---- llama.cpp's RoPE row permutation --------------------------------------------------------

def permute(weights, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: within each head, rows (half, i) → (i, half)."""
    rows = weights.shape[0]
    return (weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def unpermute(weights, heads):
    rows = weights.shape[0]
    return (weights.reshape(heads, rows // heads // 2, 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


# ---- GGUF serialisation ----------------------------------------------------------------------

def gguf_string(text):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def scalar_bytes(kind, value):
    formats = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
               BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
    return gguf_string(value) if kind == STRING else struct.pack(formats[kind], value)


def kv_bytes(key, kind, value):
    """One metadata entry; an array value is (element kind, [values])."""
    out = gguf_string(key) + struct.pack("<I", kind)
    if kind == ARRAY:
        element, values = value
        out += struct.pack("<IQ", element, len(values))
        out += b"".join(scalar_bytes(element, v) for v in values)
    else:
        out += scalar_bytes(kind, value)
    return out


def pad(length, alignment):
    return (alignment - length % alignment) % alignment


def write_gguf_file(path, metadata, tensors, alignment=32, version=3):
    """metadata: [(key, kind, value)]; tensors: [(name, ggml type name, shape [out, in], bytes)]."""
    if alignment != 32:
        metadata = metadata + [("general.alignment", U32, alignment)]
    header = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    header += b"".join(kv_bytes(*entry) for entry in metadata)
    data, infos = b"", b""
    for name, type_name, shape, raw in tensors:
        data += b"\0" * pad(len(data), alignment)
        ne = list(reversed(shape))  # ggml order: ne[0] = in-features
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", GGML_TYPES[type_name], len(data))
        data += raw
    body = header + infos
    with open(path, "wb") as f:
        f.write(body + b"\0" * pad(len(body), alignment) + data)


# ---- HF checkpoint → GGUF --------------------------------------------------------------------

GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "q_norm": "attn_q_norm", "k_norm": "attn_k_norm",
              # DeepSeek MLA (llama.cpp's deepseek2 tensor names)
              "q_a_proj": "attn_q_a", "q_a_layernorm": "attn_q_a_norm", "q_b_proj": "attn_q_b",
              "kv_a_proj_with_mqa": "attn_kv_a_mqa", "kv_a_layernorm": "attn_kv_a_norm",
              "kv_b_proj": "attn_kv_b"}
LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
          "kv_b_proj"}


def gguf_name(hf_name):
    parts = hf_name.split(".")  # model.layers.{i}.self_attn.{role}.weight
    if len(parts) == 6 and parts[:2] == ["model", "layers"] and parts[3] == "self_attn":
        return f"blk.{parts[2]}.{GGUF_NAMES[parts[4]]}.{parts[5]}"
    if len(parts) == 5 and parts[:2] == ["model", "layers"] and parts[3] == "input_layernorm":
        return f"blk.{parts[2]}.attn_norm.{parts[4]}"
    return hf_name


def split_kv_b(values, config):
    """MLA's kv_b_proj [H·(n + v), c] as newer llama.cpp converters store it: attn_k_b [H, c, n]
    (each head's key rows transposed) and attn_v_b [H, v, c]."""
    heads, nope, v_dim = config["num_attention_heads"], config["qk_nope_head_dim"], config["v_head_dim"]
    per_head = values.reshape(heads, nope + v_dim, values.shape[1])
    return (np.ascontiguousarray(per_head[:, :nope].transpose(0, 2, 1)),
            np.ascontiguousarray(per_head[:, nope:]))


def write_split(path, metadata, tensors, parts, alignment=32):
    """llama-gguf-split's layout: PREFIX-0000k-of-0000N.gguf, the metadata in the first part, the
    tensors dealt out in order; each part carries split.no, split.count, split.tensors.count."""
    assert path.endswith(".gguf")
    prefix = path[:-len(".gguf")]
    chunk = -(-len(tensors) // parts)
    names = []
    for k in range(parts):
        name = f"{prefix}-{k + 1:05d}-of-{parts:05d}.gguf"
        split = [("split.no", U16, k), ("split.count", U16, parts),
                 ("split.tensors.count", I32, len(tensors))]
        write_gguf_file(name, (metadata if k == 0 else []) + split,
                        tensors[k * chunk:(k + 1) * chunk], alignment)
        names.append(name)
    return names


def convert(src, out, type_name="F32", arch="llama", alignment=32, dequantized=None,
            vocabulary_size=3000, role_types=None, parts=1, split_mla_kv_b=False):
    """role_types: {role: type} for some attention roles ("v_proj": "IQ2_XXS" writes zero bytes
    of a type kvrank refuses); parts > 1 writes a split GGUF (write_split) and returns its names;
    split_mla_kv_b writes MLA's kv_b_proj as attn_k_b / attn_v_b."""
    config, hf = reference.load_llama(src)
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    if arch == "deepseek2":
        key_length = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
        value_length = config["v_head_dim"]
    else:
        key_length = value_length = head_dim
    tensors, decoded = [], {}
    for name in sorted(hf):
        if not name.startswith("model.layers."):
            continue  # embeddings etc.: extra_tensors() writes GGUF's own
        values = hf[name].astype(np.float32)
        role = name.split(".")[-2] if name.startswith("model.layers.") else ""
        norm = role in ("q_norm", "k_norm", "input_layernorm")
        permuted = arch == "llama" and role in ("q_proj", "k_proj")
        group = heads if role == "q_proj" else kv_heads
        if permuted:
            values = permute(values, group)
        if arch.startswith("gemma") and norm:  # llama.cpp stores Gemma's norm gains as 1 + w
            values = values + np.float32(1)
        attention = role in LINEAR
        wanted = (role_types or {}).get(role, type_name if attention else "F32")
        stored, raw, back = encode(values, wanted)
        if split_mla_kv_b and role == "kv_b_proj":
            halves = []
            for half, half_values in zip(("attn_k_b", "attn_v_b"), split_kv_b(values, config)):
                half_type, half_raw, half_back = encode(half_values, wanted)
                tensors.append((gguf_name(name).replace("attn_kv_b", half), half_type,
                                list(half_values.shape), half_raw))
                halves.append(half_back)
            back = np.concatenate([halves[0].transpose(0, 2, 1), halves[1]], axis=1).reshape(
                values.shape)
        else:
            tensors.append((gguf_name(name), stored, list(values.shape), raw))
        if permuted:
            back = unpermute(back, group)
        if arch.startswith("gemma") and norm:
            back = back - np.float32(1)
        decoded[name] = back
    written = {name for name, *_ in tensors}
    tensors += [t for t in extra_tensors(config) if t[0] not in written]
    vocabulary = [f"tok{i}" for i in range(vocabulary_size)] + ["é", "<s>", ""]
    metadata = [
        ("general.architecture", STRING, arch),
        ("general.name", STRING, "kvrank test model"),
        ("general.file_type", U32, 1),
        (f"{arch}.block_count", U32, config["num_hidden_layers"]),
        (f"{arch}.embedding_length", U32, config["hidden_size"]),
        (f"{arch}.attention.head_count", U32, heads),
        (f"{arch}.attention.head_count_kv", U32, kv_heads),
        (f"{arch}.attention.key_length", U32, key_length),
        (f"{arch}.attention.value_length", U32, value_length),
        (f"{arch}.rope.freq_base", F32, 10000.0),
        (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-6),
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, vocabulary)),
        ("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * len(vocabulary))),
        ("tokenizer.ggml.add_bos_token", BOOL, 1),
    ]
    if arch == "deepseek2":
        metadata += [(f"{arch}.attention.kv_lora_rank", U32, config["kv_lora_rank"]),
                     (f"{arch}.attention.q_lora_rank", U32, config.get("q_lora_rank") or 0),
                     (f"{arch}.rope.dimension_count", U32, config["qk_rope_head_dim"])]
    names = write_split(out, metadata, tensors, parts, alignment) if parts > 1 else [out]
    if parts == 1:
        write_gguf_file(out, metadata, tensors, alignment)
    if dequantized:
        write_dequantized(dequantized, config, decoded)
    return names


def extra_tensors(config):
    """What a real GGUF holds besides attention: an embedding, norms, and an MLP weight of a type
    kvrank does not dequantize (IQ2_XXS, random bytes: a reader must skip it, not refuse the file)."""
    d = config["hidden_size"]
    rng = np.random.default_rng(7)
    extra = [("token_embd.weight", "F32", [4, d], rng.standard_normal((4, d)).astype("<f4").tobytes())]
    for i in range(config["num_hidden_layers"]):
        extra.append((f"blk.{i}.attn_norm.weight", "F32", [d], np.ones(d, dtype="<f4").tobytes()))
    if d % 256 == 0:
        extra.append(("blk.0.ffn_gate.weight", "IQ2_XXS", [8, d],
                      rng.integers(0, 256, 8 * (d // 256) * 66, dtype=np.uint8).tobytes()))
    return extra


def write_dequantized(folder, config, tensors):
    os.makedirs(folder, exist_ok=True)
    header, data = {}, b""
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("out")
    parser.add_argument("--type", default="F32", choices=sorted(BLOCK))
    parser.add_argument("--arch", default="llama")
    parser.add_argument("--alignment", type=int, default=32)
    parser.add_argument("--dequantized")
    parser.add_argument("--vocabulary", type=int, default=3000, help="tokens in the vocabulary")
    args = parser.parse_args()
    convert(args.src, args.out, args.type, args.arch, args.alignment, args.dequantized,
            args.vocabulary)


if __name__ == "__main__":
    main()
