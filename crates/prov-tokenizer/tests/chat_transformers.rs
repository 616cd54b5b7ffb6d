//! The chat template against transformers: `apply_chat_template` with
//! [`prov_tokenizer::chat::HF_CHAT_TEMPLATE`] on the same `tokenizer.json` gives the ids of
//! [`ChatTemplate::render`] and, through its `{% generation %}` blocks, the same loss mask
//! (`return_assistant_tokens_mask`); with `add_generation_prompt`, the ids of
//! [`ChatTemplate::render_prompt`]. The conversations are translation requests built from real
//! UDHR articles (the quickstart's sample: the same article in eight languages).

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use std::collections::BTreeMap;

use prov_tokenizer::chat::{ChatTemplate, HF_CHAT_TEMPLATE, Message, Role};
use prov_tokenizer::{TokenizerConfig, train_tokenizer};
use serde_json::{Value, json};
use tokenizers::Tokenizer;

const TRANSFORMERS: &str = r#"
import json, sys
from transformers import PreTrainedTokenizerFast

case = json.load(sys.stdin)
tok = PreTrainedTokenizerFast(tokenizer_file=case["tokenizer"], bos_token="<|bos|>", eos_token="<|eos|>",
                              pad_token="<|pad|>")
tok.chat_template = case["template"]
out = []
for messages in case["conversations"]:
    full = tok.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    prompt = tok.apply_chat_template(messages[:-1], tokenize=True, return_dict=True, add_generation_prompt=True)
    out.append({"ids": list(full["input_ids"]), "mask": list(full["assistant_masks"]),
                "prompt": list(prompt["input_ids"])})
json.dump(out, sys.stdout)
"#;

/// Article number -> language -> text, from the quickstart's UDHR sample.
fn articles() -> BTreeMap<String, BTreeMap<String, String>> {
    let path = prov_testkit::repo_root().join("recipes/data/quickstart/udhr-sample.jsonl");
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for line in fs_err::read_to_string(path).unwrap().lines() {
        let doc: Value = serde_json::from_str(line).unwrap();
        let id = doc["id"].as_str().unwrap();
        let article = id.rsplit('-').next().unwrap().to_owned();
        out.entry(article)
            .or_default()
            .insert(doc["language"].as_str().unwrap().to_owned(), doc["text"].as_str().unwrap().to_owned());
    }
    out
}

#[test]
fn ids_and_loss_mask_equal_transformers_apply_chat_template() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let articles = articles();
    let texts = articles.values().flat_map(|by_language| by_language.values().cloned()).collect::<Vec<_>>();
    let bytes = train_tokenizer(&TokenizerConfig { vocab_size: 1000, min_frequency: 2 }, texts.into_iter()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokenizer.json");
    fs_err::write(&file, &bytes).unwrap();
    let template = ChatTemplate::new(Tokenizer::from_bytes(&bytes).unwrap()).unwrap();

    // Each article translated between neighbouring languages, some with a system or developer
    // message, one a two-turn conversation.
    let languages = ["de-1996", "en", "fr", "it", "nl", "pl", "pt-PT", "es"];
    let mut conversations: Vec<Vec<Message>> = Vec::new();
    for (n, by_language) in articles.values().enumerate() {
        let (from, to) = (languages[n % 8], languages[(n + 1) % 8]);
        let (Some(source), Some(target)) = (by_language.get(from), by_language.get(to)) else { continue };
        let mut messages = Vec::new();
        if n % 3 == 0 {
            messages.push(Message::new(Role::System, "You translate the Universal Declaration of Human Rights."));
        }
        if n % 4 == 0 {
            messages.push(Message::new(Role::Developer, "Answer with the translation only."));
        }
        messages.push(Message::new(Role::User, format!("Translate this article from {from} into {to}:\n\n{source}")));
        messages.push(Message::new(Role::Assistant, target.clone()));
        if n % 5 == 0 {
            messages.push(Message::new(Role::User, "And back, please."));
            messages.push(Message::new(Role::Assistant, source.clone()));
        }
        conversations.push(messages);
    }
    assert!(conversations.len() >= 30, "{}", conversations.len());

    let case = json!({"tokenizer": file, "template": HF_CHAT_TEMPLATE, "conversations": conversations});
    let stdout = prov_testkit::run_python(&python, TRANSFORMERS, case.to_string().as_bytes());
    let theirs: Vec<Value> = serde_json::from_slice(&stdout).unwrap();

    let mut trained_tokens = 0;
    for (messages, hf) in conversations.iter().zip(&theirs) {
        let ours = template.render(messages).unwrap();
        let ids: Vec<u32> = serde_json::from_value(hf["ids"].clone()).unwrap();
        assert_eq!(ours.ids, ids, "{messages:?}");
        let mask: Vec<bool> = hf["mask"].as_array().unwrap().iter().map(|v| v.as_u64() == Some(1)).collect();
        assert_eq!(ours.trained, mask, "{messages:?}");
        let prompt: Vec<u32> = serde_json::from_value(hf["prompt"].clone()).unwrap();
        assert_eq!(template.render_prompt(&messages[..messages.len() - 1]).unwrap(), prompt, "{messages:?}");
        trained_tokens += ours.trained.iter().filter(|&&t| t).count();
    }
    assert!(trained_tokens > 1000, "{trained_tokens}");
}
