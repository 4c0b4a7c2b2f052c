//! Handing freed memory back to the system.
//!
//! glibc's allocator keeps what a program frees in its heaps for later use, and returns only
//! the free space at a heap's very end. The weight blocks the decoder releases after loading
//! lie between the tiles candle keeps, so without help they stay resident: about 490 MB for
//! Qwen2.5-1.5B (measured: 2,272 MiB resident after loading, 1,786 MiB with the pages
//! returned). `malloc_trim` returns every whole free page of every heap.
//!
//! The `guidepost` binary allocates through jemalloc (feature `jemalloc`), which keeps freed
//! pages for ten seconds before it returns them, a little at a time. While the model loads,
//! the blocks of one layer are released as the next layer's tiles are made, so those pages
//! added up: the server's resident memory peaked while it loaded, above anything a
//! conversation later reached. With the feature, every arena's unused pages are returned at
//! once: after each layer's blocks are released and after each answer.

/// Returns the allocators' free pages to the system (glibc's where it is the C library,
/// jemalloc's with the `jemalloc` feature).
pub(crate) fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    calls::trim();
    #[cfg(feature = "jemalloc")]
    {
        let status = calls::purge_jemalloc();
        if status != 0 {
            tracing::debug!(status, "jemalloc did not purge its arenas");
        }
    }
}

/// The allocators' own calls, the only unsafe code of the crate.
#[allow(unsafe_code)]
mod calls {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub(super) fn trim() {
        // SAFETY: malloc_trim takes no pointers and only walks the allocator's own free
        // lists, under the allocator's locks; it is safe to call from any thread at any time.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// `arena.<i>.purge` with `MALLCTL_ARENAS_ALL` (4096): every arena's unused dirty pages
    /// go back to the system now. Returns mallctl's status (0 when done).
    #[cfg(feature = "jemalloc")]
    pub(super) fn purge_jemalloc() -> i32 {
        const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
        // SAFETY: the name is a NUL-terminated string that outlives the call; a purge reads
        // and writes no value, so the old- and new-value pointers are null with zero
        // lengths, as jemalloc's documentation gives for void controls. It takes the arenas'
        // own locks.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                PURGE_ALL.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        }
    }
}

#[cfg(all(test, feature = "jemalloc"))]
mod tests {
    #[test]
    fn jemalloc_takes_the_purge() {
        // A wrong control name or a missing arena would give a status other than 0.
        assert_eq!(super::calls::purge_jemalloc(), 0);
    }
}
