//! A file named on the command line, `-` for standard input: the capture of `decode` and
//! `send`, the JSON lines of `encode`. Uses [`super::exit`] and [`super::out`].

use std::io::{self, Read};
use std::path::Path;

use crate::plumbing::exit;
use crate::plumbing::out::warn_line;

/// Open `path` (`-`: standard input) for `tool`: its reader and its name for messages
/// ("standard input", or the path). A file that cannot be opened is said on stderr (`TOOL:
/// cannot read PATH: why`) and is a usage error.
pub fn open(tool: &str, path: &Path) -> Result<(Box<dyn Read>, String), u8> {
    if path.as_os_str() == "-" {
        return Ok((Box::new(io::stdin().lock()), "standard input".into()));
    }
    match std::fs::File::open(path) {
        Ok(f) => Ok((Box::new(f), path.display().to_string())),
        Err(e) => {
            warn_line!("{tool}: cannot read {}: {e}", path.display());
            Err(exit::USAGE)
        }
    }
}
