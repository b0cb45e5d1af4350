//! Redis's listpack: one contiguous buffer of small strings and integers, walkable both ways.
//!
//! Small hashes, small sets of strings and the nodes of lists are listpacks. The bytes are
//! exactly Redis's format (`listpack.c`), so a snapshot or DUMP payload carries a listpack as
//! the blob it is, and a blob read from Redis's files is used as it is once validated.
//!
//! # Layout
//!
//! ```text
//! <total-bytes u32 LE> <count u16 LE> <entry> ... <entry> <0xFF>
//! entry = <encoding + data> <backlen>
//! ```
//!
//! `count` is the number of entries, or 65535 when there are at least that many (then it is
//! counted by a walk). Encodings (the first byte's high bits):
//!
//! | first byte  | what follows                 | holds                    |
//! |-------------|------------------------------|--------------------------|
//! | `0xxxxxxx`  | —                            | integer 0..=127          |
//! | `10xxxxxx`  | `len` bytes                  | string, `len` < 64       |
//! | `110xxxxx`  | 1 byte                       | 13-bit signed integer    |
//! | `1110xxxx`  | 1 byte of length, `len` bytes| string, `len` < 4096     |
//! | `11110000`  | u32 LE length, `len` bytes   | longer string            |
//! | `11110001`  | 2 bytes                      | i16                      |
//! | `11110010`  | 3 bytes                      | 24-bit signed integer    |
//! | `11110011`  | 4 bytes                      | i32                      |
//! | `11110100`  | 8 bytes                      | i64                      |
//! | `11111111`  | —                            | end of the listpack      |
//!
//! `backlen` is the size of `encoding + data` in 1 to 5 bytes, written so that it can be read
//! from its last byte backwards: each byte carries 7 bits, the byte nearest the entry the most
//! significant ones, and every byte but that one has its high bit set.
//!
//! A string that is the canonical decimal form of an `i64` (what `string2ll` accepts) is
//! stored as an integer, as Redis does; reading gives the same bytes back.
//!
//! # Forward-only listpacks
//!
//! [`ForwardListpack`] (`Listpack<false>`) is the same format without the backlens: a small
//! hash's encoding, which is only ever walked forward (a lookup scans its fields; HGETALL and
//! HSCAN walk it in order). Without them a hash of ten 6-byte fields and 16-byte values takes
//! 247 bytes instead of 267, a 256-byte block instead of a 320-byte one. Stepping back walks
//! from the first entry. [`ForwardListpack::to_redis`] gives Redis's form for a snapshot or a
//! DUMP payload, and [`Listpack::forward_only`] the other way.
//!
//! # Positions
//!
//! A [`Pos`] is the byte offset of an entry. Positions are invalidated by any change before or
//! at them; the mutating calls return the positions their callers need next.
//!
//! # Costs
//!
//! Reads walk entries (`O(n)` to find by index or value, `O(1)` to step). An insert or delete
//! moves the bytes after it and reallocates the buffer to its exact new size, as Redis does:
//! listpacks are kept to a few kilobytes by the encodings' thresholds.
//!
//! The one exception is a quicklist's end node, where every push and pop lands: it may keep
//! room past its EOF byte ([`Listpack::push_in_room`], [`Listpack::delete_in_room`]), grown by
//! half again at a time up to the node's limit, so that a push is a write and not an allocator
//! call (a `realloc` per push was 220 of the 2,500 instructions of an RPUSH, and one push in
//! six moved the node). The header's total length is the listpack's end; [`Listpack::trim`]
//! gives the room back when the node stops being an end.
//!
//! # Untrusted bytes
//!
//! Buffers built here are well formed by construction. A blob from outside goes through
//! [`Listpack::from_blob`], which walks it once and refuses anything malformed, so no read
//! can go out of bounds afterwards; the readers still use checked slicing and end a walk
//! instead of panicking.

use crate::num;

/// Byte offset of an entry in a listpack.
pub type Pos = usize;

const HEADER: usize = 6;
const EOF: u8 = 0xFF;
/// `count` when the entries must be counted.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One entry, as stored: an integer or a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A string stored as an integer (its canonical decimal form).
    Int(i64),
    /// A string.
    Str(&'a [u8]),
}

