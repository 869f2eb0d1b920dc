"""NIXL's list methods on ixl's descriptor lists (nixlXferDList / nixlRegDList in NIXL's
binding): __setitem__, addDesc, append, index, remDesc, clear, print and ==.

ixl keeps a transfer list in C as strided runs, and a registration list as one array; an edit
rebuilds the list from its descriptors (O(n) per call: edits are for small lists, as in NIXL's
tests; serving engines build lists once, from numpy). Descriptors are (addr, len, dev) for a
transfer list and (addr, len, dev, meta) for a registration list; ixl holds no descriptor of
length 0.
"""
from . import _lib
from ._lib import lib


def _desc3(desc):
    if len(desc) != 3:
        raise ValueError("a transfer descriptor is a tuple (addr, len, dev)")
    return (int(desc[0]), int(desc[1]), int(desc[2]))


def _desc4(desc):
    if len(desc) != 4:
        raise ValueError("a registration descriptor is a tuple (addr, len, dev, meta)")
    meta = desc[3]
    if isinstance(meta, (bytes, bytearray)):
        meta = bytes(meta).decode("utf-8", "replace")
    return (int(desc[0]), int(desc[1]), int(desc[2]), str(meta or ""))


def _index(items, desc, norm):
    want = norm(desc)
    for i, item in enumerate(items):
        if norm(item) == want:
            return i
    raise _lib.errors.from_status(-500, "IXL_ERR_NOT_FOUND", f"descriptor {want} is not in "
                                  "the list", "index")


def _position(n, index):
    i = int(index)
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError("descriptor index out of range")
    return i


class _ListMethods:
    __slots__ = ()
    _norm = None

    def _items(self):
        return [self._norm(d) for d in self]

    def __setitem__(self, index, desc):
        items = self._items()
        items[_position(len(items), index)] = self._norm(desc)
        self._replace(items)

    def addDesc(self, desc):
        self._replace(self._items() + [self._norm(desc)])

    def append(self, desc):
        self.addDesc(desc)

    def index(self, desc):
        return _index(self._items(), desc, self._norm)

    def remDesc(self, index):
        items = self._items()
        del items[_position(len(items), index)]
        self._replace(items)

    def clear(self):
        self._replace([])

    def print(self):
        print(repr(self))
        for i, d in enumerate(self):
            print(f"  [{i}] {d}")

    def __eq__(self, other):
        if not isinstance(other, _ListMethods) or self._norm is not other._norm:
            return NotImplemented
        return self.getType() == other.getType() and self._items() == other._items()

    __hash__ = object.__hash__  # lists stay usable in sets and weak sets (identity)


class XferListMethods(_ListMethods):
    """NIXL's list methods of a transfer list (ixl.descs.XferDList)."""

    __slots__ = ()
    _norm = staticmethod(_desc3)

    def _replace(self, items):
        from .descs import _new_dlist, xfer_dlist
        mem = lib.ixl_dlist_type(self._ptr)
        new = xfer_dlist(items, mem) if items else _new_dlist(mem, 0)
        old, self._ptr, new._ptr = self._ptr, new._ptr, None
        lib.ixl_dlist_destroy(old)


class RegListMethods(_ListMethods):
    """NIXL's list methods of a registration list (ixl.descs.RegDList)."""

    __slots__ = ()
    _norm = staticmethod(_desc4)

    def _replace(self, items):
        from .descs import reg_dlist
        new = reg_dlist(items, self._mem)
        keep = [k for k in (self._keep, new._keep) if k]  # buffers named before, metas now
        self._arr, self._n, self._metas = new._arr, new._n, new._metas
        self._keep = keep or None
