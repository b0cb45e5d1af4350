use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Push(bool, Vec<Vec<u8>>),
    Pop(bool, usize),
    Set(i64, Vec<u8>),
    Trim(i64, i64),
    Remove(i64, Vec<u8>),
    Insert(Vec<u8>, Vec<u8>, bool),
    /// `count` distinct strings of `width` bytes: enough to fill nodes of one width.
    Fill(bool, usize, usize),
}

fn elem() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u8..6).prop_map(|i| vec![b'a' + i]),
        2 => (-300i64..300).prop_map(|i| i.to_string().into_bytes()),
        1 => (1usize..120).prop_map(|n| vec![b'x'; n]),
        1 => (4000usize..9000).prop_map(|n| vec![b'L'; n]),
        3 => (0u8..4).prop_map(|i| format!("v{i:015}").into_bytes()),
        1 => (0u8..4).prop_map(|i| format!("w{i:014}").into_bytes()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), proptest::collection::vec(elem(), 1..6)).prop_map(|(f, v)| Op::Push(f, v)),
        2 => (any::<bool>(), 0usize..5).prop_map(|(f, n)| Op::Pop(f, n)),
        1 => (-20i64..20, elem()).prop_map(|(i, v)| Op::Set(i, v)),
        1 => (-20i64..20, -20i64..20).prop_map(|(a, b)| Op::Trim(a, b)),
        1 => (-3i64..3, elem()).prop_map(|(c, v)| Op::Remove(c, v)),
        1 => (elem(), elem(), any::<bool>()).prop_map(|(p, v, b)| Op::Insert(p, v, b)),
        1 => (any::<bool>(), prop_oneof![Just(2usize), Just(16), Just(100)], 1usize..400)
            .prop_map(|(f, w, n)| Op::Fill(f, w, n)),
    ]
}

/// LTRIM's index arithmetic, on the model.
fn clamp_trim(len: usize, start: i64, end: i64) -> (usize, usize) {
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if end < 0 { len + end } else { end.min(len - 1) };
    if s > e || s >= len {
        (1, 0)
    } else {
        (s as usize, e as usize)
    }
}

/// A node (or a listpack written for one) over the limit holds one element (a large one, or
/// one a LSET grew).
fn assert_within_limit(limits: Limits, bytes: usize, len: usize) {
    assert!(
        len == 1 || !limits.exceeds(bytes, len) || bytes <= 9000 + 2 * ENTRY_OVERHEAD,
        "node of {bytes} bytes, {len} entries"
    );
}

