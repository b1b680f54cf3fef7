"""What fairseq's published-era checkpoints hold besides tensors, loaded as inert data.

fairseq wrote more than tensors and its configuration into the checkpoints it published:

  * 0.6 - 0.9 (2019: the released RoBERTa, BART and XLM-R files) and master until February 2020:
    ``extra_state['train_meters']``, an OrderedDict of ``fairseq.meters.AverageMeter``,
    ``TimeMeter`` and ``StopwatchMeter`` objects (``trainer.save_checkpoint``); fairseq 0.10 -
    0.12 moved the classes to ``fairseq.logging.meters`` and still aliases ``fairseq.meters``;
  * 0.10 - 0.12: ``extra_state['metrics']`` (plain lists), ``val_loss``/``best`` and meter
    values that can be numpy scalars or arrays (``numpy.core.multiarray.scalar`` / ``_reconstruct``,
    ``numpy._core`` under numpy 2: fairseq issue 5603).

Unpickling those classes the ordinary way runs their code (a file can name any class). Here each
is replaced, under its pickled name, by a stand-in of this module (torch's ``add_safe_globals``
takes ``(stand_in, "module.Name")`` pairs):

  * ``InertObject`` subclasses for the meters: they hold the pickled attributes and have no
    other behaviour (nothing of fairseq runs; fairseq 0.12 ignores ``train_meters`` on resume);
  * numpy values are rebuilt by this module from their bytes, for numeric dtypes only (bool,
    int, uint, float, complex; no object, structured or string dtype): ``NumpyDtype`` and
    ``NumpyArray`` hold them during the load, ``realise`` swaps them for real numpy values.

A ``defaultdict`` with items is still refused: torch's loader fills only dict, OrderedDict and
Counter (an empty one, as omegaconf pickles, loads).
"""
import argparse
import math
import pickle
import re
from typing import List, Tuple

import numpy as np

# fairseq's meter classes, by the module that held them: 0.6-0.9, and 0.10-0.12
METER_MODULES = {"fairseq.meters": ("AverageMeter", "TimeMeter", "StopwatchMeter"),
                 "fairseq.logging.meters": ("AverageMeter", "SumMeter", "TimeMeter", "StopwatchMeter")}
NUMPY_CORE = ("numpy.core.multiarray", "numpy._core.multiarray")  # numpy 1, numpy 2
_NUMERIC_CODE = re.compile(r"[biufc]\d{1,2}")  # 'f8', 'i4', 'b1', 'c16': what numpy pickles for numbers


class StandInError(pickle.UnpicklingError):
    """A value under an allowed name that is not laid out as the original writes it (torch's
    weights-only loader reports it as a refused load)."""


# Every entry point below takes ``*args`` and raises only StandInError: a file decides what the
# unpickler passes, and anything but an UnpicklingError would escape the loader as a traceback.


class InertObject:
    """A pickled object of an allowed class: its attributes, and none of the class's code."""

    original = ""  # the pickled name it stands for

    def __init__(self, *args, **kwargs):  # reached only by a REDUCE, which fairseq never wrote for these
        if args or kwargs:
            raise StandInError(f"{self.original}: built with arguments, not as pickle stores an object")

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2:  # (__dict__, slots), as pickle's BUILD allows
            state = {**(state[0] or {}), **(state[1] or {})}
        if not isinstance(state, dict) or not all(isinstance(k, str) and not k.startswith("__") for k in state):
            raise StandInError(f"{self.original}: state is not a dict of attributes")
        self.__dict__.update(state)

    def __repr__(self):
        return f"<inert {self.original} {self.__dict__}>"


# One stand-in per meter class; module-level, so a loaded state can be pickled again (fairseq's
# DDP broadcast of a restored checkpoint) and loads back under these names (``stand_ins``).
class AverageMeter(InertObject):
    original = "AverageMeter"


class SumMeter(InertObject):
    original = "SumMeter"


class TimeMeter(InertObject):
    original = "TimeMeter"


class StopwatchMeter(InertObject):
    original = "StopwatchMeter"


METERS = {cls.original: cls for cls in (AverageMeter, SumMeter, TimeMeter, StopwatchMeter)}


