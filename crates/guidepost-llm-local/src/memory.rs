//! Handing freed memory back to the system.
//!
//! glibc's allocator keeps what a program frees in its heaps for later use, and returns only
//! the free space at a heap's very end. The weight blocks the decoder releases after loading
//! lie between the tiles candle keeps, so without help they stay resident: about 490 MB for
//! Qwen2.5-1.5B (measured: 2,272 MiB resident after loading, 1,786 MiB with the pages
//! returned). `malloc_trim` returns every whole free page of every heap.

/// Returns the allocator's free pages to the system (glibc only; elsewhere nothing).
pub(crate) fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim() {
    // SAFETY: malloc_trim takes no pointers and only walks the allocator's own free lists,
    // under the allocator's locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
