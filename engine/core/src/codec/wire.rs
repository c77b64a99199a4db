//! The primitives of the binary body (`docs/format.md` §10): postcard's encodings, written and
//! read by hand so that every length is checked before it is used and no read can panic.
//!
//! Unsigned integers are LEB128 varints (postcard's), the shortest form only; a string or a JSON
//! text is a varint byte length then the bytes; an `Option` or a `bool` is one byte `0`/`1`; a
//! sequence or a map is a varint count then its items, a map's keys strictly increasing. Every
//! encoding is at least one byte long, so a count is refused when it exceeds the bytes left.
//! Decoding reads only what is canonical, so what decodes re-encodes to the same bytes.

use std::collections::BTreeMap;

use cairn_dsl::Usage;
use cairn_storage::{CheckpointId, CheckpointKind, ThreadStatus, WorkflowRef};

use crate::error::Error;
use crate::event::{ForkOrigin, TaskKey};

/// Why bytes are not a binary body (the detail of an [`Error::Record`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

/// A cursor over a binary body's bytes.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Whether every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn byte(&mut self) -> Result<u8, Malformed> {
        let (&b, rest) = self.bytes.split_first().ok_or(Malformed("ends early"))?;
        self.bytes = rest;
        Ok(b)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.bytes.len() {
            return Err(Malformed("a length runs past the end"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// A varint in its shortest form (at most 10 bytes, no bits past 64).
    pub(crate) fn varint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for i in 0..10u32 {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(Malformed("a varint overflows 64 bits"));
            }
            value |= bits << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(Malformed("a varint is not in its shortest form"));
                }
                return Ok(value);
            }
        }
        Err(Malformed("a varint is longer than 10 bytes"))
    }

    /// A count or a length, at most the bytes left (every item is at least one byte).
    pub(crate) fn count(&mut self) -> Result<usize, Malformed> {
        let n = self.varint()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len())
            .ok_or(Malformed("a count exceeds the bytes left"))
    }

    /// A `0`/`1` byte.
    pub(crate) fn flag(&mut self) -> Result<bool, Malformed> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed("a flag is neither 0 nor 1")),
        }
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn str(&mut self) -> Result<&'a str, Malformed> {
        let n = self.count()?;
        std::str::from_utf8(self.take(n)?).map_err(|_| Malformed("a string is not UTF-8"))
    }
}

/// Appends `v` as a varint.
pub(crate) fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `s` length-prefixed.
pub(crate) fn put_str(s: &str, out: &mut Vec<u8>) {
    put_varint(s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

/// A field type of a body with a binary encoding.
pub(crate) trait Bin: Sized {
    /// Appends the encoding of `self`.
    ///
    /// # Errors
    /// [`Error::Codec`] for a value no reader could read back (a JSON value nested too deep).
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error>;
    /// Reads one value.
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed>;
}

impl Bin for u64 {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_varint(*self, out);
        Ok(())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        r.varint()
    }
}

impl Bin for u32 {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_varint(u64::from(*self), out);
        Ok(())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        u32::try_from(r.varint()?).map_err(|_| Malformed("a u32 overflows"))
    }
}

impl Bin for bool {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(u8::from(*self));
        Ok(())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        r.flag()
    }
}

impl Bin for String {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_str(self, out);
        Ok(())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        r.str().map(str::to_owned)
    }
}

impl<T: Bin> Bin for Option<T> {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        match self {
            None => {
                out.push(0);
                Ok(())
            }
            Some(v) => {
                out.push(1);
                v.put(out)
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        if r.flag()? { T::get(r).map(Some) } else { Ok(None) }
    }
}

impl<T: Bin, E: Bin> Bin for Result<T, E> {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        match self {
            Ok(v) => {
                out.push(0);
                v.put(out)
            }
            Err(e) => {
                out.push(1);
                e.put(out)
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        if r.flag()? { E::get(r).map(Err) } else { T::get(r).map(Ok) }
    }
}

/// A boxed value is written as the value: the box keeps a rare, large field out of a type's
/// size, not out of its bytes.
impl<T: Bin> Bin for Box<T> {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        (**self).put(out)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        T::get(r).map(Box::new)
    }
}

/// Items of a sequence allocated ahead of reading them, at most (the rest as they come).
const PREALLOCATED_MAX: usize = 64;

impl<T: Bin> Bin for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_varint(self.len() as u64, out);
        self.iter().try_for_each(|v| v.put(out))
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let n = r.count()?;
        let mut items = Vec::with_capacity(n.min(PREALLOCATED_MAX));
        for _ in 0..n {
            items.push(T::get(r)?);
        }
        Ok(items)
    }
}

