"""OpenCL C (1.2, the dialect PoCL and Intel's compilers take): the GPU
structure (codegen/gpu.py) spelled with address spaces, work-item
functions and local memory. Math functions are OpenCL's overloaded
built-ins; double needs cl_khr_fp64."""

from __future__ import annotations

from braze.codegen.gpu import STORAGE_TYPES, GpuRenderer

_HEAD = """\
// braze OpenCL C kernels: build with clBuildProgram (PoCL, Intel) or ocloc.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
typedef long int64_t;
typedef ulong uint64_t;
typedef int int32_t;
typedef uint uint32_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef char int8_t;
typedef uchar uint8_t;
#define BZ_FN static inline
#define bz_as_float(u) as_float(u)
#define bz_as_uint(x) as_uint(x)
#define BZ_NAN_F NAN
#define BZ_INF_F INFINITY
#define BZ_NAN_D as_double((ulong)0x7ff8000000000000UL)
#define BZ_INF_D as_double((ulong)0x7ff0000000000000UL)"""


class OpenCLRenderer(GpuRenderer):
    language = "OpenCL C"
    extension = ".cl"
    # A kernel argument may not point to bool: i1 lives in bytes.
    storage_types = dict(STORAGE_TYPES, i1="uint8_t")
    head = _HEAD
    kernel_prefix = "__kernel void"
    global_space = "__global"
    shared_space = "__local"
    shared_pointer_space = "__local"
    # Inlined by force: PoCL 3.1's LLVM 15 inliner crashes (a segfault in
    # getUnderlyingObject while it simplifies a clone) on some combos of six
    # or more sub-kernels; the always-inline path does not, and GPU
    # compilers inline these functions anyway.
    device_prefix = "static inline __attribute__((always_inline))"
    # CL_DEVICE_MAX_PARAMETER_SIZE is at least 1024 bytes in the full
    # profile: 128 pointers.
    max_launch_parameters = 1024 // 8
    barrier = "barrier(CLK_LOCAL_MEM_FENCE)"
    local_id = "get_local_id(0)"
    block_id = "get_group_id(0)"
    uint64 = "ulong"
