"""The arguments of kvrank's functions, checked and converted to what the library takes — and
its messages, which name the command line's options, put in Python's words (`heads=`, not
`--heads`). Every problem is a kvrank.Error with one line: never pybind's multi-line TypeError."""
import contextlib
import math
import os
import re

from . import _kvrank
from ._kvrank import Error

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
UINT64_MAX = 2**64 - 1

# The command line's options that differ from their keyword in Python: --step and --label are
# given per input to analyze() (steps=, labels=) and once to analyze_state_dict() (step=, label=).
_KEYWORDS = {"panel-title": "panel_titles", "over-steps": "over_steps", "baseline": "baseline"}
# Options that take no value: --similarity is similarity=True.
_FLAGS = {"similarity", "with-baseline", "activations", "fold-input-norm", "share-y",
          "keep-going"}
# Options whose value is a name ("--family gemma3", "--repr k,v"); other values are numbers or
# placeholders ("--heads N", "--map FILE", "--threads 0").
_NAMED = {"family", "repr", "npy-dtype", "attention", "legend", "size", "over-steps", "metric",
          "gauge"}
_NOT_VALUES = {"and", "or", "is", "needs", "must", "lists", "chose", "draws", "gives", "wins"}
_GIVEN = re.compile(r"--([a-z][a-z0-9-]*) given ([0-9]+) times for")
_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:( )(\"[^\"]*\"|[A-Za-z0-9_.,/-]*[A-Za-z0-9_]))?")


# The command line's words for what Python calls otherwise.
_PHRASES = {"nor a flag gives": "nor a keyword gives", "--no-refit": "refit=False"}
# In memory there is no config.json: there is the config= argument.
_IN_MEMORY_PHRASES = {"config.json": "the config"}


def python_words(message, keywords=None, in_memory=False):
    """`message` with the command line's options as the keywords of the Python call:
    "pass --heads" → "pass heads=", "--threads 99: at most 8" → "threads=99: at most 8",
    "--family gemma3" → 'family="gemma3"', "--similarity" → "similarity=True"; `keywords` maps
    options whose keyword differs here ({"step": "steps"})."""
    names = dict(_KEYWORDS, **(keywords or {}))
    for said, meant in {**_PHRASES, **(_IN_MEMORY_PHRASES if in_memory else {})}.items():
        message = message.replace(said, meant)
    message = _GIVEN.sub(lambda m: f"{names.get(m.group(1), m.group(1))}: {m.group(2)} given for",
                         message)

    def keyword(match):
        option, space, value = match.group(1), match.group(2) or "", match.group(3) or ""
        name = names.get(option, option.replace("-", "_"))
        if option in _FLAGS:
            return f"{name}=True{space}{value}"
        if re.fullmatch(r"[A-Z][A-Z/,.]*|-?[0-9][0-9.,/]*|\"[^\"]*\"", value):
            return f"{name}={value}"
        if option in _NAMED and value and value not in _NOT_VALUES:
            return f'{name}="{value}"'
        if not value and message[match.end():match.end() + 1] == ":":
            return name  # "--step: expected …" names the option: "steps: expected …"
        return f"{name}={space}{value}"

    return _OPTION.sub(keyword, message)


@contextlib.contextmanager
def in_python_words(keywords=None, in_memory=False):
    """Re-raises the library's kvrank.Error in Python's words (python_words)."""
    try:
        yield
    except Error as error:
        raise Error(python_words(str(error), keywords, in_memory)) from None


def one_line(text):
    return " ".join(str(text).split())


def whole(name, value, low=0, high=INT64_MAX):
    """A whole number from low to high (Python's int; bool is not one), for what only Python
    checks (Tracker's every=, a layer index written into the --layers text)."""
    value = integer(name, value, -math.inf, math.inf)
    if not low <= value <= high:
        raise Error(f"{name}: expected a whole number from {low} to {high}, found {value}")
    return value


