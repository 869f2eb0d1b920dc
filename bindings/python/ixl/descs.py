"""Descriptor lists and the buffers they describe.

A transfer descriptor list (XferDList) owns a C `struct ixl_dlist`, built once from what the
caller gives: (addr, len, dev) tuples, (addr, len, stride, count, dev) strided runs, buffers
(bytearray, memoryview, mmap, numpy arrays, torch tensors, CuPy arrays and other objects with
__cuda_array_interface__), or a numpy array of N x 3 descriptors or N x 5 runs, which crosses
into C as one block (no Python object per row).
A registration descriptor list (RegDList) holds `struct ixl_reg_desc` entries, with the bytes
each may carry (a FILE label, or "MODE:PATH" in path mode).
"""
import ctypes
import re

from . import _lib
from ._lib import DEV_NONE, Desc, RegDesc, Run, check, lib

try:
    import numpy as np
except ImportError:  # numpy is optional; numpy inputs then cannot occur
    np = None

_MEM_ALIASES = {"CPU": "DRAM", "CUDA": "VRAM", "GPU": "VRAM", "BLOCK": "BLK"}


def mem_type(value):
    """The enum ixl_mem value of "DRAM", "VRAM", "BLK", "FILE", "OBJ" (or "cpu", "cuda")."""
    value = getattr(value, "value", value)  # an enum member (nixl_mem_t's, say)
    if isinstance(value, int):
        if 0 <= value < len(_lib.MEM_NAMES):
            return value
    elif isinstance(value, str):
        name = _MEM_ALIASES.get(value.upper(), value.upper())
        if name in _lib.MEM_NAMES:
            return _lib.MEM_NAMES.index(name)
    raise check_error(-104, f"unknown memory type {value!r}; one of {', '.join(_lib.MEM_NAMES)}")


def check_error(status, detail):
    from .errors import from_status
    return from_status(status, _lib.status_name(status), detail)


def mem_name(value):
    return _lib.MEM_NAMES[value]


# ---------------------------------------------------------------------------------------------
# Buffers


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


_TYPESTR = re.compile(r"[<>|=]?[a-zA-Z](\d+)")


def _cuda_iface_info(obj, iface):
    """(addr, len, dev, "VRAM") of an object with __cuda_array_interface__ (CuPy, Numba,
    PyTorch...; versions 0 to 3 of the protocol): the data pointer, and the length of the
    contiguous range its shape and item size span. The interface names no device: the index
    is obj.device.id (CuPy), obj.device.index (torch-style) or an int obj.device, else 0; the
    core checks at registration that the pointer is memory of that GPU."""
    shape = tuple(int(n) for n in iface["shape"])
    m = _TYPESTR.match(str(iface["typestr"]))
    if m is None:
        raise ValueError(f"ixl: __cuda_array_interface__ typestr {iface['typestr']!r} has no "
                         "item size")
    itemsize = int(m.group(1))
    count = 1
    for n in shape:
        count *= n
    strides = iface.get("strides")
    if strides is not None and count > 0:  # None: C-contiguous (version 2 and later say so)
        want = itemsize
        for n, stride in zip(reversed(shape), reversed(tuple(strides))):
            if n != 1 and int(stride) != want:
                raise ValueError("ixl: an array must be C-contiguous to be described by one "
                                 "range")
            want *= n
    addr = iface["data"][0] or 0
    dev = getattr(obj, "device", None)
    for attr in ("id", "index"):
        value = getattr(dev, attr, None)
        if isinstance(value, int):
            dev = value
            break
    if not isinstance(dev, int) or isinstance(dev, bool) or dev < 0:
        dev = 0
    return addr, count * itemsize, dev, "VRAM"


