//! Members of large sorted sets, allocated once and shared by the hash table and the B+tree.
//!
//! A [`Member`] owns one heap block laid out as `[score: f64][link: Option<MemberRef>][len:
//! u32][bytes]`, addressed by a thin (8-byte) pointer. The B+tree's entries own the members;
//! the hash table is a progressive-rehash [`crate::dict::Dict`] of [`MemberRef`]s, plain copies
//! of the same pointers, chained through each block's link word. So a member's bytes exist
//! once, the table costs a bucket pointer and a link per member, no ZADD pays for a whole-table
//! resize, and a table lookup reads the score from the block without touching the tree. The alternative with no unsafe code (an `Arc<[u8]>` in both, the score beside it in
//! the table) measured 131 bytes per member on a 1M-member set against Redis's 110; this layout
//! is what brings us under Redis (see `kvcore/tests/zset_memory.rs`).
//!
//! Invariant kept by [`super::Big`]: every `MemberRef` in the table points to a block owned by
//! a `Member` in the tree of the same set. Members leave the table before the tree drops them,
//! and a member's block never moves while it is in the set (the tree moves the owning pointer,
//! not the block).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Offset of the link word.
const LINK: usize = 8;
/// Offset of the length.
const LEN: usize = 16;
const HEADER: usize = 20;

// The link word holds an `Option<MemberRef>`: a nullable pointer.
const _: () = assert!(std::mem::size_of::<Option<MemberRef>>() == 8);

/// An owned member block: score, length and bytes behind one thin pointer.
pub struct Member {
    ptr: NonNull<u8>,
}

// SAFETY: a `Member` uniquely owns its block (like a `Box`), and nothing in it is shared or
// interior-mutable, so moving it to or sharing it with another thread is as safe as a `Box<[u8]>`.
unsafe impl Send for Member {}
// SAFETY: see `Send`; `&Member` only allows reads.
unsafe impl Sync for Member {}

fn layout(len: usize) -> Layout {
    // `len` fits in a u32 (checked in `new`), so the size is far below isize::MAX and this
    // cannot fail; a wrong layout would be unsound, so there is no fallback.
    Layout::from_size_align(HEADER + len, 8).expect("member block layout")
}

impl Member {
    /// Allocates a block holding `bytes` and `score`.
    pub fn new(bytes: &[u8], score: f64) -> Member {
        assert!(bytes.len() <= u32::MAX as usize, "member too long");
        let l = layout(bytes.len());
        // SAFETY: the layout has a non-zero size (at least the header).
        let raw = unsafe { alloc(l) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(l)
        };
        // SAFETY: the block is `HEADER + len` bytes, 8-aligned: the score fits at offset 0
        // (aligned), the link at 8 (aligned), the length at 16 (4-aligned), and the bytes at 20.
        unsafe {
            ptr.as_ptr().cast::<f64>().write(score);
            ptr.as_ptr()
                .add(LINK)
                .cast::<Option<MemberRef>>()
                .write(None);
            ptr.as_ptr()
                .add(LEN)
                .cast::<u32>()
                .write(bytes.len() as u32);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(HEADER), bytes.len());
        }
        Member { ptr }
    }

    /// A non-owning copy of the pointer, for the hash table.
    pub fn as_ref(&self) -> MemberRef {
        MemberRef { ptr: self.ptr }
    }

    /// The member bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `self` owns a live block, so the reference is valid for `&self`'s lifetime.
        unsafe { self.as_ref().bytes() }
    }

    /// The score stored in the block.
    pub fn score(&self) -> f64 {
        // SAFETY: as in `bytes`.
        unsafe { self.as_ref().score() }
    }

    /// Changes the score stored in the block.
    pub fn set_score(&mut self, score: f64) {
        // SAFETY: `&mut self` owns the block exclusively; offset 0 holds the aligned score.
        unsafe { self.ptr.as_ptr().cast::<f64>().write(score) }
    }

    /// Heap bytes of the block.
    pub fn block_bytes(&self) -> usize {
        HEADER + self.bytes().len()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let len = self.bytes().len();
        // SAFETY: the block was allocated in `new` with `layout(len)` for this same length and
        // is freed once, here, by its only owner.
        unsafe { dealloc(self.ptr.as_ptr(), layout(len)) }
    }
}

impl Clone for Member {
    fn clone(&self) -> Member {
        Member::new(self.bytes(), self.score())
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}@{}",
            String::from_utf8_lossy(self.bytes()),
            self.score()
        )
    }
}

/// A non-owning pointer to a [`Member`]'s block, held by the hash table.
#[derive(Clone, Copy, Debug)]
pub struct MemberRef {
    ptr: NonNull<u8>,
}

// SAFETY: a `MemberRef` is only dereferenced through its set, under the set's borrow; it is as
// thread-safe as the `Member` it points to.
unsafe impl Send for MemberRef {}
// SAFETY: see `Send`.
unsafe impl Sync for MemberRef {}

impl MemberRef {
    /// The member bytes.
    ///
    /// # Safety
    /// The `Member` this points to must be alive for `'a`.
    pub unsafe fn bytes<'a>(self) -> &'a [u8] {
        // SAFETY: the caller guarantees the block is alive; offset 16 holds the length written
        // in `Member::new`, and that many bytes follow the header.
        unsafe {
            let len = self.ptr.as_ptr().add(LEN).cast::<u32>().read() as usize;
            std::slice::from_raw_parts(self.ptr.as_ptr().add(HEADER), len)
        }
    }

    /// The score in the block.
    ///
    /// # Safety
    /// The `Member` this points to must be alive.
    pub unsafe fn score(self) -> f64 {
        // SAFETY: the caller guarantees the block is alive; offset 0 holds the aligned score.
        unsafe { self.ptr.as_ptr().cast::<f64>().read() }
    }

    /// Whether this points to `m`'s block.
    pub fn is(self, m: &Member) -> bool {
        self.ptr == m.ptr
    }
}

// SAFETY: the link word is at offset 8 of every block (8-aligned), holding an
// `Option<MemberRef>` written `None` in `Member::new`; a reference is in a table only while the
// tree of the same set owns its block (module docs), each member is in its set's table once,
// and nothing else writes the word.
unsafe impl crate::dict::WordLink for MemberRef {
    #[inline]
    fn word_key(&self) -> &[u8] {
        // SAFETY: the block is live while the reference is in its table (see above).
        unsafe { self.bytes() }
    }
    #[inline]
    fn block(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    #[inline]
    fn word(&self) -> *mut Option<MemberRef> {
        // Only the address is computed: offset 8 of a block of at least `HEADER` bytes.
        self.ptr
            .as_ptr()
            .wrapping_add(LINK)
            .cast::<Option<MemberRef>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_roundtrip() {
        for len in [0usize, 1, 7, 8, 100] {
            let bytes: Vec<u8> = (0..len as u8).collect();
            let mut m = Member::new(&bytes, -1.5);
            assert_eq!(m.bytes(), &bytes[..]);
            assert_eq!(m.score(), -1.5);
            m.set_score(f64::INFINITY);
            let r = m.as_ref();
            // SAFETY: `m` is alive.
            unsafe {
                assert_eq!(r.score(), f64::INFINITY);
                assert_eq!(r.bytes(), &bytes[..]);
            }
            let c = m.clone();
            assert!(!r.is(&c) && r.is(&m));
            assert_eq!(c.bytes(), m.bytes());
        }
    }
}