def integer(name, value, low=INT32_MIN, high=INT32_MAX):
    """A whole number as the library's option takes it: Python's int (bool is not one) within the
    C++ type's range (int, or int64 with INT64_MIN/INT64_MAX), worded as the command line's
    parser words it. The range the option allows is the request's to check (its validate())."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Error(f"{name}: expected a whole number, found {_shown(value)}")
    if value < low:
        raise Error(f"{name}: {value} is out of range (at least {low})")
    if value > high:
        raise Error(f"{name}: {value} is out of range (at most {high})")
    return value


def optional_integer(name, value, low=INT32_MIN, high=INT32_MAX):
    return None if value is None else integer(name, value, low, high)


def number(name, value):
    """A real number (int or float; bool and text are not). NaN and the infinities are floats:
    the option's own rule (the request's validate(), or the plot library's) refuses them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Error(f"{name}: expected a number, found {_shown(value)}")
    return float(value)


def optional_number(name, value):
    return None if value is None else number(name, value)


def text(name, value):
    if not isinstance(value, str):
        raise Error(f"{name}: expected text, found {_shown(value)}")
    return value


def optional_flag(name, value):
    """None (the option's default), True or False; 0, 1 and text are not flags."""
    if value is not None and not isinstance(value, bool):
        raise Error(f"{name}: expected True, False or None, found {_shown(value)}")
    return value


def optional_text(name, value):
    return None if value is None else text(name, value)


def path(name, value):
    try:
        return os.fspath(value)
    except TypeError:
        raise Error(f"{name}: expected a path, found {_shown(value)}") from None


def callback(name, value, signature):
    if value is not None and not callable(value):
        raise Error(f"{name}: expected a function {signature}, found {_shown(value)}")
    return value


def threads(value):
    """threads=: None (the request's default, as the command line's: 0), 0 (OMP_NUM_THREADS or
    every processor) or a count, which the request checks against this machine; beyond an int it
    is refused as the command line's --threads refuses it."""
    return optional_integer("threads", value)


def step(value, name="step"):
    """A training step, as --step takes it (an int64; the request refuses one below 0)."""
    return integer(name, value, INT64_MIN, INT64_MAX)


def names(name, value):
    """"qk,ov", ["qk", "ov"] or None → ["qk", "ov"] / []."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.split(",") if part]
    return [text(name, part) for part in sequence(name, value)]


def comma_list(name, value):
    """"qk,ov", ["qk", "ov"] or None → "qk,ov" / "": a comma list as the command line takes it
    (--repr, --metric), which the library splits and parses."""
    if value is None or isinstance(value, str):
        return value or ""
    return ",".join(text(name, part) for part in sequence(name, value))


def layers(value):
    """None, "0-11,20", or an iterable of layer indices → the --layers text."""
    if value is None or isinstance(value, str):
        return value
    return ",".join(str(whole("layers", layer, 0, INT32_MAX))
                    for layer in sequence("layers", value))


def paths(value):
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [path("paths", item) for item in sequence("paths", value)]


def layout(family=None, heads=None, kv_heads=None, head_dim=None, map=None, npy_dtype=None,
           activations=False, fold_input_norm=False):
    """The --family … --activations options, converted (the request checks them)."""
    result = _kvrank.Layout()
    result.family = optional_text("family", family)
    result.heads = optional_integer("heads", heads)
    result.kv_heads = optional_integer("kv_heads", kv_heads)
    result.head_dim = optional_integer("head_dim", head_dim)
    if npy_dtype not in (None, "bf16"):
        raise Error(f"npy_dtype: expected \"bf16\", found {_shown(npy_dtype)}")
    result.map_file = None if map is None else path("map", map)
    result.npy_bf16 = npy_dtype == "bf16"
    result.activations = bool(activations)
    result.fold_input_norm = bool(fold_input_norm)
    return result


def selection(repr, layer_list, layer_shard=None, attention=None):
    """The --repr, --layers, --layer-shard and --attention options (None: the request's
    default)."""
    result = _kvrank.Selection()
    result.reprs, result.layers = comma_list("repr", repr), layers(layer_list)
    result.layer_shard = optional_text("layer_shard", layer_shard)
    result.attention = optional_text("attention", attention)
    return result


def sequence(name, value):
    try:
        return list(value)
    except TypeError:
        raise Error(f"{name}: expected a list, found {_shown(value)}") from None


def _shown(value):
    """A value as messages show it: short, on one line."""
    shown = one_line(repr(value))
    return shown if len(shown) <= 60 else shown[:57] + "..."
