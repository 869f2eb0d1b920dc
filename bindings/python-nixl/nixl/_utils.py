"""nixl._utils: NIXL's raw-memory test helpers, over the C library's allocator (ctypes).

malloc_passthru(size) -> address of `size` bytes aligned to 4096 (aligned_alloc; free it with
free_passthru); ba_buf(addr, size) fills with 0xBA; verify_transfer(addr1, addr2, size) raises
AssertionError unless the two ranges hold the same bytes.
"""
import ctypes as _ctypes

_libc = _ctypes.CDLL(None, use_errno=True)
_aligned_alloc = _libc.aligned_alloc
_aligned_alloc.argtypes = [_ctypes.c_size_t, _ctypes.c_size_t]
_aligned_alloc.restype = _ctypes.c_void_p
_free = _libc.free
_free.argtypes = [_ctypes.c_void_p]
_free.restype = None
_memcmp = _libc.memcmp
_memcmp.argtypes = [_ctypes.c_void_p, _ctypes.c_void_p, _ctypes.c_size_t]
_memcmp.restype = _ctypes.c_int

_ALIGN = 4096


def _size(size):
    size = int(size)
    if size < 0:
        raise ValueError(f"size must not be negative (got {size})")
    return size


def malloc_passthru(size):
    """Allocates size bytes aligned to 4096 and returns the address (an int)."""
    size = _size(size)
    # aligned_alloc wants a multiple of the alignment; round up, as glibc would accept either.
    addr = _aligned_alloc(_ALIGN, max(_ALIGN, (size + _ALIGN - 1) // _ALIGN * _ALIGN))
    if not addr:
        raise MemoryError(f"malloc_passthru: aligned_alloc of {size} bytes failed: "
                          f"{_ctypes.get_errno()}")
    return addr


def free_passthru(addr):
    """Frees an address malloc_passthru returned."""
    _free(int(addr) or None)


def ba_buf(addr, size):
    """Fills size bytes at addr with 0xBA."""
    _ctypes.memset(int(addr), 0xBA, _size(size))


def verify_transfer(addr1, addr2, size):
    """Asserts that size bytes at addr1 and at addr2 are equal."""
    size = _size(size)
    if size and _memcmp(int(addr1), int(addr2), size) != 0:
        a = _ctypes.string_at(int(addr1), size)
        b = _ctypes.string_at(int(addr2), size)
        first = next(i for i in range(size) if a[i] != b[i])
        raise AssertionError(f"verify_transfer: the buffers differ from byte {first} "
                             f"(0x{a[first]:02x} != 0x{b[first]:02x}) of {size}")


__all__ = ["malloc_passthru", "free_passthru", "ba_buf", "verify_transfer"]