impl<V: Bin> Bin for BTreeMap<String, V> {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_varint(self.len() as u64, out);
        self.iter().try_for_each(|(k, v)| {
            put_str(k, out);
            v.put(out)
        })
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let n = r.count()?;
        let mut map = BTreeMap::new();
        for _ in 0..n {
            let key = r.str()?;
            if map.last_key_value().is_some_and(|(last, _): (&String, _)| last.as_str() >= key) {
                return Err(Malformed("map keys are not strictly increasing"));
            }
            let value = V::get(r)?;
            map.insert(key.to_owned(), value);
        }
        Ok(map)
    }
}

impl Bin for TaskKey {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_str(&self.node, out);
        self.item.put(out)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(TaskKey { node: r.str()?.into(), item: Bin::get(r)? })
    }
}

impl Bin for Usage {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_varint(self.tokens, out);
        put_varint(self.cost_micros, out);
        Ok(())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(Usage { tokens: r.varint()?, cost_micros: r.varint()? })
    }
}

impl Bin for CheckpointId {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        self.0.put(out)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        r.varint().map(CheckpointId)
    }
}

impl Bin for WorkflowRef {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_str(&self.id, out);
        self.version.put(out)?;
        put_str(&self.fingerprint, out);
        Ok(())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let id = String::get(r)?.into();
        Ok(WorkflowRef { id, version: Bin::get(r)?, fingerprint: String::get(r)?.into() })
    }
}

impl Bin for ForkOrigin {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_str(&self.thread, out);
        self.seq.put(out)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(ForkOrigin { thread: String::get(r)?, seq: r.varint()? })
    }
}

/// Storage's wire enums as their on-disk discriminant (one byte; never reused).
macro_rules! by_discriminant {
    ($($ty:ident),*) => {$(
        impl Bin for $ty {
            fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
                out.push(self.to_repr());
                Ok(())
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
                $ty::from_u8(r.byte()?).ok_or(Malformed(concat!("unknown ", stringify!($ty))))
            }
        }
    )*};
}

by_discriminant!(ThreadStatus, CheckpointKind);

/// The composite types a body holds that are not its own (budgets, errors, messages, progress,
/// recovery strategies, goto targets; and a thread's policy, rare and made of them): their JSON text, length-prefixed, so
/// that they keep the compatibility rules of their JSON (a field added with a default reads from
/// older bodies) and the binary body needs no mirror of them.
macro_rules! as_json {
    ($($ty:ty),*) => {$(
        impl Bin for $ty {
            fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
                let json = serde_json::to_vec(self)?;
                put_varint(json.len() as u64, out);
                out.extend_from_slice(&json);
                Ok(())
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
                let n = r.count()?;
                serde_json::from_slice(r.take(n)?)
                    .map_err(|_| Malformed(concat!("a ", stringify!($ty), " does not decode")))
            }
        }
    )*};
}

as_json!(
    cairn_dsl::Budgets,
    cairn_dsl::NodeError,
    cairn_dsl::ToolError,
    cairn_dsl::Target,
    cairn_dsl::Progress,
    cairn_dsl::Message,
    cairn_dsl::Recovery,
    crate::event::ThreadPolicy,
    crate::checkpoint_requests::CheckpointRequest
);

#[cfg(test)]
mod tests {
    use super::*;

    fn varint_of(bytes: &[u8]) -> Result<u64, Malformed> {
        Reader::new(bytes).varint()
    }

    #[test]
    fn varints_are_postcards_and_only_the_shortest_form_reads() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(v, &mut out);
            assert_eq!(postcard_of(v), out, "{v}");
            assert_eq!(varint_of(&out), Ok(v));
        }
        assert!(varint_of(&[0x80, 0x00]).is_err(), "0 in two bytes");
        assert!(varint_of(&[0xff; 10]).is_err(), "past 64 bits");
        assert!(varint_of(&[0x80]).is_err(), "ends early");
    }

    /// postcard's varint of `v`, computed independently (LEB128).
    fn postcard_of(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut v = u128::from(v);
        loop {
            let low = (v % 128) as u8;
            v /= 128;
            if v == 0 {
                out.push(low);
                return out;
            }
            out.push(low + 128);
        }
    }

    #[test]
    fn a_count_past_the_bytes_left_is_refused_before_it_allocates() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(<Vec<u64> as Bin>::get(&mut r).is_err());
    }

    #[test]
    fn map_keys_must_increase() {
        let bytes = [2, 1, b'b', 1, 1, b'a', 2];
        assert!(<BTreeMap<String, u64> as Bin>::get(&mut Reader::new(&bytes)).is_err());
        let bytes = [2, 1, b'a', 1, 1, b'b', 2];
        let map = <BTreeMap<String, u64> as Bin>::get(&mut Reader::new(&bytes)).expect("decodes");
        assert_eq!(map.len(), 2);
    }
}
