//! Where this matcher and Protego 0.7.0 disagree, on real robots.txt excerpts.
//!
//! `protego-disagreements.json` holds one or two cases per class of disagreement found on the
//! main job's snapshot (see the book's robots benchmark). This test asserts the RFC 9309
//! answer; `scripts/bench_robots_protego.py --check-fixture` checks that Protego still gives
//! the answer noted next to it.

use serde::Deserialize;

use super::{CheckOptions, RobotsTxt, request_path};

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    class: String,
    host: String,
    agent: String,
    url: String,
    rfc9309: bool,
    protego: bool,
    why: String,
    body: String,
}

#[test]
fn our_answers_follow_rfc_9309_where_protego_differs() {
    let fixture: Fixture =
        serde_json::from_str(include_str!("protego-disagreements.json")).expect("the fixture is valid JSON");
    assert!(fixture.cases.len() >= 10);
    for case in &fixture.cases {
        assert!(!case.why.is_empty());
        let robots = RobotsTxt::parse(case.body.as_bytes());
        let decision = robots.check(&case.agent, &case.url);
        let fast = robots.is_allowed(&case.agent, &request_path(&case.url), CheckOptions::default());
        assert_eq!(fast, decision.allowed, "{}: the fast path agrees", case.class);
        assert_eq!(
            decision.allowed, case.rfc9309,
            "{} ({}): {} for {}: {:?}",
            case.class, case.host, case.url, case.agent, decision
        );
    }
    // Every class but the fixed one, and the encoded URL, is a real disagreement.
    let agreeing = fixture.cases.iter().filter(|c| c.rfc9309 == c.protego).count();
    assert_eq!(agreeing, 2);
}
