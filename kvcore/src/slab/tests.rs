//! Tests of [`Slab`]: blocks against a map of what each should hold.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

/// Fills block `h` of `size` bytes with a pattern that depends on `seed`.
fn fill(s: &Slab, h: Handle, size: usize, seed: u8) {
    let p = s.ptr(h).as_ptr();
    for i in 0..size {
        // SAFETY: the block is live and at least `size` bytes.
        unsafe { p.add(i).write(seed.wrapping_add(i as u8)) };
    }
}

/// Whether block `h` still holds the pattern `fill` wrote.
fn holds(s: &Slab, h: Handle, size: usize, seed: u8) -> bool {
    let p = s.ptr(h).as_ptr();
    // SAFETY: as in `fill`.
    (0..size).all(|i| unsafe { p.add(i).read() } == seed.wrapping_add(i as u8))
}

#[test]
fn classes_round_to_the_grain_and_align_by_size() {
    let mut s = Slab::new();
    for size in [1, 3, 4, 5, 12, 88, 90, 92, 96, 2047, 2048] {
        let (h, p) = s.alloc(size).unwrap();
        assert_eq!(s.size(h), size.next_multiple_of(GRAIN));
        assert_eq!(Slab::block_size(size), s.size(h));
        assert_eq!(p, s.ptr(h));
        assert_eq!(p.as_ptr() as usize % GRAIN, 0);
        if size % 8 == 0 {
            assert_eq!(p.as_ptr() as usize % 8, 0, "size {size}");
        }
    }
    let (h, _) = s.alloc(5000).unwrap();
    assert_eq!(s.size(h), 5000);
    assert_eq!(s.check(), 12);
}

#[test]
fn a_full_chunk_leaves_the_list_and_a_freed_slot_is_reused_first() {
    let mut s = Slab::new();
    let slots = CHUNK_BYTES / 92;
    let hs: Vec<Handle> = (0..slots).map(|_| s.alloc(92).unwrap().0).collect();
    assert_eq!(s.room[class_of(92).0], 0, "a full chunk has no room");
    assert!(hs.iter().all(|h| h.chunk() == hs[0].chunk()));
    let before = s.chunk_bytes();
    s.free(hs[7]);
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
        s.free(h);
    }
    assert_eq!(s.check(), 0);
    assert_eq!(s.used_bytes(), 0);
    assert!(s.chunk_bytes() <= CHUNK_BYTES << 4, "{}", s.chunk_bytes());
    // Set and delete in a loop: no chunk allocated each time.
    let kept = s.chunk_bytes();
    for _ in 0..100 {
        let (h, _) = s.alloc(92).unwrap();
        s.free(h);
        assert_eq!(s.chunk_bytes(), kept);
    }
    let (h, _) = s.alloc(3000).unwrap();
    assert_eq!(s.chunk_bytes(), kept + 3000);
    s.free(h);
    assert_eq!(s.chunk_bytes(), kept);
}

#[test]
fn chunks_grow_with_their_class() {
    let mut s = Slab::new();
    let hs: Vec<Handle> = (0..200_000).map(|_| s.alloc(100).unwrap().0).collect();
    let chunks: std::collections::HashSet<usize> = hs.iter().map(|h| h.chunk()).collect();
    // 20 MB in chunks of up to 256 KiB: well under what 16 KiB chunks would take.
    assert!(chunks.len() < 200, "{} chunks", chunks.len());
    assert_eq!(s.check(), 200_000);
    let slack = s.slack();
    assert!(slack < CHUNK_BYTES << 4, "{slack}");
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
        3 => prop_oneof![1usize..130, 1usize..2100, 2040usize..2200].prop_map(Op::Alloc),
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
                    s.free(h);
                }
                Op::Free(_) => {}
            }
        }
        prop_assert_eq!(s.check(), live.len());
        for (h, (size, seed)) in &live {
            prop_assert!(holds(&s, *h, *size, *seed));
        }
        for h in order {
            s.free(h);
        }
        prop_assert_eq!(s.check(), 0);
    }
}
