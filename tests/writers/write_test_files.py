#!/usr/bin/env python3
"""Writes checkpoint files for the reader tests, independently of kvrank (stdlib + numpy).

    write_test_files.py valid OUT       valid files of every format and dtype + OUT/valid.json
    write_test_files.py malformed OUT   a corpus of broken files + OUT/malformed.json

valid.json lists, per file or folder, the tensors kvrank must find (name, dtype, shape) and the
float32 values to_f32() must return (C order), decoded here from the raw bits with numpy or with
the FP8 formulas of the OCP spec; "errors" lists tensors whose conversion must fail.
malformed.json lists broken inputs with a fragment of the message kvrank must give.
Safetensors files are built byte by byte here; NPY/NPZ files come from numpy itself.
"""
import io
import json
import math
import os
import struct
import sys
import zipfile
import zlib

import numpy as np


# ----------------------------------------------------------------------------- independent decoders

def fp8_value(bits, exponent_bits, mantissa_bits, bias, finite_only):
    """The value of an FP8 byte from its fields (OCP 8-bit floating point spec)."""
    sign = -1.0 if bits & 0x80 else 1.0
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if finite_only and exponent == top and mantissa == (1 << mantissa_bits) - 1:
        return math.nan
    if not finite_only and exponent == top:
        return sign * math.inf if mantissa == 0 else math.nan
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + mantissa / 2 ** mantissa_bits) * 2.0 ** (exponent - bias)


def e4m3(bits):
    return fp8_value(bits, 4, 3, 7, True)


def e5m2(bits):
    return fp8_value(bits, 5, 2, 15, False)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f16_values(bits):
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


# ----------------------------------------------------------------------------- writers

def safetensors_bytes(tensors, metadata=None):
    """tensors: list of (name, dtype string, shape, raw bytes), laid out in order."""
    header, data, offset = {}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    return raw_safetensors(json.dumps(header).encode(), data)


def raw_safetensors(header, data, header_size=None):
    header = header + b" " * (-len(header) % 8)  # padded like the reference writer
    size = len(header) if header_size is None else header_size
    return struct.pack("<Q", size) + header + data


def npy_bytes(array, version=None):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def npy_with_header(header_text, data, version=1):
    """An NPY file with a hand-written header dict (padded to 64 bytes like numpy)."""
    header = header_text.encode("latin1")
    prefix = 10 if version == 1 else 12
    header += b" " * (-(prefix + len(header) + 1) % 64) + b"\n"
    length = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header + data


def npz_bytes(arrays, compressed):
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def zip_bytes(members, method=zipfile.ZIP_STORED):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def write(out, relpath, data):
    path = os.path.join(out, relpath)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data if isinstance(data, bytes) else data.encode())


def values_of(array):
    """Expected to_f32() output: C-order float32 values as Python floats (exact in JSON)."""
    return [float(v) for v in np.asarray(array, dtype=np.float32).flatten(order="C")]


def expected(name, dtype, shape, values):
    return {"name": name, "dtype": dtype, "shape": list(shape), "values": values}


# ----------------------------------------------------------------------------- valid files

