# cython: language_level=3
"""Thin Cython layer over the CPU kernels' launcher (cxx/runtime/launch):
`NativeLaunch` runs one kernel or combo call on a program's slot list,
`NativeArgumentCheck` accepts a program's arguments; braze.runtime.launch
is the Python API (it falls back to Python where this module is absent)."""
from libc.stdint cimport uintptr_t

cimport braze.runtime._launch_api as capi

# The torch this module was compiled against (its C++ ABI): braze.runtime.launch
# uses the module only under that torch.
TORCH_VERSION = capi.torchVersion().decode()

DONE = capi.kDone
FAILED = capi.kFailed
DECLINED = capi.kDeclined


cdef class NativeLaunch:
    """One launch: `function` is the address of the kernel's (or combo's) C
    entry point, `kernels` one description per kernel (braze.runtime.cpu).
    Calling it with the slot list returns DONE, FAILED (integer division by
    zero) or DECLINED (nothing done: run the Python path)."""
    cdef capi.Launch* handle

    def __cinit__(self, uintptr_t function, list kernels):
        self.handle = capi.createLaunch(function, <void*>kernels)

    def __dealloc__(self):
        if self.handle != NULL:
            capi.destroyLaunch(self.handle)

    def __call__(self, list env):
        return capi.runLaunch(self.handle, <void*>env)


cdef class NativeArgumentCheck:
    """Accepts a program's arguments: per argument None (an int) or (dtype,
    sizes with -1 for a dynamic dim) of a CPU tensor."""
    cdef capi.ArgumentCheck* handle

    def __cinit__(self, list expected):
        self.handle = capi.createArgumentCheck(<void*>expected)

    def __dealloc__(self):
        if self.handle != NULL:
            capi.destroyArgumentCheck(self.handle)

    def __call__(self, arguments):
        return capi.runArgumentCheck(self.handle, <void*>arguments) == 1
