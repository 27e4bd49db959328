# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin Cython layer over the C memory runtime (cxx/runtime/memory/api.h).

`NativeAllocator` owns one caching allocator; `bytes_tensor` hands out a
torch uint8 tensor whose storage is one allocator block, through a DLPack
capsule whose deleter frees the block (torch calls it when the storage
dies, on whichever thread). braze.runtime.memory is the Python API.
"""
from libc.stdint cimport uintptr_t
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New

cimport braze.runtime._memory_api as capi

from torch._C import _from_dlpack

from braze.errors import BrazeError

ALIGNMENT = capi.BRAZE_MEM_ALIGNMENT




class OutOfMemory(BrazeError):
    """The raw allocator refused a segment, even after the cache was emptied."""


class DeviceUnavailable(BrazeError):
    """No such device (no CUDA driver, no such ordinal)."""


cdef inline int _check(capi.braze_mem_status_t status) except -1:
    if status == NULL:
        return 0
    code = capi.braze_mem_status_code(status)
    message = capi.braze_mem_status_message(status).decode("utf-8", "replace")
    capi.braze_mem_status_free(status)
    if code == capi.BRAZE_MEM_OUT_OF_MEMORY:
        raise OutOfMemory(message)
    if code == capi.BRAZE_MEM_UNAVAILABLE:
        raise DeviceUnavailable(message)
    raise BrazeError(message)


# DLPack's legacy managed tensor, as far as the capsule destructor needs it.
ctypedef struct _DLManagedTensor:
    char dl_tensor[48]
    void* manager_ctx
    void (*deleter)(_DLManagedTensor*) noexcept nogil


cdef void _release_unused_capsule(object capsule) noexcept:
    # torch renames a capsule it consumed ("used_dltensor"); one it never
    # consumed still owns its block.
    if PyCapsule_IsValid(capsule, b"dltensor"):
        managed = <_DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
        managed.deleter(managed)


cdef class NativeAllocator:
    cdef capi.braze_mem_allocator_t* handle

    @staticmethod
    def host():
        cdef NativeAllocator self = NativeAllocator.__new__(NativeAllocator)
        _check(capi.braze_mem_create_host(&self.handle))
        return self

    @staticmethod
    def cuda(int ordinal):
        cdef NativeAllocator self = NativeAllocator.__new__(NativeAllocator)
        _check(capi.braze_mem_create_cuda(ordinal, &self.handle))
        return self

    @staticmethod
    def custom(uintptr_t allocate, uintptr_t release, uintptr_t context, str name):
        """`allocate`, `release`: addresses of C functions (api.h's
        braze_mem_raw_allocate_fn / braze_mem_raw_release_fn)."""
        cdef NativeAllocator self = NativeAllocator.__new__(NativeAllocator)
        cdef bytes encoded = name.encode()
        _check(capi.braze_mem_create_custom(<capi.braze_mem_raw_allocate_fn>allocate,
                                            <capi.braze_mem_raw_release_fn>release,
                                            <void*>context, encoded, &self.handle))
        return self

    def __dealloc__(self):
        if self.handle != NULL:
            capi.braze_mem_release(self.handle)

    def allocate(self, size_t size):
        """(block handle, address) of a new block of at least `size` bytes."""
        cdef void* block = NULL
        cdef void* address = NULL
        with nogil:
            status = capi.braze_mem_allocate(self.handle, size, &block, &address)
        _check(status)
        return <uintptr_t>block, <uintptr_t>address

    def free(self, uintptr_t block):
        _check(capi.braze_mem_free(self.handle, <void*>block))

    def bytes_tensor(self, size_t size):
        """A 1-D uint8 torch tensor of `size` bytes on the allocator's
        device, its storage one block."""
        cdef void* managed = NULL
        _check(capi.braze_mem_allocate_dlpack(self.handle, size, &managed))
        return _from_dlpack(PyCapsule_New(managed, b"dltensor", _release_unused_capsule))

    def stats(self) -> dict:
        cdef capi.braze_mem_stats_t s
        _check(capi.braze_mem_stats(self.handle, &s))
        return {"allocated_bytes": s.allocated_bytes, "requested_bytes": s.requested_bytes,
                "reserved_bytes": s.reserved_bytes, "peak_allocated_bytes": s.peak_allocated_bytes,
                "peak_reserved_bytes": s.peak_reserved_bytes, "thread_cached_bytes": s.thread_cached_bytes,
                "free_bytes": s.free_bytes, "largest_free_block": s.largest_free_block,
                "allocations": s.allocations, "frees": s.frees, "active_blocks": s.active_blocks,
                "thread_cache_hits": s.thread_cache_hits, "segments": s.segments,
                "raw_allocations": s.raw_allocations, "raw_releases": s.raw_releases,
                "fragmentation": s.fragmentation}

    def reset_peak(self):
        capi.braze_mem_reset_peak(self.handle)

    def empty_cache(self):
        with nogil:
            capi.braze_mem_empty_cache(self.handle)

    def snapshot_json(self) -> str:
        cdef char* json = NULL
        _check(capi.braze_mem_snapshot_json(self.handle, &json))
        try:
            return json.decode("utf-8")
        finally:
            capi.braze_mem_string_free(json)

    def device(self):
        cdef int ordinal = 0
        name = capi.braze_mem_device(self.handle, &ordinal).decode()
        return name, ordinal
