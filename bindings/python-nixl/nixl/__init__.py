"""nixl on ixl: NIXL 1.4's Python package names, implemented by ixl (ixl.compat).

A program written for NIXL runs unmodified: `from nixl._api import nixl_agent`,
`nixl._bindings`, `nixl._utils`, `nixl.logging`, and (as NIXL's package does) every public
name of those modules as an attribute of `nixl` itself. Installed only on request
(bindings/python-nixl), so that it never hides a real NIXL; docs/python.md lists the
differences that remain.
"""
from . import _api, _bindings, _utils, logging

IXL_COMPAT = True  # tells this package from NVIDIA's NIXL

for _mod in (_bindings, _utils, logging, _api):
    for _name in _mod.__all__:
        globals()[_name] = getattr(_mod, _name)
del _mod, _name