impl<'a> Entry<'a> {
    /// The entry's string bytes; integers are formatted into `buf`.
    pub fn bytes<'b>(&self, buf: &'b mut itoa::Buffer) -> &'b [u8]
    where
        'a: 'b,
    {
        match *self {
            Entry::Int(i) => num::fmt_i64(i, buf),
            Entry::Str(s) => s,
        }
    }

    /// The entry's string bytes, owned.
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes(&mut itoa::Buffer::new()).to_vec()
    }

    /// Whether the entry's string form is `b`.
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        match *self {
            Entry::Str(s) => s == b,
            Entry::Int(i) => num::fmt_i64(i, &mut itoa::Buffer::new()) == b,
        }
    }

    /// The length of the entry's string form.
    pub fn str_len(&self) -> usize {
        match *self {
            Entry::Str(s) => s.len(),
            Entry::Int(i) => num::fmt_i64(i, &mut itoa::Buffer::new()).len(),
        }
    }

    /// The entry as an integer, if its string form is one (canonical or not, as
    /// `string2ll` reads it: strings were stored as integers only when canonical).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Entry::Int(i) => Some(i),
            Entry::Str(s) => num::parse_i64(s),
        }
    }
}

/// A listpack (see the module docs). `BACK = false` is the forward-only form: the same bytes
/// without the backlens (see "Forward-only listpacks" in the module docs).
///
/// Equality compares the whole buffer, room included: a raw buffer (see
/// [`Listpack::from_raw`]) has no header to say where it ends. Lists compare their elements.
#[derive(Clone, PartialEq, Eq)]
pub struct Listpack<const BACK: bool = true> {
    /// The listpack, then (in a quicklist's end node only) zero or more bytes of room; the
    /// header's total length says where the listpack ends.
    buf: Box<[u8]>,
}

/// A listpack without backlens: a small hash's encoding.
pub type ForwardListpack = Listpack<false>;

impl<const BACK: bool> Default for Listpack<BACK> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const BACK: bool> std::fmt::Debug for Listpack<BACK> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|e| String::from_utf8_lossy(&e.to_vec()).into_owned()),
            )
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding one entry
// ---------------------------------------------------------------------------------------------

/// How a value will be written: an integer or a string.
enum Enc<'a> {
    Int(i64),
    Str(&'a [u8]),
}

fn classify(b: &[u8]) -> Enc<'_> {
    if b.len() <= 20 {
        if let Some(i) = num::parse_i64(b) {
            return Enc::Int(i);
        }
    }
    Enc::Str(b)
}

/// Size of `encoding + data`.
fn data_len(e: &Enc<'_>) -> usize {
    match *e {
        Enc::Int(i) => match i {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8_388_608..=8_388_607 => 4,
            -2_147_483_648..=2_147_483_647 => 5,
            _ => 9,
        },
        Enc::Str(s) if s.len() < 64 => 1 + s.len(),
        Enc::Str(s) if s.len() < 4096 => 2 + s.len(),
        Enc::Str(s) => 5 + s.len(),
    }
}

/// Bytes the backlen of an entry of `l` bytes takes.
fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Writes the whole entry (encoding, data, and the backlen when `back`) to `out`, which is
/// exactly its size.
fn write_entry(out: &mut [u8], e: &Enc<'_>, back: bool) {
    let l = data_len(e);
    let mut w = 0;
    let mut put = |bytes: &[u8]| {
        out[w..w + bytes.len()].copy_from_slice(bytes);
        w += bytes.len();
    };
    match *e {
        Enc::Int(i) => match l {
            1 => put(&[i as u8]),
            2 => {
                let u = (i as u64) & 0x1FFF;
                put(&[0xC0 | (u >> 8) as u8, u as u8]);
            }
            3 => {
                put(&[0xF1]);
                put(&(i as i16).to_le_bytes());
            }
            4 => {
                put(&[0xF2]);
                put(&(i as i32).to_le_bytes()[..3]);
            }
            5 => {
                put(&[0xF3]);
                put(&(i as i32).to_le_bytes());
            }
            _ => {
                put(&[0xF4]);
                put(&i.to_le_bytes());
            }
        },
        Enc::Str(s) => {
            let n = s.len();
            if n < 64 {
                put(&[0x80 | n as u8]);
            } else if n < 4096 {
                put(&[0xE0 | (n >> 8) as u8, n as u8]);
            } else {
                put(&[0xF0]);
                put(&(n as u32).to_le_bytes());
            }
            put(s);
        }
    }
    if back {
        write_backlen(&mut out[w..], l);
    }
}

/// Writes the backlen of an entry of `l` bytes (`encoding + data`) at the start of `out`;
/// returns its size. Most significant 7 bits first, every byte but the first with the high
/// bit.
fn write_backlen(out: &mut [u8], l: usize) -> usize {
    let bl = backlen_size(l);
    for (i, k) in (0..bl).rev().enumerate() {
        let bits = ((l >> (7 * k)) & 0x7F) as u8;
        out[i] = if k == bl - 1 { bits } else { bits | 0x80 };
    }
    bl
}

/// Size of a whole entry whose `encoding + data` takes `l` bytes.
#[inline]
fn whole(l: usize, back: bool) -> usize {
    if back {
        l + backlen_size(l)
    } else {
        l
    }
}

fn entry_size(e: &Enc<'_>, back: bool) -> usize {
    whole(data_len(e), back)
}

