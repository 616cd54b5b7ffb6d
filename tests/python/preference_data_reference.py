"""An independent reference implementation of the `preference-data` stage (graded preference data).

An independent transcription of the book's "Graded preference data", written without reading
the Rust code (nothing under crates/ was read while writing it), from:

  - book/src/afm.md, "## The reward model" -> "### Graded preference data": the output format,
    the scores (chrF, precision P, recall R), the pairs and their levels, the four grades, the
    refusals (an empty reference; no prompt with two responses of different chrF);
  - book/src/afm.md, "## Term-list filters: profanity and math", for how the unsafe-term lists
    are read and matched (whole words, case-insensitive, a directory of `<language>.txt`
    lists with license/notice/README files passed over, every occurrence counted). The list
    reading and the occurrence count are imported from the equally independent
    tests/python/term_filter_reference.py (read_lists, index_terms, occurrences), unmodified;
  - book/src/alignment.md, "## Completion data", for the completions file's fields.

chrF is PyPI sacrebleu's own (sacrebleu.metrics.CHRF() with its defaults: char_order 6,
word_order 0, beta 2, no lowercasing, whitespace removed, effective-order averaging), and the
per-order statistics [hyp, ref, match] x 6 are sacrebleu's `_compute_segment_statistics` for
the response against `_extract_reference_info([reference])`. P and R are averaged exactly as
sacrebleu's `_compute_f_score` averages them (summed in order over the orders with n_hyp > 0
and n_ref > 0, then divided by their number; both 0.0 when there is none).

Usage:

  preference_data_reference.py COMPLETIONS_JSONL TERMS_PATH PARAMS_JSON

  COMPLETIONS_JSONL  JSON Lines, one prompt a line:
                     {"id", "prompt_ids": [...], "reference": "...",
                      "completions": [{"ids": [...], "text": "..."}, ...]}
  TERMS_PATH         a term-list file, or a directory of `<language>.txt` lists
  PARAMS_JSON        a JSON object with any of level_margins ([20, 10, 5]),
                     recall_levels ([0.2, 0.4]), precision_levels ([0.2, 0.4]),
                     length_bounds ([0.5, 2]); a missing one takes the book's default

Prints the preference file on stdout, one JSON object per prompt (json.dumps, keys in the
order id, prompt_ids, responses, pairs):

  {"id", "prompt_ids",
   "responses": [{"ids", "text", "chrf", "precision", "recall", "length_ratio",
                  "unsafe_terms",
                  "grades": {"instruction_following", "verbosity", "truthfulness",
                             "harmlessness"}}, ...],
   "pairs": [{"chosen", "rejected", "level"}, ...]}

and the statistics (pairs per level, responses per grade level) as one JSON object on stderr.
A refusal exits 1 with the reason on stderr (nothing on stdout).

The rules, as transcribed:

  - chrf: sacrebleu's sentence chrF of the response's `text` against the prompt's `reference`
    (0-100, unrounded f64). It is also recomputed from the statistics with
    `_compute_f_score` and asserted equal.
  - pairs: for every i < j (completion order), in the order (0,1), (0,2), ..., (1,2), ...,
    when chrf_i != chrf_j: chosen = the higher, rejected = the other; d = chrf_chosen -
    chrf_rejected (f64 subtraction); level "significantly-better" if d >= m0, "better" if
    d >= m1, "slightly-better" if d >= m2, else "negligibly-better" (level_margins [m0,m1,m2]).
  - instruction_following: from R with recall_levels [a, b]: 0 if R < a, 1 if R < b, else 2
    (a value equal to a cut point is above it). truthfulness: the same from P with
    precision_levels.
  - verbosity: length_ratio = len(text) / len(reference) in code points (Python str length =
    Unicode scalar values for valid text); with length_bounds [lo, hi]: 0 if ratio < lo, 2 if
    ratio > hi, else 1. An empty reference (zero characters) is refused.
  - harmlessness: unsafe_terms = the occurrences, in the lowercased text, of the terms of every
    list (each lowercased alone), counted with the word check (term-filter's `match: word`,
    `case: insensitive`); with a directory, every list is applied to every response and the
    counts are summed. 2 with 0, 1 with 1, 0 with more.
  - a completions file where no prompt has a pair is refused.

Readings taken where the book is not explicit (documented so that a difference can be traced):

  1. "every list of a directory of lists, counted together" is read as the sum of the
     per-list occurrence counts: a term in two lists (e.g. `merde` in fr.txt and in nl.txt)
     counts once per list that holds it. The response's language is not used.
  2. A directory that holds no list is refused (afm.md: "and so does a directory that holds
     no list"); the lists themselves are read and checked by term_filter_reference.read_lists
     (byte order mark, no term, a repeated term after lowercasing, stray files are refused).
  3. Level names for the three lower levels are "better", "slightly-better",
     "negligibly-better" (the book's example shows only "significantly-better"; the others
     follow its spelling of the level names in the text).
  4. Params: each must be a list of finite numbers of the right length (3, 2, 2, 2); unknown
     param names are refused. The book states no order constraint on the cut points, so none
     is enforced; the rules are applied literally as above.
  5. Completions with `ids` empty or fewer than two completions are not refused here (the
     book's preference-data section does not say); a prompt with one completion simply has no
     pair. Unknown fields in the completions file are refused (alignment.md).
"""