fn check_nodes(l: &List, limits: Limits) {
    if let List::Quick(q) = l {
        assert_eq!(q.len, q.nodes.iter().map(Node::len).sum::<usize>());
        assert!(q.nodes.iter().all(|n| !n.is_empty()), "empty node");
        for n in &q.nodes {
            assert_within_limit(limits, n.byte_len(), n.len());
            if let Node::Fixed(_) = n {
                // Never over the limit, and strings of one width that a listpack keeps as
                // strings.
                assert!(!limits.exceeds(n.byte_len(), n.len()));
                let widths: Vec<usize> = n
                    .view()
                    .iter()
                    .map(|e| match e {
                        Entry::Str(s) if !crate::listpack::packs_as_int(s) => s.len(),
                        other => panic!("{other:?} in a fixed node"),
                    })
                    .collect();
                assert!(widths.windows(2).all(|p| p[0] == p[1]), "{widths:?}");
            }
        }
    }
    // What a snapshot writes: the same elements, in listpacks within the limit.
    let packs = l.rdb_nodes(limits);
    let written: Vec<Vec<u8>> = packs
        .iter()
        .flat_map(|(_, p)| p.iter().map(|e| e.to_vec()))
        .collect();
    assert_eq!(written, l.to_vec());
    for (plain, p) in &packs {
        assert!(!p.is_empty() || l.is_empty());
        assert!(!plain || p.len() == 1);
        assert_within_limit(limits, p.byte_len(), p.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn behaves_like_a_vecdeque(fill in prop_oneof![Just(-1i64), Just(-2), Just(2), Just(3), Just(5)], ops in proptest::collection::vec(op(), 1..80)) {
        let limits = Limits { fill, ..Limits::default() };
        let mut l = List::default();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        for op in ops {
            match op {
                Op::Push(front, items) => {
                    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
                    l.push(limits, &refs, front);
                    for it in items {
                        if front { m.push_front(it) } else { m.push_back(it) }
                    }
                }
                Op::Pop(front, n) => {
                    let got = l.pop(limits, front, n);
                    let want: Vec<Vec<u8>> = (0..n.min(m.len()))
                        .filter_map(|_| if front { m.pop_front() } else { m.pop_back() })
                        .collect();
                    prop_assert_eq!(got, want);
                }
                Op::Set(i, v) => {
                    let len = m.len() as i64;
                    let idx = if i < 0 { len + i } else { i };
                    let ok = (0..len).contains(&idx);
                    prop_assert_eq!(l.set(limits, i, &v), ok);
                    if ok { m[idx as usize] = v; }
                }
                Op::Trim(a, b) => {
                    if !m.is_empty() {
                        let (s, e) = clamp_trim(m.len(), a, b);
                        l.trim(limits, s, e);
                        if s > e { m.clear(); } else {
                            m = m.iter().skip(s).take(e - s + 1).cloned().collect();
                        }
                    }
                }
                Op::Remove(c, v) => {
                    let got = l.remove(limits, &v, c);
                    let max = if c == 0 { usize::MAX } else { c.unsigned_abs() as usize };
                    let mut removed = 0;
                    if c >= 0 {
                        let mut i = 0;
                        while i < m.len() { if removed < max && m[i] == v { m.remove(i); removed += 1; } else { i += 1; } }
                    } else {
                        let mut i = m.len();
                        while i > 0 { i -= 1; if removed < max && m[i] == v { m.remove(i); removed += 1; } }
                    }
                    prop_assert_eq!(got, removed);
                }
                Op::Fill(front, width, count) => {
                    let items: Vec<Vec<u8>> = (0..count)
                        .map(|i| format!("f{i:0w$}", w = width - 1).into_bytes())
                        .collect();
                    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
                    l.push(limits, &refs, front);
                    for it in items {
                        if front { m.push_front(it) } else { m.push_back(it) }
                    }
                }
                Op::Insert(p, v, before) => {
                    let found = m.iter().position(|x| *x == p);
                    prop_assert_eq!(l.insert(limits, &p, &v, before), found.is_some());
                    if let Some(i) = found { m.insert(if before { i } else { i + 1 }, v); }
                }
            }
            prop_assert_eq!(l.len(), m.len());
            prop_assert_eq!(l.to_vec(), m.iter().cloned().collect::<Vec<_>>());
            let mut back: Vec<Vec<u8>> = l.iter().rev().map(|e| e.to_vec()).collect();
            back.reverse();
            prop_assert_eq!(&back, &l.to_vec());
            // Every index of a short list; a spread of them of a long one (each get walks).
            for (i, v) in m.iter().enumerate().step_by(1 + m.len() / 64) {
                prop_assert_eq!(l.get(i as i64), Some(v.clone()));
                prop_assert_eq!(l.get(i as i64 - m.len() as i64), Some(v.clone()));
            }
            prop_assert_eq!(l.get(m.len() as i64), None);
            if !m.is_empty() {
                let (s, e) = (m.len() / 3, m.len() - 1);
                let mut got = Vec::new();
                l.range(s, e, |x| got.push(x.to_vec()));
                prop_assert_eq!(got, m.iter().skip(s).cloned().collect::<Vec<_>>());
            }
            check_nodes(&l, limits);
            // A small list is a listpack again once it shrank under half the limit.
            if m.len() <= 1 && m.iter().all(|x| x.len() < 100) {
                prop_assert_eq!(l.encoding(), "listpack");
            }
        }
    }
}

#[test]
fn converts_at_the_limit_and_back_under_half() {
    let limits = Limits {
        fill: 4,
        ..Limits::default()
    };
    let mut l = List::default();
    l.push(limits, &[b"a", b"b", b"c", b"d"], false);
    assert_eq!(l.encoding(), "listpack");
    l.push(limits, &[b"e"], false);
    assert_eq!(l.encoding(), "quicklist");
    // Nodes [a b c d] [e]: only a list of one node may turn back into a listpack, and only
    // at half the limit or less.
    l.pop(limits, true, 3);
    assert_eq!(l.encoding(), "quicklist");
    l.pop(limits, true, 1);
    assert_eq!(l.encoding(), "listpack");
    assert_eq!(l.to_vec(), vec![b"e".to_vec()]);
    let mut l = List::default();
    l.push(limits, &[b"a", b"b", b"c", b"d", b"e"], false);
    assert_eq!(l.encoding(), "quicklist");
    l.pop(limits, false, 2);
    // One node [a b c]: above half of 4.
    assert_eq!(l.encoding(), "quicklist");
    l.pop(limits, false, 1);
    assert_eq!(l.encoding(), "listpack");
    // Byte limits: -1 is 4 KiB per node.
    let limits = Limits {
        fill: -1,
        ..Limits::default()
    };
    let mut l = List::default();
    let v = vec![b'v'; 1000];
    for _ in 0..4 {
        l.push(limits, &[&v], false);
    }
    assert_eq!(l.encoding(), "listpack");
    l.push(limits, &[&v], false);
    assert_eq!(l.encoding(), "quicklist");
    // A single element over the node limit gets its own node.
    let big = vec![b'B'; 5000];
    l.push(limits, &[&big], true);
    if let List::Quick(q) = &l {
        assert_eq!(q.nodes.front().map(Node::len), Some(1));
    }
}

#[test]
fn a_long_list_gives_node_room_back_as_it_empties() {
    let limits = Limits::default();
    let mut l = List::default();
    for i in 0..200_000 {
        l.push(limits, &[format!("v{i:015}").as_bytes()], false);
    }
    let cap = |l: &List| match l {
        List::Quick(q) => q.nodes.capacity(),
        List::Pack(_) => 0,
    };
    assert!(cap(&l) >= 256, "{}", cap(&l));
    let before = l.heap_bytes();
    l.pop(limits, true, 199_000);
    assert!(cap(&l) <= 64, "{} node slots for 1000 elements", cap(&l));
    // 1000 16-byte elements, the room of the two end nodes (up to the 8 KiB limit each) and
    // the node array.
    let most = 1000 * 16 + 2 * 8192 + 64 * std::mem::size_of::<Node>() + 64;
    assert!(
        l.heap_bytes() <= most,
        "{} of {before} bytes left",
        l.heap_bytes()
    );
    l.trim(limits, 0, 9);
    assert_eq!(l.to_vec()[0], b"v000000000199000".to_vec());
    assert_eq!(l.len(), 10);
}
