"""State-dict tensors as the library reads them: (name, dtype name, shape, buffer) with the
buffer a numpy array that views the caller's memory — no copy, and no float32 conversion here
(the library converts one layer at a time while it analyses it)."""
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


def _numpy_dtype_name(name, array):
    dtype = array.dtype
    if dtype.name == "bfloat16":  # ml_dtypes' numpy bfloat16
        return "BF16"
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and sys.byteorder == "big"):
        raise Error(f"{IN_MEMORY}: {name}: big-endian arrays are not read "
                    f"(pass array.astype(array.dtype.newbyteorder('<')))")
    dtype_name = _NUMPY_DTYPES.get((dtype.kind, dtype.itemsize))
    if dtype_name is None:
        raise Error(f"{IN_MEMORY}: {name}: unsupported dtype {dtype} (expected float32, float16, "
                    f"bfloat16 or float64)")
    return dtype_name


def _torch_array(name, tensor):
    """A numpy array that shares the tensor's memory, and its dtype name; bfloat16 (which numpy
    lacks) as its 16-bit patterns."""
    import torch

    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        raise Error(f"{IN_MEMORY}: {name}: the tensor is on {tensor.device}; kvrank reads CPU "
                    f"tensors (pass the state dict's tensors through .cpu())")
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy(), "BF16"
    array = tensor.numpy()
    return array, _numpy_dtype_name(name, array)


def _is_torch_tensor(value):
    torch = sys.modules.get("torch")  # never imported here: a torch tensor means torch is loaded
    return torch is not None and isinstance(value, torch.Tensor)


def memory_tensors(state_dict):
    """The library's view of `state_dict`: (name, dtype name, shape, numpy array) per tensor."""
    if not hasattr(state_dict, "items"):
        raise Error(f"state_dict: expected a mapping of names to arrays, found "
                    f"{type(state_dict).__name__}")
    tensors = []
    for name, value in state_dict.items():
        name = str(name)
        if _is_torch_tensor(value):
            array, dtype_name = _torch_array(name, value)
        elif isinstance(value, numpy.ndarray):
            array, dtype_name = value, _numpy_dtype_name(name, value)
        else:
            raise Error(f"{IN_MEMORY}: {name}: expected a numpy array or a torch tensor, found "
                        f"{type(value).__name__}")
        tensors.append((name, dtype_name, [int(extent) for extent in array.shape], array))
    return tensors