/// Whether a listpack stores `value` as an integer (its canonical decimal form).
pub(crate) fn packs_as_int(value: &[u8]) -> bool {
    matches!(classify(value), Enc::Int(_))
}

/// The bytes `value` takes as an entry of a (Redis-form) listpack, backlen included.
pub(crate) fn entry_len(value: &[u8]) -> usize {
    entry_size(&classify(value), true)
}

/// Bytes of a listpack's header and end byte, around its entries.
pub(crate) const FRAME: usize = HEADER + 1;

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes the entry at `p`: its value and the size of `encoding + data`. `None` if malformed
/// or at the end.
fn decode(buf: &[u8], p: usize) -> Option<(Entry<'_>, usize)> {
    let b0 = *buf.get(p)?;
    let byte = |i: usize| buf.get(p + i).copied();
    let sext = |u: u64, bits: u32| -> i64 {
        let shift = 64 - bits;
        ((u << shift) as i64) >> shift
    };
    let str_at = |start: usize, n: usize| -> Option<(Entry<'_>, usize)> {
        let s = buf.get(p + start..p.checked_add(start)?.checked_add(n)?)?;
        Some((Entry::Str(s), start + n))
    };
    if b0 & 0x80 == 0 {
        return Some((Entry::Int(i64::from(b0)), 1));
    }
    if b0 & 0xC0 == 0x80 {
        return str_at(1, usize::from(b0 & 0x3F));
    }
    if b0 & 0xE0 == 0xC0 {
        let u = (u64::from(b0 & 0x1F) << 8) | u64::from(byte(1)?);
        return Some((Entry::Int(sext(u, 13)), 2));
    }
    if b0 & 0xF0 == 0xE0 {
        return str_at(2, (usize::from(b0 & 0x0F) << 8) | usize::from(byte(1)?));
    }
    let le = |n: usize| -> Option<u64> {
        let s = buf.get(p + 1..p + 1 + n)?;
        Some(
            s.iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
        )
    };
    match b0 {
        0xF0 => str_at(5, le(4)? as usize),
        0xF1 => Some((Entry::Int(sext(le(2)?, 16)), 3)),
        0xF2 => Some((Entry::Int(sext(le(3)?, 24)), 4)),
        0xF3 => Some((Entry::Int(sext(le(4)?, 32)), 5)),
        0xF4 => Some((Entry::Int(le(8)? as i64), 9)),
        _ => None,
    }
}

