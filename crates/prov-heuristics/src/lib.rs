//! EuroLLM's heuristic quality filter (EuroLLM-22B report, §2.3): the rules on one document's
//! text ([`rules`]: which pages are dropped whole, which paragraphs are dropped, and exactly
//! what a paragraph, a word, a letter and a symbol are) and the `heuristics` filter stage
//! ([`stage`]) that applies them to a dataset with a ledger naming the rule behind each removal.
//!
//! The report applies these rules to German, Spanish, French and Italian web data; the stage
//! does the same by default and takes any list of languages.

pub mod rules;
pub mod stage;

pub use rules::{Measures, Outcome, PageMatch, PageRule, ParagraphRule, Thresholds, assess, page_rule};
pub use stage::{HeuristicsConfig, HeuristicsStage};

/// Registers the `heuristics` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(HeuristicsStage));
}