def dtype_tensors():
    """One tensor per dtype with bit patterns whose decodings are known exactly."""
    f64 = np.array([0.1, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, -0.0, 1e-46, 3.4028235e38])
    f32 = np.array([1.5, -2.25, 3.4028234663852886e38, 1.401298464324817e-45], dtype=np.float32)
    f16 = [0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0x8001, 0xC000, 0x3555]
    bf16 = [0x3F81, 0xC2F7, 0x0001, 0x7F7F]
    fp8_e4m3 = [0x7E, 0xFE, 0x01, 0x08, 0x38, 0x07, 0x80, 0x77]
    fp8_e5m2 = [0x7B, 0x01, 0x3C, 0x04, 0x83, 0xFB]
    tensors = [
        ("f64", "F64", (2, 3), f64.astype("<f8").tobytes(), values_of(f64.astype(np.float32))),
        ("f32", "F32", (4,), f32.astype("<f4").tobytes(), values_of(f32)),
        ("f16", "F16", (8,), np.array(f16, "<u2").tobytes(), values_of(f16_values(f16))),
        ("bf16", "BF16", (2, 2), np.array(bf16, "<u2").tobytes(), values_of(bf16_values(bf16))),
        ("e4m3", "F8_E4M3", (8,), bytes(fp8_e4m3), [e4m3(b) for b in fp8_e4m3]),
        ("e5m2", "F8_E5M2", (2, 3), bytes(fp8_e5m2), [e5m2(b) for b in fp8_e5m2]),
        ("position_ids", "I64", (1, 4), np.arange(4, dtype="<i8").tobytes(), None),
        ("mask", "BOOL", (3,), bytes([1, 0, 1]), None),
        ("empty", "F32", (0, 4), b"", []),
        ("scalar", "F32", (), np.array([2.5], "<f4").tobytes(), [2.5]),
    ]
    return tensors


def nonfinite_tensors():
    """Tensors whose conversion must fail, with a fragment of the message."""
    return [
        ("bf16_nan", "BF16", (2, 2), np.array([0x3F80, 0, 0x7FC0, 0x3F80], "<u2").tobytes(),
         "contains NaN at element 2 (index [1, 0])"),
        ("e5m2_inf", "F8_E5M2", (2,), bytes([0x3C, 0x7C]), "contains Inf at element 1"),
        ("e4m3_nan", "F8_E4M3", (1,), bytes([0x7F]), "contains NaN at element 0"),
        ("f16_inf", "F16", (3,), np.array([0, 0, 0xFC00], "<u2").tobytes(),
         "contains Inf at element 2"),
        ("f64_too_big", "F64", (1,), np.array([1e39], "<f8").tobytes(), "does not fit in float32"),
        ("ints", "I64", (1,), np.array([7], "<i8").tobytes(), "is not a floating-point type"),
    ]