class NumpyDtype:
    """A numeric numpy dtype as pickled: ``numpy.dtype(code, align, copy)`` then its state."""

    code, order = None, "="

    def __init__(self, *args):  # (code, align, copy)
        code = args[0] if args else None
        try:
            numeric = isinstance(code, str) and _NUMERIC_CODE.fullmatch(code) and np.dtype(code).kind in "biufc"
        except TypeError:  # a code numpy does not know ('f3')
            numeric = False
        if not numeric:
            raise StandInError(f"numpy.dtype({code!r}): only numeric dtypes (bool, int, float, complex) are data")
        self.code = code

    def __setstate__(self, state):
        # (version, byte order, subarray, names, fields, elsize, alignment, flags [, metadata])
        if not isinstance(state, tuple) or len(state) < 8 or state[1] not in ("<", ">", "|", "=") or any(
                part is not None for part in state[2:5]):
            raise StandInError(f"numpy.dtype({self.code!r}): not the state of a plain numeric dtype")
        self.order = state[1]

    def numpy(self) -> np.dtype:
        if self.code is None:
            raise StandInError("numpy.dtype made without its type code")
        dtype = np.dtype(self.code)
        return dtype.newbyteorder(self.order) if self.order in "<>" else dtype


def numpy_scalar(*args):
    """``numpy.core.multiarray.scalar(dtype, bytes)``: a numpy number from its bytes."""
    dtype, data = args if len(args) == 2 else (None, None)
    if not isinstance(dtype, NumpyDtype) or not isinstance(data, bytes) or len(data) != dtype.numpy().itemsize:
        raise StandInError("numpy scalar: not a numeric dtype with its bytes")
    return np.frombuffer(data, dtype=dtype.numpy())[0]


class NumpyArray:
    """A numeric ndarray as pickled: ``_reconstruct(ndarray, (0,), b'b')`` then its state."""

    array = None  # until its state is set

    def __setstate__(self, state):
        # (version, shape, dtype, is_fortran, raw bytes)
        if not isinstance(state, tuple) or len(state) != 5:
            raise StandInError("numpy array: not the state numpy pickles")
        _, shape, dtype, fortran, raw = state
        if not isinstance(dtype, NumpyDtype) or not isinstance(raw, bytes) or not isinstance(shape, tuple) or \
                not all(isinstance(n, int) and n >= 0 for n in shape):
            raise StandInError("numpy array: not a numeric array with its bytes")
        dtype = dtype.numpy()
        if len(raw) != math.prod(shape) * dtype.itemsize:  # exact: no overflow lets a huge shape pass
            raise StandInError(f"numpy array: {len(raw)} bytes for shape {shape} of {dtype}")
        array = np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran else "C")
        self.array = array.astype(dtype.newbyteorder("="))  # a copy in native order, as numpy's own unpickling


def numpy_reconstruct(*args):
    """``numpy.core.multiarray._reconstruct(ndarray, shape, code)``: an empty array that BUILD then fills."""
    if len(args) != 3 or args[0] is not NumpyArray:
        raise StandInError("numpy _reconstruct of something other than numpy.ndarray")
    return NumpyArray()


def stand_ins() -> List[Tuple[object, str]]:
    """(stand-in, pickled name) pairs for torch's ``safe_globals``."""
    pairs = [(METERS[name], f"{module}.{name}") for module, names in METER_MODULES.items() for name in names]
    pairs += list(METERS.values())  # their own names, once pickled again
    pairs += [(NumpyDtype, "numpy.dtype"), (NumpyArray, "numpy.ndarray")]
    for module in NUMPY_CORE:
        pairs += [(numpy_scalar, f"{module}.scalar"), (numpy_reconstruct, f"{module}._reconstruct")]
    return pairs


def realise(value, _seen=None):
    """``value`` with every numpy stand-in replaced by the real numpy value, in place where the
    container is mutable (dict, list, Namespace, stand-in attributes), rebuilt for tuples."""
    seen = {} if _seen is None else _seen
    if isinstance(value, NumpyArray):
        if value.array is None:
            raise StandInError("numpy array without its data")
        return value.array
    if isinstance(value, NumpyDtype):
        return value.numpy()
    if id(value) in seen:
        return seen[id(value)]
    if isinstance(value, dict):
        seen[id(value)] = value
        for key, item in value.items():
            value[key] = realise(item, seen)
    elif isinstance(value, list):
        seen[id(value)] = value
        value[:] = [realise(item, seen) for item in value]
    elif isinstance(value, (argparse.Namespace, InertObject)):
        seen[id(value)] = value
        realise(value.__dict__, seen)
    elif type(value) is tuple:
        seen[id(value)] = value
        value = seen[id(value)] = tuple(realise(item, seen) for item in value)
    return value