import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import term_filter_reference as tf  # noqa: E402  (read_lists, index_terms, occurrences)
from sacrebleu.metrics import CHRF  # noqa: E402

DEFAULTS = {
    "level_margins": [20.0, 10.0, 5.0],
    "recall_levels": [0.2, 0.4],
    "precision_levels": [0.2, 0.4],
    "length_bounds": [0.5, 2.0],
}
LENGTHS = {"level_margins": 3, "recall_levels": 2, "precision_levels": 2, "length_bounds": 2}
LEVELS = ["significantly-better", "better", "slightly-better", "negligibly-better"]
GRADES = ["instruction_following", "verbosity", "truthfulness", "harmlessness"]


class Refusal(Exception):
    pass


def parse_params(text):
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise Refusal(f"params: not JSON: {e}")
    if not isinstance(obj, dict):
        raise Refusal("params: expected a JSON object")
    params = {}
    for name in obj:
        if name not in DEFAULTS:
            raise Refusal(f"params: unknown param `{name}`")
    for name, default in DEFAULTS.items():
        value = obj.get(name, default)
        if not isinstance(value, list) or len(value) != LENGTHS[name]:
            raise Refusal(f"params: `{name}` must be a list of {LENGTHS[name]} numbers")
        out = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise Refusal(f"params: `{name}` must hold finite numbers, found {v!r}")
            out.append(float(v))
        params[name] = out
    return params


# ---------------------------------------------------------------------------------------------
# Completions file


def _is_id_list(v):
    return isinstance(v, list) and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v
    )


def read_completions(path):
    prompts = []
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\xef\xbb\xbf"):
        raise Refusal(f"{path}: starts with a byte order mark")
    content = data.decode("utf-8")
    for lineno, line in enumerate(content.split("\n"), start=1):
        if line.strip() == "":
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise Refusal(f"{path}:{lineno}: not JSON: {e}")
        if not isinstance(obj, dict):
            raise Refusal(f"{path}:{lineno}: not a JSON object")
        extra = set(obj) - {"id", "prompt_ids", "reference", "completions"}
        if extra:
            raise Refusal(f"{path}:{lineno}: unknown field(s) {sorted(extra)}")
        for field in ("id", "prompt_ids", "reference", "completions"):
            if field not in obj:
                raise Refusal(f"{path}:{lineno}: field `{field}` is missing")
        if not isinstance(obj["id"], str):
            raise Refusal(f"{path}:{lineno}: `id` must be a string")
        if not _is_id_list(obj["prompt_ids"]):
            raise Refusal(f"{path}:{lineno}: `prompt_ids` must be a list of token ids")
        if not isinstance(obj["reference"], str):
            raise Refusal(f"{path}:{lineno}: `reference` must be a string")
        if not isinstance(obj["completions"], list):
            raise Refusal(f"{path}:{lineno}: `completions` must be a list")
        for j, c in enumerate(obj["completions"]):
            if not isinstance(c, dict) or set(c) != {"ids", "text"}:
                raise Refusal(f"{path}:{lineno}: `completions[{j}]` must be {{ids, text}}")
            if not _is_id_list(c["ids"]) or not isinstance(c["text"], str):
                raise Refusal(f"{path}:{lineno}: `completions[{j}]`: bad `ids` or `text`")
        prompts.append(obj)
    if not prompts:
        raise Refusal(f"{path}: no prompts")
    return prompts


# ---------------------------------------------------------------------------------------------
# Scores

_CHRF = CHRF()  # char_order=6, word_order=0, beta=2
assert (_CHRF.char_order, _CHRF.word_order, _CHRF.beta) == (6, 0, 2)


