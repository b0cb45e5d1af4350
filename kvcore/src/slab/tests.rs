//! Tests of [`Slab`]: blocks against a map of what each should hold.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

/// Frees `h`, a live block of `s` that the test no longer uses.
fn free(s: &mut Slab, h: Handle) {
    // SAFETY: the tests free each handle they hold once, and use none after.
    unsafe { s.free(h) }
}

/// The offsets of a block of `size` bytes that the tests write: all of a small one; the
/// ends and every 61st byte of a large one.
fn offsets(size: usize) -> impl Iterator<Item = usize> {
    let head = size.min(256);
    let tail = size.saturating_sub(256).max(head);
    (0..head).chain((head..tail).step_by(61)).chain(tail..size)
}

/// Fills block `h` of `size` bytes with a pattern that depends on `seed`.
fn fill(s: &Slab, h: Handle, size: usize, seed: u8) {
    // SAFETY: the tests only pass live handles of `s`.
    let p = unsafe { s.ptr(h) }.as_ptr();
    for i in offsets(size) {
        // SAFETY: the block is live and at least `size` bytes.
        unsafe { p.add(i).write(seed.wrapping_add(i as u8)) };
    }
}

/// Whether block `h` still holds the pattern `fill` wrote.
fn holds(s: &Slab, h: Handle, size: usize, seed: u8) -> bool {
    // SAFETY: as in `fill`.
    let p = unsafe { s.ptr(h) }.as_ptr();
    // SAFETY: as in `fill`.
    offsets(size).all(|i| unsafe { p.add(i).read() } == seed.wrapping_add(i as u8))
}

#[test]
fn classes_round_to_the_grain_then_by_sixteenths() {
    let mut last = class_of(1);
    assert_eq!(last, (0, GRAIN));
    for size in 2..=SHARED_MAX {
        let (class, rounded) = class_of(size);
        assert!(
            rounded >= size && rounded - size < (size / 16).max(GRAIN),
            "{size}"
        );
        assert!(class < CLASSES && class >= last.0, "{size}");
        // One class per rounded size.
        assert_eq!(class == last.0, rounded == last.1, "{size}");
        last = (class, rounded);
    }
    assert_eq!(last.0, CLASSES - 1);
    let mut s = Slab::new();
    let sizes = [
        1, 3, 4, 5, 12, 88, 90, 92, 96, 1024, 1025, 2049, 4200, 65536,
    ];
    for size in sizes {
        let (h, p) = s.alloc(size).unwrap();
        assert_eq!(Slab::block_size(size), s.size(h));
        // SAFETY: `h` is live.
        assert_eq!(p, unsafe { s.ptr(h) });
        assert_eq!(p.as_ptr() as usize % GRAIN, 0);
        if size % 8 == 0 || size > FINE_MAX {
            assert_eq!(p.as_ptr() as usize % 8, 0, "size {size}");
        }
    }
    assert_eq!(
        sizes.map(Slab::block_size)[9..],
        [1024, 1088, 2176, 4352, 65536]
    );
    let (h, _) = s.alloc(65537).unwrap();
    assert_eq!(s.size(h), 65540);
    assert_eq!(s.check(), sizes.len() + 1);
}

#[test]
fn a_full_chunk_leaves_the_list_and_a_freed_slot_is_reused_first() {
    let mut s = Slab::new();
    let slots = CHUNK_BYTES / 92;
    let hs: Vec<Handle> = (0..slots).map(|_| s.alloc(92).unwrap().0).collect();
    assert_eq!(s.room[class_of(92).0], 0, "a full chunk has no room");
    assert!(hs.iter().all(|h| h.chunk() == hs[0].chunk()));
    let before = s.chunk_bytes();
    free(&mut s, hs[7]);
    s.check();
    let (again, _) = s.alloc(92).unwrap();
    assert_eq!(again, hs[7]);
    assert_eq!(s.chunk_bytes(), before);
    // The next one opens a second chunk.
    let (h, _) = s.alloc(92).unwrap();
    assert_ne!(h.chunk(), hs[0].chunk());
    assert_eq!(s.check(), slots + 1);
}