def buffer_info(obj):
    """(addr, len, dev, memory type name) of a buffer: a torch tensor (CPU: DRAM; CUDA: VRAM
    with its GPU index), an object with __cuda_array_interface__ such as a CuPy array (VRAM),
    a numpy array, or any C-contiguous object with the buffer protocol (bytearray,
    memoryview, mmap, bytes...). The address is valid while the object lives and is not
    resized. Neither torch nor CuPy is imported: the object describes itself."""
    if _is_torch(obj):
        if not obj.is_contiguous():
            raise ValueError("ixl: a tensor must be contiguous to be described by one range")
        nbytes = obj.numel() * obj.element_size()
        if obj.device.type == "cpu":
            return obj.data_ptr(), nbytes, 0, "DRAM"
        if obj.device.type == "cuda":
            return obj.data_ptr(), nbytes, obj.device.index or 0, "VRAM"
        raise ValueError(f"ixl: tensors on {obj.device.type} are not supported")
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _cuda_iface_info(obj, iface)
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        flags = getattr(obj, "flags", None)
        if flags is not None and not flags["C_CONTIGUOUS"]:
            raise ValueError("ixl: an array must be C-contiguous to be described by one range")
        return iface["data"][0], int(obj.nbytes), 0, "DRAM"
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"ixl: {type(obj).__name__} is neither a descriptor tuple nor a "
                        "buffer") from None
    with view:
        if not view.c_contiguous:
            raise ValueError("ixl: a buffer must be C-contiguous to be described by one range")
        nbytes = view.nbytes
    pybuf = _PyBuffer()
    if _get_buffer(obj, ctypes.byref(pybuf), 0) != 0:
        raise TypeError(f"ixl: cannot get the address of {type(obj).__name__}")
    addr = pybuf.buf or 0
    _release_buffer(ctypes.byref(pybuf))
    return addr, nbytes, 0, "DRAM"


def _is_ints(item, n):
    return (isinstance(item, (tuple, list)) and len(item) == n and
            all(isinstance(v, int) or (np is not None and isinstance(v, np.integer))
                for v in item))