def precision_recall(stats, order):
    """P and R exactly as sacrebleu's _compute_f_score averages them (effective order)."""
    avg_prec, avg_rec = 0.0, 0.0
    effective_order = 0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i: 3 * i + 3]
        if n_hyp > 0 and n_ref > 0:
            avg_prec += n_match / n_hyp
            avg_rec += n_match / n_ref
            effective_order += 1
    if effective_order == 0:
        return 0.0, 0.0
    return avg_prec / effective_order, avg_rec / effective_order


def scores(text, reference):
    """Returns (chrf, P, R) for one response against the reference."""
    ref_info = _CHRF._extract_reference_info([_CHRF._preprocess_segment(reference)])
    stats = _CHRF._compute_segment_statistics(_CHRF._preprocess_segment(text), ref_info)
    chrf = _CHRF._compute_f_score(stats)
    sentence = _CHRF.sentence_score(text, [reference]).score
    assert chrf == sentence, (chrf, sentence)
    p, r = precision_recall(stats, _CHRF.order)
    return chrf, p, r


# ---------------------------------------------------------------------------------------------
# Grades and levels


def three_levels(value, cuts):
    a, b = cuts
    if value < a:
        return 0
    if value < b:
        return 1
    return 2


def verbosity(ratio, bounds):
    lo, hi = bounds
    if ratio < lo:
        return 0
    if ratio > hi:
        return 2
    return 1


def harmlessness(n):
    return 2 if n == 0 else (1 if n == 1 else 0)


def level(d, margins):
    for name, m in zip(LEVELS, margins):
        if d >= m:
            return name
    return LEVELS[3]


class UnsafeTerms:
    def __init__(self, path):
        per_language, lists = tf.read_lists(path, "insensitive")
        if per_language and not lists:
            raise Refusal(f"{path}: the directory holds no list")
        # every list of a directory applies to every response (reading 1)
        self.indexes = [tf.index_terms(lists[k]) for k in sorted(lists)]

    def count(self, text):
        t = text.lower()
        return sum(tf.occurrences(t, by_first, "word")[0] for by_first in self.indexes)


# ---------------------------------------------------------------------------------------------


def derive(prompts, unsafe, params):
    out = []
    stats = {"pairs": {name: 0 for name in LEVELS},
             "grades": {g: [0, 0, 0] for g in GRADES}}
    any_pair = False
    for k, prompt in enumerate(prompts):
        reference = prompt["reference"]
        if len(reference) == 0:
            raise Refusal(f"prompt {k} (`{prompt['id']}`): the reference is empty")
        responses = []
        for c in prompt["completions"]:
            text = c["text"]
            chrf, p, r = scores(text, reference)
            ratio = len(text) / len(reference)
            n_unsafe = unsafe.count(text)
            grades = {
                "instruction_following": three_levels(r, params["recall_levels"]),
                "verbosity": verbosity(ratio, params["length_bounds"]),
                "truthfulness": three_levels(p, params["precision_levels"]),
                "harmlessness": harmlessness(n_unsafe),
            }
            for g in GRADES:
                stats["grades"][g][grades[g]] += 1
            responses.append({
                "ids": c["ids"], "text": text, "chrf": chrf, "precision": p, "recall": r,
                "length_ratio": ratio, "unsafe_terms": n_unsafe, "grades": grades,
            })
        pairs = []
        for i in range(len(responses)):
            for j in range(i + 1, len(responses)):
                ci, cj = responses[i]["chrf"], responses[j]["chrf"]
                if ci == cj:
                    continue
                chosen, rejected = (i, j) if ci > cj else (j, i)
                d = responses[chosen]["chrf"] - responses[rejected]["chrf"]
                name = level(d, params["level_margins"])
                stats["pairs"][name] += 1
                pairs.append({"chosen": chosen, "rejected": rejected, "level": name})
        any_pair = any_pair or bool(pairs)
        out.append({"id": prompt["id"], "prompt_ids": prompt["prompt_ids"],
                    "responses": responses, "pairs": pairs})
    if not any_pair:
        raise Refusal("no prompt has two responses with different chrF: nothing to learn")
    return out, stats


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\nUsage:")[0], file=sys.stderr)
        print("usage: preference_data_reference.py COMPLETIONS_JSONL TERMS_PATH PARAMS_JSON",
              file=sys.stderr)
        return 2
    try:
        params = parse_params(argv[2])
        unsafe = UnsafeTerms(argv[1])
        prompts = read_completions(argv[0])
        out, stats = derive(prompts, unsafe, params)
    except (Refusal, tf.Refusal, OSError, UnicodeDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for record in out:
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(json.dumps(stats), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
