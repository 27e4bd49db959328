# Declarations of cxx/runtime/launch/launch.h for the Cython wrapper.
from libc.stdint cimport uintptr_t

cdef extern from "launch.h" namespace "braze::launch":
    cdef cppclass Launch
    cdef cppclass ArgumentCheck

    int kDone
    int kFailed
    int kDeclined

    const char* torchVersion()

    # NULL or -1: a Python exception is set.
    Launch* createLaunch(uintptr_t function, void* kernels) except NULL
    void destroyLaunch(Launch* launch)
    int runLaunch(Launch* launch, void* env) except -1

    ArgumentCheck* createArgumentCheck(void* expected) except NULL
    void destroyArgumentCheck(ArgumentCheck* check)
    int runArgumentCheck(ArgumentCheck* check, void* arguments) except -1
