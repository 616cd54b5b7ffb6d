//! Term-list filters (the AFM report, §3.1.1 and §3.1.4): a pinned list of terms ([`TermList`],
//! read from a file with its line numbers), the occurrences of its terms in a text
//! ([`TermList::scan`]: every (term, position) pair, overlapping ones included, whole words or
//! any substring, with or without case), and the `term-filter` stage ([`stage`]), which removes
//! the documents that match (a profanity list) or keeps only them (math tags and symbols),
//! with a ledger naming the first term and the count.
//!
//! What a list holds is the recipe's choice, pinned like any input: the report publishes none
//! of its lists. The book's "The AFM recipe" specifies the matching precisely enough for an
//! independent implementation (`tests/python/term_filter_reference.py`).

pub mod list;
pub mod stage;

pub use list::{CaseMode, MatchMode, Scan, TermList};
pub use stage::{FilterMode, TermFilterConfig, TermFilterStage, TermLists, read_term_lists};

/// Registers the `term-filter` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(TermFilterStage));
}
