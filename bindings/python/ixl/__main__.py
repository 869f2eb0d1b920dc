"""python -m ixl: what ixl-info prints, through the loaded libixl's C API.

The version, every plugin with its options, the memory types an engine of it offers here (and
why others are not), each refused plugin with its reason, the CUDA driver and devices (or why
there are none), and the configuration variables. Line for line the output of tools/ixl-info.c
(the same calls on the same library, formatted alike; tests/python/test_wheel.py compares the
two), so that an environment holding only the wheel answers what ixl-info would: which
libixl.so the package loaded (library_path), its version, and its plugins.
"""
import ctypes
import sys

from . import _lib
from ._lib import lib

PROG = "python -m ixl"
USAGE = f"""usage: {PROG} [--plugins] [--cuda] [--config] [--strerror N] [--help]
  with no option: the version, every plugin with its options (type, range or
  choices, default; sizes take K, M, G, T suffixes, durations us, ms, s), the
  memory types an engine of it offers here (and why others are not), each
  refused one with its reason, the CUDA driver and devices (or why there are
  none), and the configuration variables with their values
"""
INDENT = " " * 13


def _s(raw):
    """A C string as printf's %s writes it (glibc: "(null)" for NULL)."""
    return "(null)" if raw is None else raw.decode("utf-8", "replace")


def _caps(caps):
    names = [n for bit, n in ((_lib.CAP_LOCAL, "local"), (_lib.CAP_REMOTE, "remote"),
                              (_lib.CAP_NOTIF, "notif"), (_lib.CAP_PROGRESS, "progress"))
             if caps & bit]
    return ",".join(names) if names else "none"


def _mems(mask):
    return ",".join(_s(lib.ixl_mem_name(t)) for t in range(len(_lib.MEM_NAMES))
                    if mask & (1 << t))


def _here(out, probe, info):
    """What an engine of the plugin offers on this machine, from a backend created with default
    options in a probe agent (or why the plugin cannot make one here)."""
    b = ctypes.c_void_p()
    if not probe or lib.ixl_backend_create(probe, info.name, None, 0, ctypes.byref(b)) != _lib.OK:
        out.append(f"{INDENT}unavailable here: {_s(lib.ixl_agent_last_error(probe))}")
        return
    out.append(f"{INDENT}memory here: {_mems(lib.ixl_backend_mem_mask(b))}")
    why = _s(lib.ixl_backend_mem_why(b))
    while why:  # one line per reason, as ixl-info splits them
        line, _, why = why.partition("\n")
        out.append(f"{INDENT}not here: {line}")
    if lib.ixl_backend_destroy(b) != _lib.OK:
        print(f"{PROG}: destroying the probe backend {_s(info.name)}: "
              f"{_s(lib.ixl_agent_last_error(probe))}", file=sys.stderr)


def plugins_text():
    out = []
    n = lib.ixl_plugin_count()
    params = _lib.AgentParams()
    params.field_mask = _lib.AGENT_F_BACKENDS | _lib.AGENT_F_ETCD
    params.backends = b""
    params.etcd_endpoints = b""
    probe = ctypes.c_void_p()
    if lib.ixl_agent_create(b"ixl-info-probe", ctypes.byref(params), ctypes.byref(probe)) != 0:
        probe = None
    try:
        out.append(f"plugins ({n}):")
        for i in range(n):
            info = _lib.PluginInfo()
            if lib.ixl_plugin_get(i, ctypes.byref(info)) != _lib.OK:
                continue
            out.append(f"  {_s(info.name):<10} version {_s(info.version)}, ABI "
                       f"{info.abi_major}.{info.abi_minor}, {_s(info.path)}")
            out.append(f"{INDENT}memory: {_mems(info.mem_mask)}")
            _here(out, probe, info)
            out.append(f"{INDENT}capabilities: {_caps(info.caps)}")
            if info.n_options == 0:
                out.append(f"{INDENT}options: none")
            for j in range(info.n_options):
                o = info.options[j]
                buf = ctypes.create_string_buffer(1024)
                if lib.ixl_option_describe(ctypes.byref(o), buf, len(buf)) == _lib.OK:
                    kind = _s(buf.value)
                else:
                    kind = f"({_s(lib.ixl_agent_last_error(None))})"
                out.append(f"{INDENT}option {_s(o.name):<16} {kind}, default "
                           f"\"{_s(o.default_value)}\"")
                out.append(f"{' ' * 20}{_s(o.description)}")
    finally:
        if probe:
            lib.ixl_agent_destroy(probe)
    r = lib.ixl_plugin_refused_count()
    if r > 0:
        out.append(f"refused ({r}):")
    for i in range(r):
        path, reason = ctypes.c_char_p(), ctypes.c_char_p()
        if lib.ixl_plugin_refused_get(i, ctypes.byref(path), ctypes.byref(reason)) == _lib.OK:
            out.append(f"  {_s(path.value)}")
            out.append(f"{INDENT}refused: {_s(reason.value)}")
    return out


