//! Members that restate another (a view of a field: `cm.port` of `cm.fields.service_id`,
//! `mad.response` of the R bit of `mad.method`, a name beside its number, `bth.psn` of the
//! top-level `psn`, …) settled with the field when the two disagree (spec/decode.md,
//! "Members that restate others").
//!
//! `roce decode` writes every view as its field says, so a disagreement is an edit of one side
//! (or of both). Which side: what the line held before the edit tells, when the line has it —
//! `payload` holds the MAD's fields (the side still holding the payload's value is the stale
//! one); the line's checksums (`icrc_expected`, `vcrc_expected`) pin the frame decode saw,
//! which `encode_value` uses by building the frame both ways. With neither, [`Prefer`]
//! decides: the field wins.

use super::EncodeError;

/// Which side of a disagreeing pair wins when nothing in the line tells which was edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// The field (the wire's bits); its view follows it.
    Field,
    /// The view; the field is set from it.
    View,
}

/// What the line tells of the field's value before the edit.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Was<T> {
    /// `payload` held this value.
    Payload(T),
    /// The line does not give the field: the view is the only statement of it.
    Absent,
    /// The line gives the field, and nothing in it holds the value before the edit.
    Unknown,
}

/// One pair that disagreed, and how it was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The restating member (`cm.port_space/cm.port`).
    pub view: String,
    /// The member it restates (`cm.fields.service_id`).
    pub field: String,
    /// Whether the view's value went to the wire (else it follows the field).
    pub view_won: bool,
    /// Whether `payload` told which side was edited (else [`Prefer`] or the checksums did).
    pub by_payload: bool,
}

impl Settled {
    /// The note `roce encode` prints: `cm.fields.service_id from cm.port_space/cm.port`, or
    /// `cm.port_space/cm.port follow cm.fields.service_id`.
    pub fn text(&self) -> String {
        if self.view_won {
            format!("{} from {}", self.field, self.view)
        } else {
            format!("{} follows {}", self.view, self.field)
        }
    }
}

/// The pairs settled while building one frame.
#[derive(Debug)]
pub(crate) struct Views {
    /// Who wins a pair nothing pins.
    pub(crate) prefer: Prefer,
    /// Every pair that disagreed.
    pub(crate) settled: Vec<Settled>,
}

impl Views {
    pub(crate) fn new(prefer: Prefer) -> Views {
        Views { prefer, settled: Vec::new() }
    }

    /// Whether a pair was settled by [`Prefer`], `payload` not telling.
    pub(crate) fn unpinned(&self) -> bool {
        self.settled.iter().any(|s| !s.by_payload)
    }

    /// The value `view` (the member `view_name`, read into the field's type) puts on the wire
    /// instead of the field's `current` value: `None` when they agree or the field wins. Both
    /// sides moved off the payload's value is a contradiction, an error.
    pub(crate) fn settle<T: PartialEq + std::fmt::Debug>(
        &mut self,
        view: Option<T>,
        current: T,
        was: Was<T>,
        view_name: &str,
        field: &str,
    ) -> Result<Option<T>, EncodeError> {
        let Some(v) = view else { return Ok(None) };
        if v == current {
            return Ok(None);
        }
        let (view_won, by_payload) = match was {
            Was::Absent => return Ok(Some(v)),
            Was::Payload(b) if current == b => (true, true),
            Was::Payload(b) if v == b => (false, true),
            Was::Payload(_) => {
                return Err(EncodeError(format!(
                    "{view_name} ({v:?}) disagrees with {field} ({current:?}), and both differ from the payload: \
                     make them agree or drop one"
                )))
            }
            Was::Unknown => (self.prefer == Prefer::View, false),
        };
        self.settled.push(Settled { view: view_name.into(), field: field.into(), view_won, by_payload });
        Ok(view_won.then_some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_still_holding_the_payload_s_value_follows_the_other() {
        let mut v = Views::new(Prefer::Field);
        // The view edited (the field still holds the payload's 1): the view wins.
        assert_eq!(v.settle(Some(2), 1, Was::Payload(1), "view", "field").unwrap(), Some(2));
        // The field edited (the view still says the payload's 1): the view follows.
        assert_eq!(v.settle(Some(1), 3, Was::Payload(1), "view", "field").unwrap(), None);
        assert!(!v.unpinned());
        assert_eq!(v.settled[1].text(), "view follows field");
        // Both moved apart: a contradiction.
        assert!(v.settle(Some(2), 3, Was::Payload(1), "view", "field").unwrap_err().0.contains("both differ"));
        // Agreeing, absent, or the field absent from the line: nothing to settle.
        assert_eq!(v.settle(Some(3), 3, Was::Unknown, "view", "field").unwrap(), None);
        assert_eq!(v.settle(None, 3, Was::Unknown, "view", "field").unwrap(), None);
        assert_eq!(v.settle(Some(4), 0, Was::Absent, "view", "field").unwrap(), Some(4));
        assert_eq!(v.settled.len(), 2);
    }

    #[test]
    fn without_a_payload_prefer_decides_and_says_it_did() {
        for (prefer, wins) in [(Prefer::Field, None), (Prefer::View, Some(2))] {
            let mut v = Views::new(prefer);
            assert_eq!(v.settle(Some(2), 1, Was::Unknown, "view", "field").unwrap(), wins);
            assert!(v.unpinned());
        }
    }
}
