//! Values stored under keys, with the encodings Redis reports through `OBJECT ENCODING`.
//!
//! Strings that look like canonical 64-bit integers are stored as integers (`int`); other
//! strings keep their bytes: `embstr` when created short (at most 44 bytes, Redis's limit),
//! `raw` when longer or once modified in place by APPEND or SETRANGE. Strings of at most
//! [`INLINE_MAX`] bytes live inside the `Value` itself (24 bytes, as a boxed slice's pointer
//! and length would take), so a short value costs no allocation.

use crate::hash::Hash;
use crate::list::List;
use crate::num;
use crate::set::Set;
use crate::stream::Stream;
use crate::zset::ZSet;

/// Longest string Redis stores with the `embstr` encoding.
pub const EMBSTR_MAX: usize = 44;

/// Longest string stored inline in a [`Value`] (no allocation).
pub const INLINE_MAX: usize = 22;

/// A string of at most [`INLINE_MAX`] bytes stored inside a [`Value`].
#[derive(Clone, Copy)]
pub struct InlineStr {
    len: u8,
    buf: [u8; INLINE_MAX],
}

impl InlineStr {
    /// The bytes stored inline, or `None` when longer than [`INLINE_MAX`].
    pub fn new(b: &[u8]) -> Option<InlineStr> {
        let mut buf = [0; INLINE_MAX];
        buf.get_mut(..b.len())?.copy_from_slice(b);
        Some(InlineStr {
            len: b.len() as u8,
            buf,
        })
    }
}

impl std::ops::Deref for InlineStr {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.buf.get(..usize::from(self.len)).unwrap_or_default()
    }
}

impl PartialEq for InlineStr {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for InlineStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// A value held by a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string that is a canonical integer.
    Int(i64),
    /// A string created whole (SET, GETSET ...) of at most [`INLINE_MAX`] bytes: `embstr`.
    Inline(InlineStr),
    /// A longer string created whole: `embstr` up to 44 bytes, else `raw`.
    Str(Box<[u8]>),
    /// A string modified in place (APPEND, SETRANGE): always `raw`, grows amortized. Boxed so
    /// a `Value` is 24 bytes, not 32: every key pays for the enum, few for this indirection.
    Raw(Box<Vec<u8>>),
    /// A sorted set (`listpack` or `skiplist`).
    ZSet(ZSet),
    /// A hash (`listpack`, `listpackex` or `hashtable`).
    Hash(Hash),
    /// A list (`listpack` or `quicklist`).
    List(List),
    /// A set (`intset`, `listpack` or `hashtable`).
    Set(Set),
    /// A stream (`stream`), boxed: few keys hold one.
    Stream(Box<Stream>),
}

/// The kind of value, as `TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// `string`
    String,
    /// `zset`
    ZSet,
    /// `hash`
    Hash,
    /// `list`
    List,
    /// `set`
    Set,
    /// `stream`
    Stream,
}

/// Every type, in the order `TYPE` names are matched.
const TYPES: [ValueType; 6] = [
    ValueType::String,
    ValueType::ZSet,
    ValueType::Hash,
    ValueType::List,
    ValueType::Set,
    ValueType::Stream,
];

impl ValueType {
    /// The name `TYPE` replies with.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::ZSet => "zset",
            ValueType::Hash => "hash",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::Stream => "stream",
        }
    }

    /// Parses a `SCAN ... TYPE name` argument (case-insensitive).
    pub fn from_name(name: &[u8]) -> Option<ValueType> {
        TYPES
            .into_iter()
            .find(|t| name.eq_ignore_ascii_case(t.name().as_bytes()))
    }
}

impl Value {
    /// Builds a string value from bytes, choosing `int` when the bytes are a canonical integer.
    pub fn from_bytes(b: &[u8]) -> Value {
        match num::canonical_int(b) {
            Some(i) => Value::Int(i),
            None => Value::string(b),
        }
    }

    /// A string value holding exactly these bytes, never the `int` encoding (INCRBYFLOAT).
    pub fn string(b: &[u8]) -> Value {
        match InlineStr::new(b) {
            Some(s) => Value::Inline(s),
            None => Value::Str(b.into()),
        }
    }

    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Int(_) | Value::Inline(_) | Value::Str(_) | Value::Raw(_) => ValueType::String,
            Value::ZSet(_) => ValueType::ZSet,
            Value::Hash(_) => ValueType::Hash,
            Value::List(_) => ValueType::List,
            Value::Set(_) => ValueType::Set,
            Value::Stream(_) => ValueType::Stream,
        }
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Inline(_) => "embstr",
            Value::Str(b) if b.len() <= EMBSTR_MAX => "embstr",
            Value::Str(_) | Value::Raw(_) => "raw",
            Value::ZSet(z) => z.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::List(l) => l.encoding(),
            Value::Set(s) => s.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// The string bytes of a string value; integers are formatted into `buf`.
    /// Returns `None` for non-string types.
    pub fn as_str<'a>(&'a self, buf: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
        match self {
            Value::Int(i) => Some(num::fmt_i64(*i, buf)),
            Value::Inline(b) => Some(b),
            Value::Str(b) => Some(b),
            Value::Raw(v) => Some(v),
            _ => None,
        }
    }

    /// The length in bytes of a string value (STRLEN), without formatting integers.
    pub fn str_len(&self) -> Option<usize> {
        match self {
            Value::Int(i) => Some(int_len(*i)),
            Value::Inline(b) => Some(b.len()),
            Value::Str(b) => Some(b.len()),
            Value::Raw(v) => Some(v.len()),
            _ => None,
        }
    }

    /// Turns a string value into a growable `raw` byte vector in place and returns it.
    pub fn make_raw(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Value::Int(i) => {
                *self = Value::Raw(Box::new(itoa::Buffer::new().format(*i).as_bytes().to_vec()))
            }
            Value::Inline(b) => *self = Value::Raw(Box::new(b.to_vec())),
            Value::Str(b) => *self = Value::Raw(Box::new(std::mem::take(b).into_vec())),
            Value::Raw(_) => {}
            _ => return None,
        }
        match self {
            Value::Raw(v) => Some(&mut **v),
            _ => None,
        }
    }

    /// Heap bytes owned by the value (not counting the value enum itself).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Int(_) | Value::Inline(_) => 0,
            Value::Str(b) => b.len(),
            Value::Raw(v) => std::mem::size_of::<Vec<u8>>() + v.capacity(),
            Value::ZSet(z) => z.heap_bytes(),
            Value::Hash(h) => h.heap_bytes(),
            Value::List(l) => l.heap_bytes(),
            Value::Set(s) => s.heap_bytes(),
            Value::Stream(s) => s.heap_bytes(),
        }
    }
}