def _np_rows(arr, widths, what):
    """A C-contiguous uint64 copy (or view) of an integer numpy array of shape N x width."""
    if arr.dtype.kind not in "iu":
        raise TypeError(f"ixl: {what} arrays must hold integers, not {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] not in widths:
        raise ValueError(f"ixl: {what} arrays are N x {' or N x '.join(map(str, widths))}, "
                         f"not {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def _is_ndarray(obj):
    return np is not None and isinstance(obj, np.ndarray)


def _items(descs):
    """The entries of a descriptor argument: a list/tuple of entries, or one buffer/tuple."""
    if isinstance(descs, tuple) and descs and isinstance(descs[0], int):
        return [descs]  # one (addr, len, dev[, meta]) tuple
    if isinstance(descs, (list, tuple)):
        return descs
    return [descs]  # one buffer


def _resolve_mem(mem, found):
    if mem is not None:
        return mem_type(mem)
    return mem_type(found or "DRAM")


# ---------------------------------------------------------------------------------------------
# Transfer descriptor lists


class XferDList:
    """A list of transfer descriptors (addr, len, dev) of one memory type, kept as strided
    runs in C. len() is the number of descriptors; indexing gives (addr, len, dev).

    Also NIXL's nixlXferDList: XferDList(type, descs) makes one from a memory type and a list
    of (addr, len, dev) tuples or an N x 3 array (or, as NIXL's init_size, an int: empty);
    append / addDesc, __setitem__, index, remDesc, clear, print, == and pickling as NIXL's."""

    __slots__ = ("_ptr", "_keep", "__weakref__")

    def __init__(self, type, descs=0):  # noqa: A002 (NIXL's parameter name)
        src = _new_dlist(mem_type(type), 0) if isinstance(descs, int) else \
            xfer_dlist(descs, type)
        if src is descs:  # a list given: a copy of its own
            src = XferDList.deserialize(descs.serialize())
        self._ptr, src._ptr = src._ptr, None
        self._keep = src._keep  # objects whose memory the list describes

    @classmethod
    def _wrap(cls, ptr, keep=None):
        """The list object owning C list ptr."""
        self = cls.__new__(cls)
        self._ptr = ptr
        self._keep = keep
        return self

    def __del__(self, _destroy=lib.ixl_dlist_destroy):
        if getattr(self, "_ptr", None):
            _destroy(self._ptr)
            self._ptr = None

    @property
    def ptr(self):
        return self._ptr

    @property
    def mem_type(self):
        return mem_name(lib.ixl_dlist_type(self._ptr))

    def getType(self):  # NIXL's name
        return self.mem_type

    def __len__(self):
        return lib.ixl_dlist_count(self._ptr)

    def descCount(self):
        return len(self)

    def isEmpty(self):
        return len(self) == 0

    @property
    def run_count(self):
        return lib.ixl_dlist_run_count(self._ptr)

    def __getitem__(self, index):
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("descriptor index out of range")
        d = Desc()
        check(lib.ixl_dlist_get(self._ptr, index, ctypes.byref(d)))
        return (d.addr, d.len, d.dev)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def runs(self):
        """The stored runs as (addr, len, stride, count, dev) tuples."""
        out = []
        r = Run()
        for i in range(self.run_count):
            check(lib.ixl_dlist_get_run(self._ptr, i, ctypes.byref(r)))
            out.append((r.addr, r.len, r.stride, r.count, r.dev))
        return out

    def serialize(self):
        buf = ctypes.c_void_p()
        n = ctypes.c_size_t()
        check(lib.ixl_dlist_serialize(self._ptr, ctypes.byref(buf), ctypes.byref(n)))
        try:
            return ctypes.string_at(buf, n.value)
        finally:
            lib.ixl_free(buf)

    @classmethod
    def deserialize(cls, data):
        data = bytes(data)
        ptr = ctypes.c_void_p()
        check(lib.ixl_dlist_deserialize(data, len(data), ctypes.byref(ptr)))
        return cls._wrap(ptr.value)

    # -- NIXL's list methods (the C list is replaced when changed: calls that take a list
    #    copy it, so nothing else holds the old one) ----------------------------------------

    def _replace(self, rows):
        src = xfer_dlist(rows, self.mem_type) if rows else _new_dlist(lib.ixl_dlist_type(
            self._ptr), 0)
        old, self._ptr, src._ptr = self._ptr, src._ptr, None
        lib.ixl_dlist_destroy(old)

    def append(self, desc):
        d = Desc(*(int(v) for v in desc[:3]))
        _check_add(lib.ixl_dlist_add(self._ptr, ctypes.byref(d), 1))

    addDesc = append

    def __setitem__(self, index, desc):
        rows = list(self)
        rows[index] = tuple(int(v) for v in desc[:3])
        self._replace(rows)

    def index(self, desc):
        """The index of descriptor desc; nixlNotFoundError if absent."""
        want = tuple(int(v) for v in desc[:3])
        for i, d in enumerate(self):
            if d == want:
                return i
        raise check_error(-500, f"descriptor {want} is not in the list")

    def remDesc(self, index):
        rows = list(self)
        del rows[index]
        self._replace(rows)

    def clear(self):
        self._replace([])

    def print(self):
        print(repr(self))
        for d in self:
            print(f"  addr 0x{d[0]:x} len {d[1]} dev {d[2]}")

    def __eq__(self, other):
        if not isinstance(other, XferDList):
            return NotImplemented
        return self.mem_type == other.mem_type and list(self) == list(other)

    __hash__ = None  # changeable, and equal by value

    def __reduce__(self):
        # Pickled as its descriptors' values (ixl's serialized form), never the C pointer:
        # the copy owns a list of its own, in this process or another.
        return (_xfer_dlist_from_bytes, (self.serialize(),))

    def __repr__(self):
        return f"XferDList({self.mem_type}, {len(self)} descriptors, {self.run_count} runs)"


def _check_add(status):
    if status == -100:  # IXL_ERR_INVALID_ARG
        raise check_error(status, "a descriptor of length 0, a run of count 0, or a range "
                          "past the end of the address space (a registration of a whole "
                          "file, len 0, has no transfer descriptor: give the range to move)")
    check(status)


def _new_dlist(mem, capacity):
    ptr = ctypes.c_void_p()
    check(lib.ixl_dlist_create(mem, capacity, ctypes.byref(ptr)))
    return XferDList._wrap(ptr.value)


def xfer_dlist(descs, mem=None):
    """An XferDList from descs (see the module's docstring); mem: memory type, default the
    buffers' own (torch: DRAM or VRAM; __cuda_array_interface__: VRAM) or DRAM."""
    if isinstance(descs, XferDList):
        if mem is not None and mem_type(mem) != lib.ixl_dlist_type(descs.ptr):
            raise check_error(-101, f"list is {descs.mem_type}, not {mem}")
        return descs
    if isinstance(descs, RegDList):
        return descs.trim()
    if _is_ndarray(descs):
        rows = _np_rows(descs, (3, 5), "descriptor")
        out = _new_dlist(_resolve_mem(mem, None), rows.shape[0])
        add = lib.ixl_dlist_add if rows.shape[1] == 3 else lib.ixl_dlist_add_runs
        _check_add(add(out.ptr, rows.ctypes.data, rows.shape[0]))
        return out
    items = _items(descs)
    # A list of plain (addr, len, dev) tuples: one conversion in C through numpy.
    if np is not None and len(items) > 64 and all(type(d) is tuple for d in items):
        try:
            rows = np.array(items, dtype=np.uint64)
        except (ValueError, TypeError, OverflowError):
            rows = None
        if rows is not None and rows.ndim == 2 and rows.shape[1] in (3, 5):
            return xfer_dlist(rows, mem)
    runs = (Run * len(items))()
    keep = []
    found = None
    for i, item in enumerate(items):
        if _is_ints(item, 3) or _is_ints(item, 4):
            addr, length, dev = item[0], item[1], item[2]
            runs[i] = (addr, length, length, 1, dev)
        elif _is_ints(item, 5):
            runs[i] = tuple(item)
        else:
            addr, length, dev, kind = buffer_info(item)
            if found is not None and kind != found:
                raise check_error(-101, "buffers of different memory types in one list")
            found = kind
            runs[i] = (addr, length, length, 1, dev)
            keep.append(item)
    out = _new_dlist(_resolve_mem(mem, found), len(items))
    _check_add(lib.ixl_dlist_add_runs(out.ptr, runs, len(items)))
    out._keep = keep or None
    return out


# ---------------------------------------------------------------------------------------------
# Registration descriptor lists


class RegDList:
    """Registration descriptors (addr, len, dev, meta) of one memory type. trim() gives the
    transfer descriptors of the same ranges (with the dev ids an agent assigned to path-mode
    FILE regions, for a list returned by register_memory)."""

    __slots__ = ("_mem", "_arr", "_n", "_metas", "_keep", "__weakref__")

    def __init__(self, type, descs=0):  # noqa: A002 (NIXL's nixlRegDList(type, descs))
        """NIXL's constructor: a memory type and (addr, len, dev, meta) tuples or an N x 3
        array (an int, NIXL's init_size: empty)."""
        self._set(reg_dlist([] if isinstance(descs, int) else descs, type))

    @classmethod
    def _make(cls, mem, arr, n, metas=None, keep=None):
        self = cls.__new__(cls)
        self._mem = mem
        self._arr = arr  # a ctypes array of RegDesc, or a numpy (n, 5) uint64 array
        self._n = n
        self._metas = metas  # {index: bytes} for entries with bytes
        self._keep = keep
        return self

    def _set(self, other):
        self._mem, self._arr, self._n = other._mem, other._arr, other._n
        self._metas, self._keep = other._metas, other._keep

    @property
    def ptr(self):
        if _is_ndarray(self._arr):
            return self._arr.ctypes.data
        return ctypes.addressof(self._arr)

    @property
    def mem_type(self):
        return mem_name(self._mem)

    def getType(self):
        return self.mem_type

    def __len__(self):
        return self._n

    def descCount(self):
        return self._n

    def isEmpty(self):
        return self._n == 0

    def _row(self, i):
        if _is_ndarray(self._arr):
            return tuple(int(v) for v in self._arr[i, :3])
        d = self._arr[i]
        return (d.addr, d.len, d.dev)

    def __getitem__(self, index):
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("descriptor index out of range")
        meta = (self._metas or {}).get(index, b"")
        return self._row(index) + (meta.decode("utf-8", "replace"),)

    def __iter__(self):
        for i in range(self._n):
            yield self[i]

    def devs(self):
        return [self._row(i)[2] for i in range(self._n)]

    def with_devs(self, devs):
        """A copy whose dev fields are devs (the ids an agent assigned)."""
        if np is not None:
            arr = self.as_array().copy()
            arr[:, 2] = np.asarray(devs, dtype=np.uint64)
        else:
            arr = (RegDesc * self._n)()
            ctypes.memmove(arr, self.ptr, ctypes.sizeof(arr))
            for i, dev in enumerate(devs):
                arr[i].dev = dev
        return RegDList._make(self._mem, arr, self._n, self._metas, self._keep)

    def as_array(self):
        """The entries as a numpy (n, 5) uint64 view (addr, len, dev, bytes, bytes_len)."""
        if _is_ndarray(self._arr):
            return self._arr
        return np.frombuffer(self._arr, dtype=np.uint64).reshape(self._n, 5)

    def trim(self):
        if self._n == 0:
            return _new_dlist(self._mem, 0)
        if np is not None:
            out = xfer_dlist(np.ascontiguousarray(self.as_array()[:, :3]), self._mem)
        else:
            out = xfer_dlist([self._row(i) for i in range(self._n)], self._mem)
        out._keep = self._keep
        return out

    # -- NIXL's list methods ----------------------------------------------------------------

    def _entries(self):
        return [(a, n, d, (self._metas or {}).get(i, b"")) for i, (a, n, d, _) in
                enumerate(self)]

    def _replace(self, entries):
        keep = self._keep
        self._set(reg_dlist(entries, self._mem))
        self._keep = keep  # the buffers the entries came from stay described

    def append(self, desc):
        entries = self._entries()
        entries.append(tuple(desc) if len(desc) == 4 else tuple(desc[:3]) + (b"",))
        self._replace(entries)

    addDesc = append

    def __setitem__(self, index, desc):
        entries = self._entries()
        entries[index] = tuple(desc) if len(desc) == 4 else tuple(desc[:3]) + (b"",)
        self._replace(entries)

    def index(self, desc):
        want = tuple(int(v) for v in desc[:3])
        for i in range(self._n):
            if self._row(i) == want:
                return i
        raise check_error(-500, f"descriptor {want} is not in the list")

    def remDesc(self, index):
        entries = self._entries()
        del entries[index]
        self._replace(entries)

    def clear(self):
        self._replace([])

    def print(self):
        print(repr(self))
        for d in self:
            print(f"  addr 0x{d[0]:x} len {d[1]} dev {d[2]} meta {d[3]!r}")

    def __eq__(self, other):
        if not isinstance(other, RegDList):
            return NotImplemented
        return self._mem == other._mem and list(self) == list(other)

    __hash__ = None

    def __reduce__(self):
        # Pickled as values: (addr, len, dev) rows and the entries' bytes, never the C array
        # (its entries point at this process's memory for their bytes).
        if np is not None:
            rows = np.array(self.as_array()[:, :3], dtype=np.uint64)
        else:
            rows = [self._row(i) for i in range(self._n)]
        return (_reg_dlist_from_values, (self._mem, rows, dict(self._metas or {})))

    def __repr__(self):
        return f"RegDList({self.mem_type}, {self._n} descriptors)"


def reg_dlist(descs, mem=None):
    """A RegDList from (addr, len, dev[, meta]) tuples, buffers, an N x 3 numpy array, an
    XferDList, or a RegDList (returned as is)."""
    if isinstance(descs, RegDList):
        if mem is not None and mem_type(mem) != descs._mem:
            raise check_error(-101, f"list is {descs.mem_type}, not {mem}")
        return descs
    if isinstance(descs, XferDList):
        if mem is None:
            mem = descs.mem_type
        descs = list(descs)
    if _is_ndarray(descs):
        rows = _np_rows(descs, (3,), "registration descriptor")
        arr = np.zeros((rows.shape[0], 5), dtype=np.uint64)
        arr[:, :3] = rows
        return RegDList._make(_resolve_mem(mem, None), arr, rows.shape[0])
    items = _items(descs)
    arr = (RegDesc * len(items))()
    metas = {}
    keep = []
    found = None
    for i, item in enumerate(items):
        if _is_ints(item, 3):
            arr[i] = (item[0], item[1], item[2], None, 0)
        elif (isinstance(item, (tuple, list)) and len(item) == 4 and _is_ints(item[:2], 2) and
              (item[2] is None or _is_ints(item[2:3], 1))):
            meta = item[3]
            if isinstance(meta, str):
                meta = meta.encode("utf-8")
            meta = bytes(meta or b"")
            dev = DEV_NONE if item[2] is None else item[2]
            arr[i] = (item[0], item[1], dev, None, 0)
            if meta:
                cbuf = ctypes.create_string_buffer(meta, len(meta))
                keep.append(cbuf)
                arr[i].bytes = ctypes.addressof(cbuf)
                arr[i].bytes_len = len(meta)
                metas[i] = meta
        else:
            addr, length, dev, kind = buffer_info(item)
            if found is not None and kind != found:
                raise check_error(-101, "buffers of different memory types in one list")
            found = kind
            arr[i] = (addr, length, dev, None, 0)
            keep.append(item)
    return RegDList._make(_resolve_mem(mem, found), arr, len(items), metas or None,
                          keep or None)


def index_array(indices):
    """(address, n, keep) of an int64 array of indices from a numpy array, list or range."""
    if _is_ndarray(indices):
        if indices.dtype.kind not in "iu" or indices.ndim != 1:
            raise TypeError("ixl: indices are a 1-D integer array")
        arr = np.ascontiguousarray(indices, dtype=np.int64)
        return arr.ctypes.data, arr.shape[0], arr
    if np is not None:
        arr = np.fromiter(indices, dtype=np.int64) if not isinstance(indices, list) else \
            np.asarray(indices, dtype=np.int64)
        return index_array(arr)
    values = list(indices)
    arr = (ctypes.c_int64 * len(values))(*values)
    return ctypes.addressof(arr), len(values), arr


def _xfer_dlist_from_bytes(data):
    """Unpickling of an XferDList: a new list from its serialized form."""
    return XferDList.deserialize(data)


def _reg_dlist_from_values(mem, rows, metas):
    """Unpickling of a RegDList: a new list from its rows and the entries' bytes."""
    if not metas and np is not None:
        return reg_dlist(np.asarray(rows, dtype=np.uint64).reshape(-1, 3), mem)
    items = [tuple(int(v) for v in row) for row in rows]
    return reg_dlist([r + (metas.get(i, b""),) for i, r in enumerate(items)], mem)