def write_valid(out):
    cases, errors = [], []

    tensors = dtype_tensors()
    write(out, "dtypes.safetensors",
          safetensors_bytes([t[:4] for t in tensors], metadata={"format": "pt"}))
    cases.append({"path": "dtypes.safetensors", "metadata": {"format": "pt"},
                  "tensors": [expected(n, d, s, v) for n, d, s, _, v in tensors]})

    bad = nonfinite_tensors()
    write(out, "nonfinite.safetensors", safetensors_bytes([t[:4] for t in bad]))
    cases.append({"path": "nonfinite.safetensors",
                  "tensors": [expected(n, d, s, None) for n, d, s, _, _ in bad]})
    errors += [{"path": "nonfinite.safetensors", "tensor": n, "expect": m} for n, _, _, _, m in bad]

    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((3, 4))
    cube = rng.standard_normal((2, 3, 4))
    npy_files = {
        "npy/a_f8.npy": (matrix, "F64", None),
        "npy/b_f4.npy": (matrix.astype(np.float32), "F32", None),
        "npy/c_f2.npy": (matrix.astype(np.float16), "F16", None),
        "npy/d_fortran.npy": (np.asfortranarray(matrix.astype(np.float32)), "F32", None),
        "npy/e_fortran3d.npy": (np.asfortranarray(cube), "F64", None),
        "npy/f_scalar.npy": (np.array(3.25, dtype=np.float32), "F32", None),
        "npy/g_vector.npy": (np.arange(5, dtype=np.float32), "F32", None),
        "npy/h_v2.npy": (matrix.astype(np.float32), "F32", (2, 0)),
        "npy/i_v3.npy": (matrix.astype(np.float32), "F32", (3, 0)),
        "npy/j_zero.npy": (np.zeros((0, 3), dtype=np.float32), "F32", None),
        "npy/k_ints.npy": (np.arange(6, dtype=np.int64).reshape(2, 3), "I64", None),
    }
    for path, (array, dtype, version) in npy_files.items():
        write(out, path, npy_bytes(array, version))
        name = os.path.splitext(os.path.basename(path))[0]
        values = None if dtype == "I64" else values_of(array.astype(np.float32))
        cases.append({"path": path, "tensors": [expected(name, dtype, array.shape, values)]})
    cases.append({"path": "npy", "tensors": [c["tensors"][0] for c in cases[-len(npy_files):]]})

    # bfloat16 stored as 2-byte voids (how numpy keeps bf16 without ml_dtypes).
    bf16_bits = np.array([[0x3F81, 0xC2F7, 0x0001], [0x4049, 0x3F80, 0xBF80]], dtype="<u2")
    write(out, "bf16.npy", npy_bytes(bf16_bits.view("V2")))
    cases.append({"path": "bf16.npy", "bf16_void": True, "tensors": [
        expected("bf16", "BF16", bf16_bits.shape, values_of(bf16_values(bf16_bits)))]})

    arrays = {"q": matrix.astype(np.float32), "k": np.asfortranarray(matrix),
              "big": np.tile(np.arange(50, dtype=np.float32), (100, 1))}
    for path, compressed in (("stored.npz", False), ("compressed.npz", True)):
        write(out, path, npz_bytes(arrays, compressed))
        cases.append({"path": path, "tensors": [
            expected(n, "F32" if a.dtype == np.float32 else "F64", a.shape,
                     values_of(a)) for n, a in arrays.items()]})

    # A Hugging Face folder with config.json and a sharded checkpoint.
    def f32_tensor(name, shape, seed):
        array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        return (name, "F32", shape, array.tobytes()), expected(name, "F32", shape, values_of(array))
    shard1 = [f32_tensor("model.layers.0.self_attn.q_proj.weight", (4, 4), 1),
              f32_tensor("model.embed_tokens.weight", (8, 4), 2)]
    shard2 = [f32_tensor("model.layers.1.self_attn.q_proj.weight", (4, 4), 3)]
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for shard_name, shard in zip(names, (shard1, shard2)):
        write(out, "sharded/" + shard_name, safetensors_bytes([raw for raw, _ in shard]))
        weight_map.update({raw[0]: shard_name for raw, _ in shard})
    write(out, "sharded/model.safetensors.index.json",
          json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    write(out, "sharded/config.json", json.dumps({"model_type": "llama", "num_attention_heads": 2}))
    cases.append({"path": "sharded", "config": {"model_type": "llama", "num_attention_heads": 2},
                  "tensors": [e for _, e in shard1 + shard2]})

    single = [f32_tensor("h.0.attn.c_attn.weight", (4, 12), 4)]
    write(out, "single/model.safetensors", safetensors_bytes([raw for raw, _ in single]))
    write(out, "single/config.json", json.dumps({"model_type": "gpt2"}))
    cases.append({"path": "single", "config": {"model_type": "gpt2"},
                  "tensors": [e for _, e in single]})
    cases.append({"path": "single/model.safetensors", "config": {"model_type": "gpt2"},
                  "tensors": [e for _, e in single]})

    # Exhaustive decoding tables (NaN included), as float32 NPY files.
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    write(out, "tables/bf16.npy", npy_bytes(bf16_values(all16)))
    write(out, "tables/f16.npy", npy_bytes(f16_values(all16)))
    write(out, "tables/e4m3.npy", npy_bytes(np.array([e4m3(b) for b in range(256)], np.float32)))
    write(out, "tables/e5m2.npy", npy_bytes(np.array([e5m2(b) for b in range(256)], np.float32)))

    write(out, "valid.json", json.dumps({"cases": cases, "errors": errors}, indent=1))


# ----------------------------------------------------------------------------- malformed corpus

def tensor_header(name="a", dtype="F32", shape=(2,), offsets=(0, 8), **extra):
    entry = {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}
    entry.update(extra)
    return {name: entry}


def st_json(header_obj, data=b"\0" * 8):
    return raw_safetensors(json.dumps(header_obj).encode(), data)


def st_text(header_text, data=b"\0" * 8):
    return raw_safetensors(header_text if isinstance(header_text, bytes) else header_text.encode(),
                           data)


def local_data_offset(archive, member_index=0):
    """Where the first member's data starts (after its local header)."""
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        info = z.infolist()[member_index]
    offset = info.header_offset
    name_length, extra_length = struct.unpack("<HH", archive[offset + 26:offset + 30])
    return offset + 30 + name_length + extra_length, info


def central_offset(archive):
    return archive.rfind(b"PK\x01\x02")


def malformed_safetensors():
    two = {"dtype": "F32", "shape": [2]}
    return {
        "st_empty.safetensors": (b"", "file is 0 bytes"),
        "st_4bytes.safetensors": (b"\x01\x02\x03\x04", "file is 4 bytes"),
        "st_huge_header.safetensors": (struct.pack("<Q", 1 << 40) + b"{}", "exceeds the limit"),
        "st_header_past_end.safetensors": (struct.pack("<Q", 1000) + b"{}" + b" " * 18,
                                           "runs past the end of the file"),
        "st_not_json.safetensors": (st_text("{not json}"), "header is not valid JSON"),
        "st_json_array.safetensors": (st_text("[1, 2]"), "header is not a JSON object (found array)"),
        "st_duplicate.safetensors": (st_text(
            '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            '"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}'),
            "a: appears more than once in the header"),
        "st_duplicate_nested.safetensors": (st_text(
            '{"a": {"dtype": "F32", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'),
            'duplicate key "dtype" in the header'),
        "st_negative_offset.safetensors": (st_json(tensor_header(offsets=(-8, 0))),
                                           '"data_offsets" is not two unsigned integers'),
        "st_fractional_offset.safetensors": (st_json(tensor_header(offsets=(0, 8.0))),
                                             '"data_offsets" is not two unsigned integers'),
        "st_string_offset.safetensors": (st_json(tensor_header(offsets=("0", "8"))),
                                         '"data_offsets" is not two unsigned integers'),
        "st_three_offsets.safetensors": (st_json(tensor_header(offsets=(0, 4, 8))),
                                         '"data_offsets" is not two unsigned integers'),
        "st_begin_after_end.safetensors": (st_json(tensor_header(offsets=(8, 0))),
                                           "have begin > end"),
        "st_overlap.safetensors": (st_json({"a": dict(two, data_offsets=[0, 8]),
                                            "b": dict(two, data_offsets=[4, 12])}, b"\0" * 12),
                                   'overlap tensor "a"'),
        "st_gap.safetensors": (st_json({"a": dict(two, data_offsets=[0, 8]),
                                        "b": dict(two, data_offsets=[12, 20])}, b"\0" * 20),
                               "leave a gap after byte 8"),
        "st_shape_overflow.safetensors": (st_json(tensor_header(shape=(1 << 62, 1 << 62))),
                                          "overflows 64-bit sizes"),
        "st_shape_negative.safetensors": (st_json(tensor_header(shape=(-2,))),
                                          '"shape" is not a list of non-negative integers'),
        "st_shape_fractional.safetensors": (st_json(tensor_header(shape=(2.0,))),
                                            '"shape" is not a list of non-negative integers'),
        "st_size_mismatch.safetensors": (st_json(tensor_header(shape=(3,))),
                                         "needs 12 bytes but data_offsets [0, 8] hold 8"),
        "st_unknown_dtype.safetensors": (st_json(tensor_header(dtype="F7")), 'unknown dtype "F7"'),
        "st_dtype_not_string.safetensors": (st_json(tensor_header(dtype=4)),
                                            '"dtype" is not a string'),
        "st_missing_dtype.safetensors": (st_json({"a": {"shape": [2], "data_offsets": [0, 8]}}),
                                         'missing "dtype"'),
        "st_entry_not_object.safetensors": (st_json({"a": 5}), "entry is not an object"),
        "st_truncated.safetensors": (st_json(tensor_header(shape=(4,), offsets=(0, 16))),
                                     "run past the end of the 8-byte data buffer"),
        "st_unused_buffer.safetensors": (st_json(tensor_header(), b"\0" * 16),
                                         "8 bytes unaccounted for"),
        "st_invalid_utf8.safetensors": (st_text(b'{"a\xff": {"dtype": "F32", "shape": [2], '
                                                b'"data_offsets": [0, 8]}}'),
                                        "header is not valid UTF-8 (byte 3 of the header)"),
        "st_overlong_utf8.safetensors": (st_text(b'{"\xc0\xaf": 1}'), "header is not valid UTF-8"),
        "st_metadata_not_strings.safetensors": (st_json(dict(tensor_header(),
                                                             __metadata__={"step": 1})),
                                                '"__metadata__" is not an object of string values'),
    }


def malformed_npy():
    good = npy_bytes(np.arange(6, dtype=np.float32))
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
    data = b"\0" * 8
    return {
        "npy_empty.npy": (b"", "file is 0 bytes"),
        "npy_bad_magic.npy": (b"\x93NUMPX" + good[6:], "not an NPY file"),
        "npy_bad_version.npy": (good[:6] + b"\x04\x00" + good[8:], "unsupported NPY version 4.0"),
        "npy_header_past_end.npy": (good[:8] + struct.pack("<H", 5000) + good[10:],
                                    "NPY header length 5000 runs past the end of the file"),
        "npy_bad_dict.npy": (npy_with_header(header[:-3] + ", 'extra': 1}", data),
                             "unexpected key 'extra'"),
        "npy_eval.npy": (npy_with_header("{'descr': __import__('os'), 'fortran_order': False, "
                                         "'shape': (2,)}", data), "expected a quoted string"),
        "npy_missing_shape.npy": (npy_with_header("{'descr': '<f4', 'fortran_order': False}", data),
                                  "missing key 'shape'"),
        "npy_not_tuple.npy": (npy_with_header(header.replace("(2,)", "(2)"), data),
                              "trailing comma"),
        "npy_unknown_descr.npy": (npy_bytes(np.zeros(2, dtype=np.complex128)),
                                  "unsupported descr '<c16'"),
        "npy_big_endian.npy": (npy_bytes(np.zeros(2, dtype=">f4")), "big-endian descr '>f4'"),
        "npy_void_without_flag.npy": (npy_bytes(np.zeros(2, dtype="<u2").view("V2")),
                                      "--npy-dtype bf16"),
        "npy_shape_overflow.npy": (npy_with_header(header.replace("(2,)", "(1099511627776, "
                                                                  "1099511627776)"), data),
                                   "shape overflows 64-bit sizes"),
        "npy_truncated.npy": (good[:-4], "data is truncated"),
        "npy_trailing.npy": (good + b"\0\0\0\0", "4 unexpected bytes after the data"),
    }


def malformed_npz():
    arrays = {"w": np.arange(64, dtype=np.float32)}
    stored = npz_bytes(arrays, compressed=False)
    compressed = npz_bytes(arrays, compressed=True)

    start, info = local_data_offset(stored)
    bad_crc = bytearray(stored)
    bad_crc[start + info.file_size - 1] ^= 0xFF  # last data byte of w.npy

    start, info = local_data_offset(compressed)
    corrupt = bytearray(compressed)
    corrupt[start] = 0xFF  # BTYPE 11: an invalid deflate block type

    # A small deflated member whose central directory claims 4 GB uncompressed.
    bomb = bytearray(zip_bytes({"w.npy": npy_bytes(np.zeros(1000, np.float32))},
                               zipfile.ZIP_DEFLATED))
    central = central_offset(bomb)
    bomb[central + 24:central + 28] = struct.pack("<I", 0xFFFFFF00)

    bad_member = zip_bytes({"x.npy": b"not an npy file at all"})
    return {
        "npz_truncated.npz": (stored[:len(stored) // 2], "no end-of-central-directory record"),
        "npz_tiny.npz": (b"PK\x05\x06", "too small for a zip archive"),
        "npz_bad_crc.npz": (bytes(bad_crc), "CRC-32 mismatch"),
        "npz_corrupt_deflate.npz": (bytes(corrupt), "deflate data is corrupt"),
        "npz_bomb.npz": (bytes(bomb), "more than deflate's 1032:1 maximum"),
        "npz_not_npy_member.npz": (zip_bytes({"readme.txt": b"hello"}),
                                   "readme.txt: member is not an .npy array"),
        "npz_bad_member.npz": (bad_member, "x: not an NPY file"),
        "npz_bzip2.npz": (zip_bytes({"w.npy": npy_bytes(np.zeros(4, np.float32))},
                                    zipfile.ZIP_BZIP2), "compression method 12 is not supported"),
    }


def malformed_folders(out):
    """Folder-level problems; returns {relative path: expected fragment}."""
    tensor = ("a", "F32", (2,), b"\0" * 8)
    write(out, "missing_shard/model-00001-of-00002.safetensors", safetensors_bytes([tensor]))
    write(out, "missing_shard/model.safetensors.index.json", json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))

    write(out, "shard_lacks_tensor/model-00001-of-00001.safetensors", safetensors_bytes([tensor]))
    write(out, "shard_lacks_tensor/model.safetensors.index.json", json.dumps({"weight_map": {
        "a": "model-00001-of-00001.safetensors", "c": "model-00001-of-00001.safetensors"}}))

    write(out, "index_without_map/model.safetensors.index.json", json.dumps({"metadata": {}}))
    write(out, "index_not_json/model.safetensors.index.json", "{weight_map")

    for folder, config in (("config_not_json", "{bad"), ("config_array", "[1]"),
                           ("config_duplicate_key", '{"num_attention_heads": 8, '
                                                    '"num_attention_heads": 4}')):
        write(out, folder + "/model.safetensors", safetensors_bytes([tensor]))
        write(out, folder + "/config.json", config)

    write(out, "duplicate_across_files/a.safetensors", safetensors_bytes([tensor]))
    write(out, "duplicate_across_files/b.safetensors", safetensors_bytes([tensor]))
    os.makedirs(os.path.join(out, "empty_folder"), exist_ok=True)
    write(out, "unsupported.txt", "hello")
    return {
        "missing_shard": "shard model-00002-of-00002.safetensors (for tensor b) does not exist",
        "shard_lacks_tensor": "c: tensor is mapped to this shard by",
        "index_without_map": 'no "weight_map" object',
        "index_not_json": "file is not valid JSON",
        "config_not_json": "config.json: file is not valid JSON",
        "config_array": "config.json: expected a JSON object, found array",
        "config_duplicate_key": "num_attention_heads: appears more than once in the file",
        "duplicate_across_files": "a: tensor name also appears in",
        "empty_folder": "no checkpoint files in this folder",
        "unsupported.txt": "unsupported file type",
    }


def write_malformed(out):
    entries = []
    for corpus in (malformed_safetensors(), malformed_npy(), malformed_npz()):
        for path, (data, fragment) in corpus.items():
            write(out, path, data)
            entries.append({"path": path, "expect": fragment})
    for path, fragment in malformed_folders(out).items():
        entries.append({"path": path, "expect": fragment})
    write(out, "malformed.json", json.dumps({"cases": entries}, indent=1))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("valid", "malformed"):
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    (write_valid if sys.argv[1] == "valid" else write_malformed)(sys.argv[2])


if __name__ == "__main__":
    main()
