//! `enum_with_unknown!`: enums for wire codes that keep every unknown value, so that any input
//! re-emits byte for byte (the smoltcp pattern).

/// Declare an enum over an integer wire code with an extra `Unknown(code)` variant, plus
/// `From` conversions both ways.
#[macro_export]
macro_rules! enum_with_unknown {
    (
        $( #[$enum_attr:meta] )*
        pub enum $name:ident($ty:ty) {
            $(
              $( #[$variant_attr:meta] )*
              $variant:ident = $value:expr
            ),+ $(,)?
        }
    ) => {
        $( #[$enum_attr] )*
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Clone, Copy)]
        pub enum $name {
            $(
              $( #[$variant_attr] )*
              $variant
            ),*,
            /// A value this crate does not name, kept as it was on the wire.
            Unknown($ty)
        }

        // Inlined across crates: the engine converts codes on every frame, and a call per
        // conversion cost more than the match.
        impl ::core::convert::From<$ty> for $name {
            #[inline]
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant ),*,
                    other => $name::Unknown(other)
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            #[inline]
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value ),*,
                    $name::Unknown(other) => other
                }
            }
        }

        /// Serialized as the wire code, so that unknown values survive.
        #[cfg(feature = "serde")]
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> ::core::result::Result<S::Ok, S::Error> {
                <$ty as serde::Serialize>::serialize(&<$ty>::from(*self), s)
            }
        }
    }
}