#[test]
fn emptied_chunks_go_back_but_one_stays_per_class() {
    let mut s = Slab::new();
    let hs: Vec<Handle> = (0..10_000).map(|_| s.alloc(92).unwrap().0).collect();
    let big = s.chunk_bytes();
    assert!(big >= 920_000);
    for h in hs {
        free(&mut s, h);
    }
    assert_eq!(s.check(), 0);
    assert_eq!(s.used_bytes(), 0);
    assert!(
        s.chunk_bytes() <= CHUNK_BYTES << CHUNK_GROWTH,
        "{}",
        s.chunk_bytes()
    );
    // Set and delete in a loop: no chunk allocated each time.
    let kept = s.chunk_bytes();
    for _ in 0..100 {
        let (h, _) = s.alloc(92).unwrap();
        free(&mut s, h);
        assert_eq!(s.chunk_bytes(), kept);
    }
    let (h, _) = s.alloc(70_000).unwrap();
    assert_eq!(s.chunk_bytes(), kept + 70_000);
    free(&mut s, h);
    assert_eq!(s.chunk_bytes(), kept);
}

#[test]
fn chunks_grow_with_their_class() {
    let mut s = Slab::new();
    let hs: Vec<Handle> = (0..200_000).map(|_| s.alloc(100).unwrap().0).collect();
    let chunks: std::collections::HashSet<usize> = hs.iter().map(|h| h.chunk()).collect();
    // 20 MB in chunks of up to 256 KiB, after 8 smaller ones.
    assert!(chunks.len() < 100, "{} chunks", chunks.len());
    assert_eq!(s.check(), 200_000);
    let slack = s.slack();
    assert!(slack < CHUNK_BYTES << CHUNK_GROWTH, "{slack}");
    // A handful of blocks take one small chunk.
    let mut t = Slab::new();
    for _ in 0..5 {
        t.alloc(100).unwrap();
    }
    assert_eq!(t.chunk_bytes(), CHUNK_BYTES / 100 * 100);
}

#[test]
fn handles_round_trip_through_u32() {
    let mut s = Slab::new();
    let (h, _) = s.alloc(40).unwrap();
    assert_eq!(Handle::from_u32(h.get()), Some(h));
    assert_eq!(Handle::from_u32(0), None);
    assert_eq!(Handle::of(MAX_CHUNKS - 1, MAX_SLOTS - 1).get(), u32::MAX);
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Free(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop_oneof![1usize..130, 1usize..5000, 65_000usize..66_000].prop_map(Op::Alloc),
        2 => any::<usize>().prop_map(Op::Free),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every live block keeps what was written into it while others come and go, no two live
    /// blocks share a handle, and the bookkeeping agrees with the blocks.
    #[test]
    fn blocks_keep_their_bytes(ops in prop::collection::vec(op(), 1..600)) {
        let mut s = Slab::new();
        let mut live: HashMap<Handle, (usize, u8)> = HashMap::new();
        let mut order: Vec<Handle> = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Alloc(size) => {
                    let (h, _) = s.alloc(size).unwrap();
                    prop_assert!(s.size(h) >= size);
                    let seed = i as u8;
                    fill(&s, h, size, seed);
                    prop_assert!(live.insert(h, (size, seed)).is_none(), "handle given twice");
                    order.push(h);
                }
                Op::Free(k) if !order.is_empty() => {
                    let h = order.swap_remove(k % order.len());
                    let (size, seed) = live.remove(&h).unwrap();
                    prop_assert!(holds(&s, h, size, seed));
                    free(&mut s, h);
                }
                Op::Free(_) => {}
            }
        }
        prop_assert_eq!(s.check(), live.len());
        for (h, (size, seed)) in &live {
            prop_assert!(holds(&s, *h, *size, *seed));
        }
        for h in order {
            free(&mut s, h);
        }
        prop_assert_eq!(s.check(), 0);
    }
}