/// A key's value as the keyspace holds it: a string kept inside the key's own node (see
/// [`crate::keyspace::KeyNode`]), or a [`Value`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stored<'a> {
    /// A string created whole, held in the key's node: `embstr` up to [`EMBSTR_MAX`] bytes,
    /// else `raw`, as [`Value::Str`].
    Str(&'a [u8]),
    /// A string stored as an integer in the key's node (`int`, as [`Value::Int`]).
    Int(i64),
    /// Any other value.
    Value(&'a Value),
}

impl<'a> From<&'a Value> for Stored<'a> {
    fn from(v: &'a Value) -> Self {
        Stored::Value(v)
    }
}

impl<'a> Stored<'a> {
    /// The [`Value`], unless this is a string held in its node.
    #[inline]
    pub fn obj(self) -> Option<&'a Value> {
        match self {
            Stored::Value(v) => Some(v),
            Stored::Str(_) | Stored::Int(_) => None,
        }
    }

    /// The value's type.
    pub fn value_type(self) -> ValueType {
        match self {
            Stored::Str(_) | Stored::Int(_) => ValueType::String,
            Stored::Value(v) => v.value_type(),
        }
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(self) -> &'static str {
        match self {
            Stored::Str(b) if b.len() <= EMBSTR_MAX => "embstr",
            Stored::Str(_) => "raw",
            Stored::Int(_) => "int",
            Stored::Value(v) => v.encoding(),
        }
    }

    /// Whether Redis would hand out one of its shared integer objects for this value (0 to
    /// 9999: OBJECT REFCOUNT and DEBUG OBJECT report them so).
    pub fn shared_int(self) -> bool {
        matches!(
            self,
            Stored::Int(0..10_000) | Stored::Value(Value::Int(0..10_000))
        )
    }

    /// The string bytes of a string value; integers are formatted into `buf`.
    /// Returns `None` for non-string types.
    #[inline]
    pub fn as_str(self, buf: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
        match self {
            Stored::Str(b) => Some(b),
            Stored::Int(i) => Some(num::fmt_i64(i, buf)),
            Stored::Value(v) => v.as_str(buf),
        }
    }

    /// The length in bytes of a string value (STRLEN), without formatting integers.
    pub fn str_len(self) -> Option<usize> {
        match self {
            Stored::Str(b) => Some(b.len()),
            Stored::Int(i) => Some(int_len(i)),
            Stored::Value(v) => v.str_len(),
        }
    }

    /// Heap bytes owned by the value outside the key's node.
    pub fn heap_bytes(self) -> usize {
        match self {
            Stored::Str(_) | Stored::Int(_) => 0,
            Stored::Value(v) => v.heap_bytes(),
        }
    }

    /// An owned copy (a string held in its node becomes a [`Value::string`]).
    pub fn to_value(self) -> Value {
        match self {
            Stored::Str(b) => Value::string(b),
            Stored::Int(i) => Value::Int(i),
            Stored::Value(v) => v.clone(),
        }
    }
}

/// Number of bytes of the decimal form of `i`.
fn int_len(i: i64) -> usize {
    let digits = if i == 0 {
        1
    } else {
        i.unsigned_abs().ilog10() as usize + 1
    };
    digits + usize::from(i < 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(Value::from_bytes(b"123").encoding(), "int");
        assert_eq!(Value::from_bytes(b"0123").encoding(), "embstr");
        assert!(matches!(Value::from_bytes(b"0123"), Value::Inline(_)));
        assert!(matches!(Value::from_bytes(&[b'a'; 22]), Value::Inline(_)));
        assert!(matches!(Value::from_bytes(&[b'a'; 23]), Value::Str(_)));
        assert_eq!(Value::string(b"12"), Value::string(b"12"));
        assert_ne!(Value::string(b"12"), Value::string(b"123"));
        assert_eq!(Value::string(b""), Value::string(b""));
        let mut v = Value::string(b"ab");
        v.make_raw().unwrap().push(b'c');
        assert_eq!(v.as_str(&mut itoa::Buffer::new()).unwrap(), b"abc");
        assert_eq!(Value::from_bytes(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(Value::from_bytes(&[b'a'; 45]).encoding(), "raw");
        let mut v = Value::from_bytes(b"12");
        v.make_raw().unwrap().push(b'3');
        assert_eq!(v.encoding(), "raw");
        assert_eq!(v.as_str(&mut itoa::Buffer::new()).unwrap(), b"123");
    }

    #[test]
    fn int_lengths() {
        for i in [0, 1, 9, 10, -1, -10, 99, i64::MAX, i64::MIN] {
            assert_eq!(int_len(i), i.to_string().len());
        }
    }
}