/// The checked-view boilerplate shared by every fixed-length header: `Packet<T>` with
/// `new_unchecked`, `new_checked`, `check_len` and `into_inner`. The length check is either
/// `(Layer, len)` or a function `fn(&[u8]) -> Result<()>` (`check: path`).
///
/// The view's own documentation may follow a `;` (else it is "A checked zero-copy view of
/// this header.").
macro_rules! fixed_view {
    ($layer:expr, $len:expr) => {
        fixed_view!($layer, $len; /// A checked zero-copy view of this header.
        );
    };
    ($layer:expr, $len:expr; $(#[$doc:meta])+) => {
        fixed_view!(@view [$(#[$doc])+] |b: &[u8]| $crate::error::check_len($layer, b, $len));
    };
    (check: $check:path) => {
        fixed_view!(check: $check; /// A checked zero-copy view of this header.
        );
    };
    (check: $check:path; $(#[$doc:meta])+) => {
        fixed_view!(@view [$(#[$doc])+] |b: &[u8]| $check(b));
    };
    (@view [$($doc:tt)+] $check:expr) => {
        $($doc)+
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wrap a buffer without checking its length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Packet { buffer }
            }

            /// Wrap a buffer, checking that it holds the whole header.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Check that the buffer holds the whole header.
            pub fn check_len(&self) -> $crate::Result<()> {
                let check = $check;
                check(self.buffer.as_ref())
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

/// `parse_bytes` / `emit_bytes` for a Repr that has `parse(&Packet)` and `emit(&mut Packet)`;
/// with `len: LEN`, also `buffer_len` for a header of fixed length.
macro_rules! repr_bytes {
    ($repr:ident, len: $len:expr) => {
        impl $repr {
            /// Length on the wire.
            pub const fn buffer_len(&self) -> usize {
                $len
            }
        }
        repr_bytes!($repr);
    };
    ($repr:ident) => {
        impl $repr {
            /// Parse from the start of `buf` (never panics).
            pub fn parse_bytes(buf: &[u8]) -> $crate::Result<$repr> {
                $repr::parse(&Packet::new_checked(buf)?)
            }

            /// Emit into the start of `buf`, which must hold `buffer_len()` bytes (panics otherwise).
            pub fn emit_bytes(&self, buf: &mut [u8]) {
                self.emit(&mut Packet::new_unchecked(buf))
            }
        }
    };
}

/// A header's fields as one table, from which come the view's getters and setters, the owned
/// `Repr` (with `Default`: every field zero), and `Repr::parse` / `Repr::emit`, so that a
/// field is described once. Used inside a module that declared `Packet` with `fixed_view!`.
///
/// Each row is `name, setter: Type = kind(args)`, in the order `emit` writes them:
/// - `u8(at)`, `be16(F)`, `be24(F)`, `be32(F)`, `be64(F)`: a big-endian integer at a byte or
///   `field::` range;
/// - `bits(at, shift, width)` (a `u8`), `flag(at, shift)` (a `bool`), `code_bits(at, shift,
///   width)` (an `enum_with_unknown!` enum over `u8`), `code8(at)` (one over a whole byte),
///   `code16(F)` (one over `u16`): parts of bytes keep the other bits;
/// - `array(F)`: a small byte array by value; `bytes(F)`: a long one, read as a slice and
///   written through `setter` (named `…_mut`) returning the slice. Both serialize as hex.
/// - `custom()`: getter `name()` and setter `setter(&value)` are written by hand.
macro_rules! wire_fields {
    (
        $(#[$sattr:meta])*
        pub struct $repr:ident {
            $(
                $(#[doc = $doc:literal])*
                $name:ident, $set:ident: $ty:ty = $kind:ident $args:tt
            ),* $(,)?
        }
    ) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $( wire_fields!(@get [$($doc)*] $name: $ty = $kind $args); )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $( wire_fields!(@set [$($doc)*] $set: $ty = $kind $args); )*
        }

        wire_fields!(@struct [$(#[$sattr])*] $repr [] $( [$($doc)*] $name: $ty = $kind; )*);

        impl Default for $repr {
            fn default() -> Self {
                $repr { $( $name: wire_fields!(@zero $ty = $kind $args), )* }
            }
        }

        impl $repr {
            /// Parse a view (its length is checked once here).
            pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> $crate::Result<$repr> {
                packet.check_len()?;
                Ok($repr { $( $name: wire_fields!(@parse packet $name = $kind $args), )* })
            }

            /// Write every field into a view (values wider than their fields are masked).
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
                $( wire_fields!(@emit packet self.$name, $set = $kind $args); )*
            }
        }
    };

    // The owned struct, one row at a time (byte arrays serialize as hex).
    (@struct [$($sattr:tt)*] $repr:ident [$($out:tt)*]) => {
        $($sattr)*
        pub struct $repr { $($out)* }
    };
    (@struct $sattr:tt $repr:ident [$($out:tt)*] [$($doc:literal)*] $name:ident: $ty:ty = array; $($rest:tt)*) => {
        wire_fields!(@struct $sattr $repr [$($out)* $(#[doc = $doc])*
            #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
            pub $name: $ty,] $($rest)*);
    };
    (@struct $sattr:tt $repr:ident [$($out:tt)*] [$($doc:literal)*] $name:ident: $ty:ty = bytes; $($rest:tt)*) => {
        wire_fields!(@struct $sattr $repr [$($out)* $(#[doc = $doc])*
            #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
            pub $name: $ty,] $($rest)*);
    };
    (@struct $sattr:tt $repr:ident [$($out:tt)*] [$($doc:literal)*] $name:ident: $ty:ty = $kind:ident; $($rest:tt)*) => {
        wire_fields!(@struct $sattr $repr [$($out)* $(#[doc = $doc])* pub $name: $ty,] $($rest)*);
    };

    // Getters.
    (@get $docs:tt $name:ident: $ty:ty = custom $args:tt) => {};
    (@get [$($doc:literal)*] $name:ident: $ty:ty = bytes($f:expr)) => {
        $(#[doc = $doc])*
        pub fn $name(&self) -> &[u8] {
            &self.buffer.as_ref()[$f]
        }
    };
    (@get [$($doc:literal)*] $name:ident: $ty:ty = $kind:ident $args:tt) => {
        $(#[doc = $doc])*
        pub fn $name(&self) -> $ty {
            wire_fields!(@read self.buffer.as_ref(), $ty = $kind $args)
        }
    };

    (@read $b:expr, $ty:ty = u8($at:expr)) => { $b[$at] };
    (@read $b:expr, $ty:ty = be16($f:expr)) => { $crate::field::be16($b, $f.start) };
    (@read $b:expr, $ty:ty = be24($f:expr)) => { $crate::field::be24($b, $f.start) };
    (@read $b:expr, $ty:ty = be32($f:expr)) => { $crate::field::be32($b, $f.start) };
    (@read $b:expr, $ty:ty = be64($f:expr)) => { $crate::field::be64($b, $f.start) };
    (@read $b:expr, $ty:ty = bits($at:expr, $shift:expr, $width:expr)) => {
        $crate::field::get_bits($b[$at], $shift, $width)
    };
    (@read $b:expr, $ty:ty = flag($at:expr, $shift:expr)) => { $crate::field::get_bits($b[$at], $shift, 1) != 0 };
    (@read $b:expr, $ty:ty = code_bits($at:expr, $shift:expr, $width:expr)) => {
        <$ty>::from($crate::field::get_bits($b[$at], $shift, $width))
    };
    (@read $b:expr, $ty:ty = code8($at:expr)) => { <$ty>::from($b[$at]) };
    (@read $b:expr, $ty:ty = code16($f:expr)) => { <$ty>::from($crate::field::be16($b, $f.start)) };
    (@read $b:expr, $ty:ty = array($f:expr)) => { $crate::field::array($b, $f.start) };

    // Setters.
    (@set $docs:tt $set:ident: $ty:ty = custom $args:tt) => {};
    (@set [$($doc:literal)*] $set:ident: $ty:ty = bytes($f:expr)) => {
        /// Writable:
        $(#[doc = $doc])*
        pub fn $set(&mut self) -> &mut [u8] {
            &mut self.buffer.as_mut()[$f]
        }
    };
    (@set [$($doc:literal)*] $set:ident: $ty:ty = $kind:ident $args:tt) => {
        /// Set:
        $(#[doc = $doc])*
        pub fn $set(&mut self, v: $ty) {
            wire_fields!(@write self.buffer.as_mut(), v = $kind $args)
        }
    };

    (@write $b:expr, $v:ident = u8($at:expr)) => { $b[$at] = $v };
    (@write $b:expr, $v:ident = be16($f:expr)) => { $crate::field::put16($b, $f.start, $v) };
    (@write $b:expr, $v:ident = be24($f:expr)) => { $crate::field::put24($b, $f.start, $v) };
    (@write $b:expr, $v:ident = be32($f:expr)) => { $crate::field::put32($b, $f.start, $v) };
    (@write $b:expr, $v:ident = be64($f:expr)) => { $crate::field::put64($b, $f.start, $v) };
    (@write $b:expr, $v:ident = bits($at:expr, $shift:expr, $width:expr)) => {
        $crate::field::set_bits(&mut $b[$at], $shift, $width, $v)
    };
    (@write $b:expr, $v:ident = flag($at:expr, $shift:expr)) => {
        $crate::field::set_bits(&mut $b[$at], $shift, 1, $v as u8)
    };
    (@write $b:expr, $v:ident = code_bits($at:expr, $shift:expr, $width:expr)) => {
        $crate::field::set_bits(&mut $b[$at], $shift, $width, u8::from($v))
    };
    (@write $b:expr, $v:ident = code8($at:expr)) => { $b[$at] = u8::from($v) };
    (@write $b:expr, $v:ident = code16($f:expr)) => { $crate::field::put16($b, $f.start, u16::from($v)) };
    (@write $b:expr, $v:ident = array($f:expr)) => { $b[$f].copy_from_slice(&$v) };

    // Default: zero bytes.
    (@zero $ty:ty = custom $args:tt) => { Default::default() };
    (@zero $ty:ty = flag $args:tt) => { false };
    (@zero $ty:ty = code8 $args:tt) => { <$ty>::from(0u8) };
    (@zero $ty:ty = code_bits $args:tt) => { <$ty>::from(0u8) };
    (@zero $ty:ty = code16 $args:tt) => { <$ty>::from(0u16) };
    (@zero $ty:ty = array($f:expr)) => { [0; $f.end - $f.start] };
    (@zero $ty:ty = bytes($f:expr)) => { [0; $f.end - $f.start] };
    (@zero $ty:ty = $kind:ident $args:tt) => { 0 };

    // parse and emit.
    (@parse $p:ident $name:ident = bytes($f:expr)) => { $crate::field::array($p.buffer.as_ref(), $f.start) };
    (@parse $p:ident $name:ident = $kind:ident $args:tt) => { $p.$name() };
    (@emit $p:ident $v:expr, $set:ident = bytes $args:tt) => { $p.$set().copy_from_slice(&$v) };
    (@emit $p:ident $v:expr, $set:ident = custom $args:tt) => { $p.$set(&$v) };
    (@emit $p:ident $v:expr, $set:ident = $kind:ident $args:tt) => { $p.$set($v) };
}

/// The set operations of a bit-set newtype `struct Name(pub raw)` (JoinState, the SA
/// ComponentMasks): `contains`, `bits`, `|`, `|=`, `&`, and `From` both ways.
macro_rules! bit_set_ops {
    ($name:ident($raw:ty)) => {
        impl $name {
            /// Whether every bit of `other` is set.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// The raw bits.
            pub const fn bits(self) -> $raw {
                self.0
            }
        }

        impl ::core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl ::core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }

        impl ::core::ops::BitAnd for $name {
            type Output = $name;
            fn bitand(self, rhs: $name) -> $name {
                $name(self.0 & rhs.0)
            }
        }

        impl From<$raw> for $name {
            fn from(v: $raw) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $raw {
            fn from(m: $name) -> Self {
                m.0
            }
        }
    };
}

/// The owned-record code of the IGMPv3 group record and the MLDv2 address record, which differ
/// only in the group address (type and field name): `new`, `parse`, `buffer_len`, `emit_bytes`
/// and the [`crate::multicast::SourceRecord`] impl through which the shared code reads them.
macro_rules! group_record_repr {
    ($repr:ident { $group:ident: $addr:ty }, view: $view:ident, record_type: $rtype:ty) => {
        impl $repr {
            /// A record with no sources and no aux data.
            pub const fn new(record_type: $rtype, $group: $addr) -> Self {
                $repr { record_type, $group, sources: List::new(), aux_data: List::new() }
            }

            /// Parse one record view (checked) into the bounded repr.
            pub fn parse<T: AsRef<[u8]> + ?Sized>(r: &$view<&T>) -> $crate::Result<Self> {
                $crate::multicast::parse_record(r)
            }

            /// The record's length on the wire.
            pub fn buffer_len(&self) -> usize {
                $crate::multicast::record_len(self)
            }

            /// Write the record at the start of `buf` (at least `buffer_len()` bytes; panics
            /// otherwise).
            pub fn emit_bytes(&self, buf: &mut [u8]) {
                $crate::multicast::emit_record(self, buf)
            }
        }

        impl $crate::multicast::SourceRecord for $repr {
            type Addr = $addr;
            fn with_group(record_type: $rtype, group: $addr) -> Self {
                $repr::new(record_type, group)
            }
            fn record_type(&self) -> $rtype {
                self.record_type
            }
            fn group(&self) -> $addr {
                self.$group
            }
            fn sources(&self) -> &List<$addr, { $crate::multicast::MAX_SOURCES }> {
                &self.sources
            }
            fn sources_mut(&mut self) -> &mut List<$addr, { $crate::multicast::MAX_SOURCES }> {
                &mut self.sources
            }
            fn aux_data(&self) -> &List<u32, { $crate::multicast::MAX_AUX_WORDS }> {
                &self.aux_data
            }
            fn aux_data_mut(&mut self) -> &mut List<u32, { $crate::multicast::MAX_AUX_WORDS }> {
                &mut self.aux_data
            }
        }
    };
}