def cuda_text():
    out = ["cuda:"]
    why = ctypes.create_string_buffer(512)
    n = lib.ixl_device_count(why, len(why))
    version = ctypes.c_int(0)
    if lib.ixl_device_driver_version(ctypes.byref(version)) == _lib.OK:
        v = version.value
        out.append(f"  driver      CUDA {v // 1000}.{v % 1000 // 10} ({v})")
    if n < 0:
        out.append(f"  devices     none: {_s(why.value)}")
        return out
    out.append(f"  devices     {n}")
    for i in range(n):
        d = _lib.DeviceInfo()
        if lib.ixl_device_info(i, ctypes.byref(d)) != _lib.OK:
            out.append(f"  device {i}    (no description)")
            continue
        out.append(f"  device {i}    {_s(d.name)}, {d.total_mem >> 20} MiB, compute capability "
                   f"{d.cc_major}.{d.cc_minor}, PCI bus {d.pci_bus}")
    return out


def config_text():
    out = ["configuration:"]
    for i in range(lib.ixl_config_count()):
        v = _lib.ConfigVar()
        if lib.ixl_config_get(i, ctypes.byref(v)) != _lib.OK:
            continue
        value, default = _s(v.value), _s(v.default_value)
        out.append(f"  {_s(v.name):<20} = \"{value}\"{'' if value != default else ' (default)'}")
        out.append(f"{' ' * 25}{_s(v.description)} (default \"{default}\")")
    return out


def _strtol(text):
    """strtol(text, &end, 0) with *end == '\\0' required: decimal, 0x hex, 0 octal. None when
    text is not a whole number that fits a long."""
    s = text.lstrip(" \t\n\v\f\r")
    sign = -1 if s[:1] == "-" else 1
    s = s[1:] if s[:1] in "+-" else s
    try:
        if s[:2].lower() == "0x" and len(s) > 2:
            v = int(s[2:], 16)
        elif s[:1] == "0" and len(s) > 1:
            v = int(s[1:], 8)
        else:
            v = int(s, 10)
    except ValueError:
        return None
    if not s or not all(c.isalnum() for c in s):  # int() accepts "_" and inner blanks
        return None
    v *= sign
    return v if -(1 << 63) <= v < (1 << 63) else None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    plugins = config = cuda = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--strerror":
            if i + 1 >= len(argv):
                sys.stderr.write(USAGE)
                return 2
            i += 1
            v = _strtol(argv[i])
            if v is None:
                print(f"{PROG}: '{argv[i]}' is not a number", file=sys.stderr)
                return 2
            s = _s(lib.ixl_strerror((v + (1 << 31)) % (1 << 32) - (1 << 31)))  # (int)v
            print(f"{v} {s}")
            return 1 if s == "unknown status" else 0
        elif a == "--plugins":
            plugins = True
        elif a == "--config":
            config = True
        elif a == "--cuda":
            cuda = True
        elif a in ("--help", "-h"):
            sys.stdout.write(USAGE)
            return 0
        else:
            sys.stderr.write(USAGE)
            return 2
        i += 1
    if not (plugins or config or cuda):
        plugins = config = cuda = True
        print(f"ixl {_s(lib.ixl_version())}", flush=True)
    # Part by part, as ixl-info prints (the library's warnings, on stderr, come between).
    for wanted, part in ((plugins, plugins_text), (cuda, cuda_text), (config, config_text)):
        if wanted:
            print("\n".join(part()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
