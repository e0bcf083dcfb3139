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
macro_rules! fixed_view {
    ($layer:expr, $len:expr) => {
        fixed_view!(@view |b: &[u8]| $crate::error::check_len($layer, b, $len));
    };
    (check: $check:path) => {
        fixed_view!(@view |b: &[u8]| $check(b));
    };
    (@view $check:expr) => {
        /// A checked zero-copy view of this header.
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

/// `parse_bytes` / `emit_bytes` for a Repr that has `parse(&Packet)` and `emit(&mut Packet)`.
macro_rules! repr_bytes {
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
