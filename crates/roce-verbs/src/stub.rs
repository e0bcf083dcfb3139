//! The calls the library does not implement yet: every symbol of the real libraries is
//! exported (Debian's programs are linked BIND_NOW, so a missing one stops them at load), and
//! the ones not implemented answer as the real library does when the kernel lacks the call:
//! ENOSYS, with one stderr line naming the call (once). The stubs are generated from
//! symbols.tsv by build.rs; spec/capi.md lists which are which.

/// Say once that `name` is not implemented and set errno to ENOSYS.
pub fn not_implemented(name: &'static str) {
    crate::ffi::say_once(name, &format!("roce: {name} is not implemented by roce's libibverbs/librdmacm (ENOSYS)"));
    crate::ffi::set_errno(libc::ENOSYS);
}

#[allow(clippy::missing_safety_doc, missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
}