/// The size of the whole entry before offset `end` (its backlen ends at `end - 1`).
fn back_size(buf: &[u8], end: usize) -> Option<usize> {
    let mut v = 0usize;
    let mut shift = 0;
    let mut i = end;
    loop {
        i = i.checked_sub(1)?;
        let b = *buf.get(i)?;
        v |= usize::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    Some(v + backlen_size(v))
}

impl<const BACK: bool> Listpack<BACK> {
    /// An empty listpack.
    pub fn new() -> Self {
        let mut buf = vec![0u8; HEADER + 1];
        buf[..4].copy_from_slice(&((HEADER + 1) as u32).to_le_bytes());
        buf[HEADER] = EOF;
        Listpack {
            buf: buf.into_boxed_slice(),
        }
    }

    /// A listpack of `items`, in order, built in one allocation.
    pub fn from_items<'a>(items: impl IntoIterator<Item = &'a [u8]> + Clone) -> Self {
        let mut total = HEADER + 1;
        let mut count = 0usize;
        for it in items.clone() {
            total += entry_size(&classify(it), BACK);
            count += 1;
        }
        let mut buf = vec![0u8; total];
        let mut p = HEADER;
        for it in items {
            let e = classify(it);
            let n = entry_size(&e, BACK);
            write_entry(&mut buf[p..p + n], &e, BACK);
            p += n;
        }
        buf[p] = EOF;
        let mut lp = Listpack {
            buf: buf.into_boxed_slice(),
        };
        lp.set_header(total, count);
        lp
    }

    /// Takes a listpack blob from outside (a snapshot, a DUMP payload) after checking every
    /// entry; `None` if it is malformed in any way.
    pub fn from_blob(blob: Box<[u8]>) -> Option<Self> {
        let total = u32::from_le_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        if total != blob.len() || total < HEADER + 1 || *blob.last()? != EOF {
            return None;
        }
        let lp = Listpack { buf: blob };
        let mut p = HEADER;
        let mut n = 0usize;
        while lp.buf.get(p) != Some(&EOF) {
            let (_, l) = decode(&lp.buf, p)?;
            let size = whole(l, BACK);
            if BACK && back_size(&lp.buf, p.checked_add(size)?)? != size {
                return None;
            }
            p += size;
            n += 1;
        }
        if p != total - 1 {
            return None;
        }
        let count = lp.header_count();
        if count != COUNT_UNKNOWN && usize::from(count) != n
            || count == COUNT_UNKNOWN && n < usize::from(COUNT_UNKNOWN)
        {
            return None;
        }
        Some(lp)
    }

    /// Wraps bytes that are not read as a listpack (a small set keeps an intset in the same
    /// slot, see [`crate::set`]); only `raw_bytes`, `into_raw`, `heap_bytes`, equality and
    /// cloning may be used on the result.
    pub(crate) fn from_raw(buf: Box<[u8]>) -> Self {
        Listpack { buf }
    }

    /// The buffer, given up.
    pub(crate) fn into_raw(self) -> Box<[u8]> {
        self.buf
    }

    /// The listpack's bytes (Redis's format when `BACK`).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.byte_len()]
    }

    /// The whole buffer, read as whatever it holds (see [`Listpack::from_raw`]).
    pub(crate) fn raw_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes the listpack occupies on the heap, room included.
    pub fn heap_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The listpack's length in bytes (Redis's `lpBytes`), room excluded: the header's total,
    /// where the EOF byte ends the listpack, and what node limits are measured by.
    #[inline]
    pub fn byte_len(&self) -> usize {
        u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize
    }

    #[inline]
    fn header_count(&self) -> u16 {
        u16::from_le_bytes([self.buf[4], self.buf[5]])
    }

    fn set_header(&mut self, total: usize, count: usize) {
        self.buf[..4].copy_from_slice(&(total as u32).to_le_bytes());
        let c = if count >= usize::from(COUNT_UNKNOWN) {
            COUNT_UNKNOWN
        } else {
            count as u16
        };
        self.buf[4..6].copy_from_slice(&c.to_le_bytes());
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        match self.header_count() {
            COUNT_UNKNOWN => self.count_slowly(),
            c => usize::from(c),
        }
    }

    /// The count of a listpack of 65535 entries or more, which its header does not hold.
    #[cold]
    fn count_slowly(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.buf.get(HEADER) == Some(&EOF)
    }

    /// Position of the first entry.
    pub fn first(&self) -> Option<Pos> {
        (!self.is_empty()).then_some(HEADER)
    }

    /// Position of the last entry.
    pub fn last(&self) -> Option<Pos> {
        self.prev_of(self.byte_len() - 1)
    }

    /// Position of the entry after `p`.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        let n = p + self.size_at(p)?;
        (self.buf.get(n) != Some(&EOF)).then_some(n)
    }

    /// Position of the entry before `p`.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        self.prev_of(p)
    }

    /// The entry that ends at `end`: read from its backlen, or found by a walk from the
    /// first entry in the forward-only form.
    fn prev_of(&self, end: usize) -> Option<Pos> {
        if end <= HEADER {
            return None;
        }
        if BACK {
            return end.checked_sub(back_size(&self.buf, end)?);
        }
        let mut p = HEADER;
        loop {
            let n = p + self.size_at(p)?;
            if n >= end {
                return (n == end).then_some(p);
            }
            p = n;
        }
    }

    /// Size of the whole entry at `p`.
    fn size_at(&self, p: Pos) -> Option<usize> {
        let (_, l) = decode(&self.buf, p)?;
        Some(whole(l, BACK))
    }

    /// The entry at `p` (a position this listpack gave out).
    pub fn get(&self, p: Pos) -> Entry<'_> {
        decode(&self.buf, p).map_or(Entry::Str(b""), |(e, _)| e)
    }

    /// Position of entry `index` (negative counts from the end: -1 is the last), walking from
    /// the nearer end (from the first in the forward-only form).
    pub fn seek(&self, index: i64) -> Option<Pos> {
        let len = self.len() as i64;
        let i = if index < 0 { len + index } else { index };
        if i < 0 || i >= len {
            return None;
        }
        if i <= len / 2 || !BACK {
            let mut p = self.first()?;
            for _ in 0..i {
                p = self.next(p)?;
            }
            Some(p)
        } else {
            let mut p = self.last()?;
            for _ in 0..(len - 1 - i) {
                p = self.prev(p)?;
            }
            Some(p)
        }
    }

    /// The entries from the first to the last (double-ended).
    pub fn iter(&self) -> Iter<'_, BACK> {
        Iter {
            lp: self,
            front: HEADER,
            back: self.byte_len() - 1,
        }
    }

    /// The entries from `p` on (double-ended; the back starts at the last entry).
    pub fn iter_from(&self, p: Pos) -> Iter<'_, BACK> {
        Iter {
            lp: self,
            front: p,
            back: self.byte_len() - 1,
        }
    }

    /// Position of the first entry at or after `from` whose bytes equal `value`, comparing
    /// only every `skip + 1`-th entry (Redis's `lpFind`: `skip = 1` looks at hash fields and
    /// skips their values).
    pub fn find(&self, from: Pos, value: &[u8], skip: usize) -> Option<Pos> {
        let target = classify(value);
        let mut p = from;
        let mut countdown = 0usize;
        while self.buf.get(p) != Some(&EOF) {
            let (e, l) = decode(&self.buf, p)?;
            if countdown == 0 {
                let hit = match (&target, e) {
                    (Enc::Int(a), Entry::Int(b)) => *a == b,
                    (Enc::Str(a), Entry::Str(b)) => *a == b,
                    _ => false,
                };
                if hit {
                    return Some(p);
                }
                countdown = skip;
            } else {
                countdown -= 1;
            }
            p += whole(l, BACK);
        }
        None
    }

    // -----------------------------------------------------------------------------------------
    // Changes
    // -----------------------------------------------------------------------------------------

    /// Replaces the `del` bytes at `at` by `ins`, resizing the buffer once, and fixes the
    /// header for `count` entries. The buffer is resized in place (a `realloc` to the exact
    /// new size, which the allocator serves without moving while the size stays within the
    /// block, or shrinks to no less than half of it): a push or pop on a list node moves the
    /// bytes after the change, not the whole node into a new allocation.
    ///
    /// With `in_room` (a quicklist's end node), a change that fits the buffer is made there
    /// and a shrink leaves its bytes as room: no allocator call. Otherwise the room is dropped.
    fn splice(&mut self, at: usize, del: usize, ins: &[Enc<'_>], count: usize, in_room: bool) {
        let add: usize = ins.iter().map(|e| entry_size(e, BACK)).sum();
        let old = self.byte_len();
        let total = old - del + add;
        if in_room && total <= self.buf.len() {
            self.buf.copy_within(at + del..old, at + add);
            let mut p = at;
            for e in ins {
                let n = entry_size(e, BACK);
                write_entry(&mut self.buf[p..p + n], e, BACK);
                p += n;
            }
            self.set_header(total, count);
            return;
        }
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        buf.truncate(old);
        if add > del {
            buf.reserve_exact(add - del);
            buf.resize(total, 0);
        }
        buf.copy_within(at + del..old, at + add);
        let mut p = at;
        for e in ins {
            let n = entry_size(e, BACK);
            write_entry(&mut buf[p..p + n], e, BACK);
            p += n;
        }
        buf.truncate(total);
        self.buf = buf.into_boxed_slice();
        self.set_header(total, count);
    }

    /// Appends `value` after the last entry.
    pub fn push_back(&mut self, value: &[u8]) {
        self.insert_at(self.byte_len() - 1, &[value]);
    }

    /// Prepends (`front`) or appends `value` in a quicklist's end node: into the node's room,
    /// which grows first when short, by half the node again but not past `cap` bytes (unless
    /// the entry alone needs more).
    pub(crate) fn push_in_room(&mut self, value: &[u8], front: bool, cap: usize) {
        let e = classify(value);
        let need = entry_size(&e, BACK);
        let size = self.byte_len();
        if self.buf.len() - size < need {
            let want = (size + need).max((size + size / 2).min(cap));
            let mut buf = std::mem::take(&mut self.buf).into_vec();
            buf.reserve_exact(want - buf.len());
            buf.resize(want, 0);
            self.buf = buf.into_boxed_slice();
        }
        let at = if front { HEADER } else { size - 1 };
        let count = self.len() + 1;
        self.splice(at, 0, &[e], count, true);
    }

    /// Gives up the room past the listpack (a node that stopped being a quicklist's end).
    pub(crate) fn trim(&mut self) {
        let size = self.byte_len();
        if self.buf.len() > size {
            let mut buf = std::mem::take(&mut self.buf).into_vec();
            buf.truncate(size);
            self.buf = buf.into_boxed_slice();
        }
    }

    /// Prepends `value` before the first entry.
    pub fn push_front(&mut self, value: &[u8]) {
        self.insert_at(HEADER, &[value]);
    }

    /// Inserts `values` in order before the entry at `p` (or at the end when `p` is the
    /// end-of-listpack offset, [`Listpack::end`]); returns the position of the first inserted
    /// entry.
    pub fn insert_at(&mut self, p: Pos, values: &[&[u8]]) -> Pos {
        let count = self.len() + values.len();
        let encs: smallvec::SmallVec<[Enc<'_>; 4]> = values.iter().map(|v| classify(v)).collect();
        self.splice(p, 0, &encs, count, false);
        p
    }

    /// The end-of-listpack offset: inserting there appends.
    pub fn end(&self) -> Pos {
        self.byte_len() - 1
    }

    /// Replaces the entry at `p` by `value`; returns `p` (the entry's new position).
    pub fn replace(&mut self, p: Pos, value: &[u8]) -> Pos {
        let del = self.size_at(p).unwrap_or(0);
        let count = self.len();
        self.splice(p, del, &[classify(value)], count, false);
        p
    }

    /// Deletes up to `n` entries starting at `p`; returns the position of the entry that
    /// followed them, if any.
    pub fn delete(&mut self, p: Pos, n: usize) -> Option<Pos> {
        self.delete_from(p, n, false)
    }

    /// [`Listpack::delete`] in a quicklist's end node: the bytes freed stay as room.
    pub(crate) fn delete_in_room(&mut self, p: Pos, n: usize) -> Option<Pos> {
        self.delete_from(p, n, true)
    }

    fn delete_from(&mut self, p: Pos, n: usize, in_room: bool) -> Option<Pos> {
        let mut end = p;
        let mut removed = 0;
        while removed < n && self.buf.get(end) != Some(&EOF) {
            match self.size_at(end) {
                Some(s) => end += s,
                None => break,
            }
            removed += 1;
        }
        let count = self.len() - removed;
        self.splice(p, end - p, &[], count, in_room);
        (self.buf.get(p) != Some(&EOF)).then_some(p)
    }

    /// Deletes the entries of index `start..start + n` (0-based from the head).
    pub fn delete_range(&mut self, start: usize, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(p) = self.seek(start as i64) {
            self.delete(p, n);
        }
    }
}

impl<const BACK: bool> Listpack<BACK> {
    /// The same entries, byte for byte, in the other form (`B`): backlens added or dropped.
    fn reform<const B: bool>(&self) -> Listpack<B> {
        let mut buf = Vec::with_capacity(self.byte_len());
        buf.extend_from_slice(&self.buf[..HEADER]);
        let mut p = HEADER;
        while self.buf.get(p) != Some(&EOF) {
            let Some((_, l)) = decode(&self.buf, p) else {
                break;
            };
            buf.extend_from_slice(&self.buf[p..p + l]);
            if B {
                let mut back = [0u8; 5];
                let n = write_backlen(&mut back, l);
                buf.extend_from_slice(&back[..n]);
            }
            p += whole(l, BACK);
        }
        buf.push(EOF);
        let total = buf.len() as u32;
        buf[..4].copy_from_slice(&total.to_le_bytes());
        Listpack {
            buf: buf.into_boxed_slice(),
        }
    }
}

impl Listpack<true> {
    /// The same entries without backlens.
    pub fn forward_only(&self) -> ForwardListpack {
        self.reform()
    }
}

impl ForwardListpack {
    /// The same entries in Redis's format (with backlens), for snapshots and DUMP payloads.
    pub fn to_redis(&self) -> Listpack {
        self.reform()
    }
}

/// A double-ended walk over a listpack's entries (stepping back walks from the first entry in
/// the forward-only form).
pub struct Iter<'a, const BACK: bool = true> {
    lp: &'a Listpack<BACK>,
    /// Offset of the next entry from the front.
    front: usize,
    /// Offset just past the next entry from the back.
    back: usize,
}

