# Declarations of cxx/runtime/memory/api.h for the Cython wrapper.
from libc.stdint cimport uint64_t

cdef extern from "api.h" nogil:
    ctypedef enum braze_mem_code_t:
        BRAZE_MEM_OK
        BRAZE_MEM_INVALID_ARGUMENT
        BRAZE_MEM_OUT_OF_MEMORY
        BRAZE_MEM_UNAVAILABLE

    ctypedef struct braze_mem_status_s
    ctypedef braze_mem_status_s* braze_mem_status_t
    braze_mem_code_t braze_mem_status_code(braze_mem_status_t status)
    const char* braze_mem_status_message(braze_mem_status_t status)
    void braze_mem_status_free(braze_mem_status_t status)

    int BRAZE_MEM_ALIGNMENT

    ctypedef struct braze_mem_allocator_t
    ctypedef void* (*braze_mem_raw_allocate_fn)(size_t size, void* context)
    ctypedef void (*braze_mem_raw_release_fn)(void* address, size_t size, void* context)
    braze_mem_status_t braze_mem_create_host(braze_mem_allocator_t** out)
    braze_mem_status_t braze_mem_create_cuda(int ordinal, braze_mem_allocator_t** out)
    braze_mem_status_t braze_mem_create_custom(braze_mem_raw_allocate_fn allocate, braze_mem_raw_release_fn release,
                                               void* context, const char* name, braze_mem_allocator_t** out)
    void braze_mem_release(braze_mem_allocator_t* allocator)
    braze_mem_status_t braze_mem_allocate(braze_mem_allocator_t* allocator, size_t size, void** block,
                                          void** address)
    braze_mem_status_t braze_mem_free(braze_mem_allocator_t* allocator, void* block)
    braze_mem_status_t braze_mem_allocate_dlpack(braze_mem_allocator_t* allocator, size_t size,
                                                 void** managed_tensor)

    ctypedef struct braze_mem_stats_t:
        uint64_t allocated_bytes
        uint64_t requested_bytes
        uint64_t reserved_bytes
        uint64_t peak_allocated_bytes
        uint64_t peak_reserved_bytes
        uint64_t thread_cached_bytes
        uint64_t free_bytes
        uint64_t largest_free_block
        uint64_t allocations
        uint64_t frees
        uint64_t active_blocks
        uint64_t thread_cache_hits
        uint64_t segments
        uint64_t raw_allocations
        uint64_t raw_releases
        double fragmentation

    braze_mem_status_t braze_mem_stats(braze_mem_allocator_t* allocator, braze_mem_stats_t* out)
    void braze_mem_reset_peak(braze_mem_allocator_t* allocator)
    void braze_mem_empty_cache(braze_mem_allocator_t* allocator)
    braze_mem_status_t braze_mem_snapshot_json(braze_mem_allocator_t* allocator, char** json)
    void braze_mem_string_free(char* string)
    const char* braze_mem_device(braze_mem_allocator_t* allocator, int* ordinal)
