"""State-dict tensors as the library reads them: (name, dtype name, shape, data, copy) per entry.

What kvrank never reads is never touched: the library is told every tensor's name, dtype and
shape (metadata only), and asks for the data of the attention tensors it analyses, one layer at
a time. `data` is a numpy array viewing the caller's memory where it can be read as it lies (a
C-ordered CPU tensor or array: no copy, and no float32 conversion here); otherwise `copy` is a
function the library calls when it reads the tensor — it makes a C-ordered CPU copy (of a GPU
tensor, a non-contiguous view, a big-endian array), which the library drops after the layer — or
raises the kvrank.Error that says why the tensor cannot be read (sparse, an unsupported dtype).
A value that is no array at all is refused at once — except a module's `._extra_state`, which
torch's state_dict() may hold as any object: it is left out."""
import sys

import numpy

from ._kvrank import Error

IN_MEMORY = "<in memory>"  # the "file" of in-memory tensors in error messages, as in the library

# numpy (kind, itemsize) → the safetensors dtype name the library parses.
_NUMPY_DTYPES = {
    ("f", 8): "F64", ("f", 4): "F32", ("f", 2): "F16",
    ("b", 1): "BOOL",
    ("u", 1): "U8", ("u", 2): "U16", ("u", 4): "U32", ("u", 8): "U64",
    ("i", 1): "I8", ("i", 2): "I16", ("i", 4): "I32", ("i", 8): "I64",
}
# torch dtypes → safetensors names; bfloat16 and the float8 types, which numpy lacks, travel as
# their bit patterns (an integer view of the same bytes).
_TORCH_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "bool": "BOOL",
    "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16", "int32": "I32",
    "uint32": "U32", "int64": "I64", "uint64": "U64",
}
_BIT_PATTERNS = {"BF16": "int16", "F8_E4M3": "uint8", "F8_E5M2": "uint8"}
_EXPECTED = "expected float32, float16, bfloat16, float64 or float8"
# A placeholder dtype for entries the library cannot read: it sees their name and shape, and
# their `copy` raises the reason if it ever reads one.
_UNREADABLE = "F32"


def _refusal(name, reason):
    def refuse():
        raise Error(f"{IN_MEMORY}: {name}: {reason}")
    return refuse


def _numpy_dtype_name(array):
    dtype = array.dtype
    if dtype.name == "bfloat16":  # ml_dtypes' numpy bfloat16
        return "BF16"
    return _NUMPY_DTYPES.get((dtype.kind, dtype.itemsize))


def _numpy_entry(name, array):
    shape = [int(extent) for extent in array.shape]
    dtype_name = _numpy_dtype_name(array)
    if dtype_name is None:
        return name, _UNREADABLE, shape, None, _refusal(
            name, f"unsupported dtype {array.dtype} ({_EXPECTED})")
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        little = array.dtype.newbyteorder("<")
        return name, dtype_name, shape, None, lambda: numpy.ascontiguousarray(array, dtype=little)
    if not array.flags["C_CONTIGUOUS"]:
        return name, dtype_name, shape, None, lambda: numpy.ascontiguousarray(array)
    return name, dtype_name, shape, array, None


def _torch_numpy(tensor, dtype_name):
    """A numpy array of a CPU, C-ordered tensor's own memory (bit patterns where numpy lacks the
    dtype)."""
    import torch

    tensor = tensor.detach()
    if dtype_name in _BIT_PATTERNS:
        tensor = tensor.view(getattr(torch, _BIT_PATTERNS[dtype_name]))
    return tensor.numpy()


def _torch_copy(tensor, dtype_name):
    """The tensor copied to a C-ordered CPU tensor (from a GPU, or from a strided view)."""
    def copy():
        return _torch_numpy(tensor.detach().to("cpu").contiguous().resolve_conj().resolve_neg(),
                            dtype_name)
    return copy


def _torch_entry(name, tensor):
    import torch

    shape = [int(extent) for extent in tensor.shape]
    dtype_name = _TORCH_DTYPES.get(str(tensor.dtype).replace("torch.", ""))
    if dtype_name is None:
        return name, _UNREADABLE, shape, None, _refusal(
            name, f"unsupported dtype {tensor.dtype} ({_EXPECTED})")
    if tensor.layout != torch.strided:
        return name, dtype_name, shape, None, _refusal(
            name, f"a sparse tensor ({tensor.layout}) is not read (pass tensor.to_dense())")
    if tensor.device.type == "cpu" and tensor.is_contiguous() and not tensor.is_conj() \
            and not tensor.is_neg():
        return name, dtype_name, shape, _torch_numpy(tensor, dtype_name), None
    return name, dtype_name, shape, None, _torch_copy(tensor, dtype_name)


def _is_torch_tensor(value):
    torch = sys.modules.get("torch")  # never imported here: a torch tensor means torch is loaded
    return torch is not None and isinstance(value, torch.Tensor)


def state_dict_of(value):
    """The mapping to read: a state dict itself, or an nn.Module's state_dict()."""
    if hasattr(value, "items"):
        return value
    if callable(getattr(value, "state_dict", None)):
        return value.state_dict()
    raise Error(f"state_dict: expected a mapping of names to tensors or a torch.nn.Module, found "
                f"{type(value).__name__}")


def memory_tensors(state_dict):
    """The library's view of `state_dict`: (name, dtype name, shape, data, copy) per entry."""
    entries = []
    for name, value in state_dict.items():
        name = str(name)
        if _is_torch_tensor(value):
            entries.append(_torch_entry(name, value))
        elif isinstance(value, numpy.ndarray):
            entries.append(_numpy_entry(name, value))
        elif not name.endswith("._extra_state"):  # a module's extra state is no tensor
            raise Error(f"{IN_MEMORY}: {name}: expected a numpy array or a torch tensor, found "
                        f"{type(value).__name__}")
    return entries