impl<'a, const BACK: bool> Iterator for Iter<'a, BACK> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        if self.front >= self.back {
            return None;
        }
        let (e, l) = decode(&self.lp.buf, self.front)?;
        self.front += whole(l, BACK);
        Some(e)
    }
}

impl<const BACK: bool> DoubleEndedIterator for Iter<'_, BACK> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let p = self.lp.prev_of(self.back)?;
        self.back = p;
        decode(&self.lp.buf, p).map(|(e, _)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn strings<const B: bool>(lp: &Listpack<B>) -> Vec<Vec<u8>> {
        lp.iter().map(|e| e.to_vec()).collect()
    }

    #[test]
    fn redis_bytes_for_known_entries() {
        // Bytes as Redis 7's listpack.c writes them.
        let lp = <Listpack>::from_items([&b"a"[..], b"1", b"-1", b"300", b"70000", b"-9"]);
        assert_eq!(
            lp.as_bytes(),
            &[
                0x1A, 0, 0, 0, 6, 0, // header: 26 bytes, 6 entries
                0x81, b'a', 2, // "a"
                0x01, 1, // 1
                0xDF, 0xFF, 2, // -1: 13-bit
                0xC1, 0x2C, 2, // 300: 13-bit
                0xF2, 0x70, 0x11, 0x01, 4, // 70000: 24-bit
                0xDF, 0xF7, 2,    // -9
                0xFF, // end
            ][..]
        );
        let big = vec![b'x'; 200];
        let lp = <Listpack>::from_items([&big[..]]);
        // 12-bit string header, backlen 202 in two bytes.
        assert_eq!(&lp.as_bytes()[6..8], &[0xE0, 200]);
        assert_eq!(&lp.as_bytes()[208..210], &[1, 0x80 | (202 & 0x7F)]);
        assert_eq!(strings(&lp), vec![big]);
    }

    #[test]
    fn integers_round_trip_at_every_width() {
        let vals: Vec<i64> = vec![
            0,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            8_388_607,
            -8_388_608,
            8_388_608,
            i32::MAX as i64,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MAX,
            i64::MIN,
        ];
        let texts: Vec<Vec<u8>> = vals.iter().map(|v| v.to_string().into_bytes()).collect();
        let lp = <Listpack>::from_items(texts.iter().map(Vec::as_slice));
        let got: Vec<Entry<'_>> = lp.iter().collect();
        assert_eq!(got, vals.iter().map(|&v| Entry::Int(v)).collect::<Vec<_>>());
        assert_eq!(strings(&lp), texts);
        // Non-canonical integers stay strings.
        let lp = <Listpack>::from_items([&b"007"[..], b"+1", b"-0", b" 1"]);
        assert!(lp.iter().all(|e| matches!(e, Entry::Str(_))));
    }

    #[test]
    fn long_strings_and_backlen_widths() {
        for n in [0, 63, 64, 4095, 4096, 20_000, 70_000] {
            let s = vec![b'z'; n];
            let mut lp = <Listpack>::new();
            lp.push_back(b"head");
            lp.push_back(&s);
            lp.push_back(b"tail");
            assert_eq!(
                strings(&lp),
                vec![b"head".to_vec(), s.clone(), b"tail".to_vec()]
            );
            let back: Vec<Vec<u8>> = lp.iter().rev().map(|e| e.to_vec()).collect();
            assert_eq!(back[1], s);
            assert!(<Listpack>::from_blob(lp.as_bytes().into()).is_some());
        }
    }

    #[test]
    fn many_entries_count_by_walking() {
        let items: Vec<Vec<u8>> = (0..70_000).map(|i| format!("{i}").into_bytes()).collect();
        let mut lp = <Listpack>::from_items(items.iter().map(Vec::as_slice));
        assert_eq!(lp.len(), 70_000);
        assert_eq!(&lp.as_bytes()[4..6], &[0xFF, 0xFF]);
        lp.delete_range(0, 10_000);
        assert_eq!(lp.len(), 60_000);
        assert_eq!(&lp.as_bytes()[4..6], &60_000u16.to_le_bytes());
    }

    #[test]
    fn malformed_blobs_are_refused() {
        let lp = <Listpack>::from_items([&b"abc"[..], b"12", b"x"]);
        let good = lp.as_bytes().to_vec();
        assert!(<Listpack>::from_blob(good.clone().into()).is_some());
        for cut in 0..good.len() {
            assert!(
                <Listpack>::from_blob(good[..cut].into()).is_none(),
                "cut {cut}"
            );
        }
        for i in 0..good.len() {
            for b in [0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xE0, 0xF0, 0xF4, 0xF5, 0xFF] {
                let mut bad = good.clone();
                bad[i] = b;
                // Either refused, or (when the change happens to keep it well formed) every
                // entry reads without panicking.
                if let Some(lp) = <Listpack>::from_blob(bad.into()) {
                    let _ = strings(&lp);
                    let _ = lp.iter().rev().count();
                }
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(Vec<u8>),
        PushFront(Vec<u8>),
        Insert(usize, Vec<u8>),
        Replace(usize, Vec<u8>),
        Delete(usize, usize),
        /// A quicklist end node's push (front?) into room, growing up to a cap.
        PushInRoom(bool, Vec<u8>, usize),
        /// A quicklist end node's pop (front?), leaving room.
        PopInRoom(bool),
        Trim,
    }

    fn value() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<i64>().prop_map(|i| i.to_string().into_bytes()),
            (-5000i64..5000).prop_map(|i| i.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..80),
            (0usize..5000).prop_map(|n| vec![b'q'; n]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            value().prop_map(Op::PushBack),
            value().prop_map(Op::PushFront),
            (any::<usize>(), value()).prop_map(|(i, v)| Op::Insert(i, v)),
            (any::<usize>(), value()).prop_map(|(i, v)| Op::Replace(i, v)),
            (any::<usize>(), 0usize..4).prop_map(|(i, n)| Op::Delete(i, n)),
            (any::<bool>(), value(), 0usize..10_000).prop_map(|(f, v, c)| Op::PushInRoom(f, v, c)),
            any::<bool>().prop_map(Op::PopInRoom),
            Just(Op::Trim),
        ]
    }

    /// Runs `ops` on a listpack of either form and on a `VecDeque`, comparing them after each.
    fn run_ops<const B: bool>(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut lp = Listpack::<B>::new();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for op in ops {
            match op {
                Op::PushBack(v) => {
                    lp.push_back(&v);
                    model.push_back(v);
                }
                Op::PushFront(v) => {
                    lp.push_front(&v);
                    model.push_front(v);
                }
                Op::Insert(i, v) => {
                    let i = i % (model.len() + 1);
                    let p = lp.seek(i as i64).unwrap_or(lp.end());
                    lp.insert_at(p, &[&v]);
                    model.insert(i, v);
                }
                Op::Replace(i, v) => {
                    if !model.is_empty() {
                        let i = i % model.len();
                        let p = lp.seek(i as i64).unwrap();
                        lp.replace(p, &v);
                        model[i] = v;
                    }
                }
                Op::Delete(i, n) => {
                    if !model.is_empty() {
                        let i = i % model.len();
                        lp.delete_range(i, n);
                        for _ in 0..n.min(model.len() - i) {
                            model.remove(i);
                        }
                    }
                }
                Op::PushInRoom(front, v, cap) => {
                    lp.push_in_room(&v, front, cap);
                    if front {
                        model.push_front(v);
                    } else {
                        model.push_back(v);
                    }
                }
                Op::PopInRoom(front) => {
                    let p = if front { lp.first() } else { lp.last() };
                    if let Some(p) = p {
                        lp.delete_in_room(p, 1);
                        if front {
                            model.pop_front();
                        } else {
                            model.pop_back();
                        }
                    }
                }
                Op::Trim => {
                    lp.trim();
                    prop_assert_eq!(lp.heap_bytes(), lp.byte_len());
                }
            }
            prop_assert!(lp.heap_bytes() >= lp.byte_len());
            prop_assert_eq!(lp.byte_len(), lp.as_bytes().len());
            prop_assert_eq!(lp.len(), model.len());
            let fwd = strings(&lp);
            prop_assert_eq!(&fwd, &model.iter().cloned().collect::<Vec<_>>());
            let mut back: Vec<Vec<u8>> = lp.iter().rev().map(|e| e.to_vec()).collect();
            back.reverse();
            prop_assert_eq!(&back, &fwd);
            for (i, v) in model.iter().enumerate() {
                prop_assert!(lp.get(lp.seek(i as i64).unwrap()).eq_bytes(v));
                prop_assert!(lp
                    .get(lp.seek(i as i64 - model.len() as i64).unwrap())
                    .eq_bytes(v));
            }
            if let Some(v) = model.back() {
                let first = model.iter().position(|x| x == v).unwrap();
                let p = lp.find(lp.first().unwrap(), v, 0).unwrap();
                prop_assert_eq!(Some(p), lp.seek(first as i64));
            }
            prop_assert!(Listpack::<B>::from_blob(lp.as_bytes().into()).is_some());
            // Either form holds the same entries, and Redis's form is what Redis would write.
            let redis = Listpack::<true>::from_items(model.iter().map(Vec::as_slice));
            let (with, without) = (lp.reform::<true>(), lp.reform::<false>());
            prop_assert_eq!(with.as_bytes(), redis.as_bytes());
            prop_assert_eq!(strings(&without), fwd);
            prop_assert_eq!(
                with.forward_only().as_bytes().to_vec(),
                without.as_bytes().to_vec()
            );
            prop_assert_eq!(
                without.to_redis().as_bytes().to_vec(),
                with.as_bytes().to_vec()
            );
        }
        Ok(())
    }

    #[test]
    fn pushes_into_room_grow_by_half_up_to_the_cap() {
        let mut lp = <Listpack>::new();
        let v = [b'x'; 60]; // 62 bytes an entry
        let mut grows = 0;
        let mut heap = lp.heap_bytes();
        for _ in 0..120 {
            lp.push_in_room(&v, false, 8192);
            if lp.heap_bytes() != heap {
                grows += 1;
                heap = lp.heap_bytes();
            }
            assert!(heap <= 8192 || heap == lp.byte_len());
        }
        // 120 pushes, about 7.4 kB: growing by half each time from one entry (69, 103, ...,
        // 5905, then the 8192 cap) takes 13 allocations, not one a push.
        assert_eq!(grows, 13);
        assert_eq!(lp.len(), 120);
        // Pops leave room; trimming gives it back and leaves the same listpack.
        for _ in 0..100 {
            lp.delete_in_room(lp.last().unwrap(), 1);
        }
        assert_eq!(lp.heap_bytes(), heap);
        lp.trim();
        let want = <Listpack>::from_items(std::iter::repeat_n(&v[..], 20));
        assert_eq!(lp.heap_bytes(), want.heap_bytes());
        assert_eq!(lp, want);
    }

    proptest! {
        #[test]
        fn behaves_like_a_vecdeque(ops in proptest::collection::vec(op(), 1..60)) {
            run_ops::<true>(ops)?;
        }

        #[test]
        fn forward_only_behaves_like_a_vecdeque(ops in proptest::collection::vec(op(), 1..60)) {
            run_ops::<false>(ops)?;
        }
    }
}
