//! The `analyze` test binary: `roce analyze` on captures made here (RC over the simulated
//! link's loss, duplication and reordering, so that retransmissions, NAKs and RNR NAKs
//! appear; ECN-marked frames and CNPs crafted with `roce encode`) and on tests/data, every
//! count checked against one computed here from tshark's fields; the annotated pcapng read
//! back by tshark; the HTML report rendered by headless chromium.

#[path = "../common/mod.rs"]
mod common;

mod captures;
mod flow_oracle;
mod html;
mod native_ib;
mod oracle;
mod schema;
