//! The decoder: pre-norm RMSNorm, no biases, RoPE and grouped-query attention, in one of three
//! architectures ([`Architecture`]): Apertus' (QK-norm, a non-gated MLP with the xIELU
//! activation and untied embeddings, as the Apertus report describes it), EuroLLM's (a SwiGLU
//! MLP, no QK-norm, untied embeddings, as the EuroLLM-22B report's §2.1 describes it) or AFM's
//! (a SwiGLU MLP, QK-norm, and the input embedding as the output layer, as the AFM report's
//! §2 describes it).
//!
//! Parameter names are those of transformers' `ApertusForCausalLM`, `LlamaForCausalLM` or
//! `Qwen3ForCausalLM`
//! (`model.layers.0.self_attn.q_proj.weight`, ...), so that a checkpoint exports to a Hugging
//! Face folder by renaming nothing. Parameters are created in one fixed order (embedding,
//! then each layer, then the final norm and the output embedding), so that libtorch's
//! generator, seeded once before [`Decoder::new`], initialises them identically every time.
//!
//! The attention is written out (scores, causal mask, softmax in `f32`, weighted sum) rather
//! than calling a fused kernel, so that the forward and backward passes are the plain
//! operations whose determinism on CPU the envelope covers.

use tch::nn::{self, Init};
use tch::{Device, Kind, Tensor};

pub use prov_train::model_config::{
    Architecture, ModelConfig, XIELU_ALPHA_INIT, XIELU_BETA, XIELU_EPS, is_linear_projection,
};

/// A projection matrix `W` (`[out, in]`), and the LoRA adapter attached to it, if any: `x W^T`,
/// plus `scaling · (x A^T) B^T` with an adapter, in that order of operations (PEFT's LoRA
/// `Linear` without dropout: `base_layer(x) + lora_B(lora_A(x)) * scaling`).
struct Projection {
    weight: Tensor,
    lora: Option<LowRank>,
}

/// A LoRA adapter of one projection: `A` (`[rank, in]`), `B` (`[out, rank]`), `alpha / rank`.
struct LowRank {
    a: Tensor,
    b: Tensor,
    scaling: f64,
}

impl Projection {
    fn new(weight: Tensor) -> Self {
        Self { weight, lora: None }
    }

    fn apply(&self, x: &Tensor) -> Tensor {
        let base = x.linear::<Tensor>(&self.weight, None);
        match &self.lora {
            None => base,
            Some(l) => base + x.linear::<Tensor>(&l.a, None).linear::<Tensor>(&l.b, None) * l.scaling,
        }
    }
}

/// One decoder layer's parameters.
struct Layer {
    attention_norm: Tensor,
    q_proj: Projection,
    k_proj: Projection,
    v_proj: Projection,
    o_proj: Projection,
    /// Apertus' QK-norm weights; none in EuroLLM's architecture.
    qk_norm: Option<(Tensor, Tensor)>,
    feedforward_norm: Tensor,
    mlp: Mlp,
}

/// A layer's MLP.
enum Mlp {
    /// Apertus': `down(xielu(up(x)))`, with xIELU's two raw slopes.
    Xielu { up_proj: Projection, down_proj: Projection, alpha_p: Tensor, alpha_n: Tensor },
    /// EuroLLM's: `down(silu(gate(x)) * up(x))`.
    SwiGlu { gate_proj: Projection, up_proj: Projection, down_proj: Projection },
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        match self {
            Self::Xielu { up_proj, down_proj, alpha_p, alpha_n } => {
                down_proj.apply(&xielu(&up_proj.apply(x), alpha_p, alpha_n))
            }
            Self::SwiGlu { gate_proj, up_proj, down_proj } => {
                down_proj.apply(&(gate_proj.apply(x).silu() * up_proj.apply(x)))
            }
        }
    }

    /// The projections, by their names under `mlp`, in creation order.
    fn projections_mut(&mut self) -> Vec<(&'static str, &mut Projection)> {
        match self {
            Self::Xielu { up_proj, down_proj, .. } => vec![("up_proj", up_proj), ("down_proj", down_proj)],
            Self::SwiGlu { gate_proj, up_proj, down_proj } => {
                vec![("gate_proj", gate_proj), ("up_proj", up_proj), ("down_proj", down_proj)]
            }
        }
    }
}

/// The decoder, its parameters held in a [`nn::VarStore`] under transformers' names.
pub struct Decoder {
    config: ModelConfig,
    embed_tokens: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    /// The output layer; none when it is the input embedding (AFM's shared embedding).
    lm_head: Option<Tensor>,
    /// A reward model's heads ([`Decoder::attach_reward_heads`]).
    reward_heads: Option<RewardHeadLayers>,
}

/// A reward model's heads on the last token's final hidden state `e` (the book's "The AFM
/// recipe", The model and its loss): a score `w·e + b`, and per grade
/// `W2 · relu(W1 · e + b1) + b2`.
struct RewardHeadLayers {
    score: (Tensor, Tensor),
    grades: Vec<[Tensor; 4]>,
}

/// What a reward model says of a batch: the scores `[batch]` and each grade head's logits
/// `[batch, levels]`, in the heads' order.
pub struct RewardOutput {
    /// The scores.
    pub scores: Tensor,
    /// The grade logits.
    pub grades: Vec<Tensor>,
}

/// The inverse of softplus: the raw parameter whose softplus is `y`.
fn softplus_inverse(y: f64) -> f64 {
    y.exp_m1().ln()
}

impl Decoder {
    /// Creates the parameters under `root`, initialised from libtorch's generator (seed it
    /// first): matrices from N(0, `init_std`), norm weights one, xIELU's raw slopes so that
    /// both slopes are 0.8.
    pub fn new(root: &nn::Path<'_>, config: &ModelConfig) -> Self {
        let c = config;
        let normal = Init::Randn { mean: 0.0, stdev: c.init_std };
        let model = root / "model";
        let embed_tokens = (&model / "embed_tokens").var("weight", &[c.vocab_size, c.hidden_size], normal);
        let layers = (0..c.num_hidden_layers).map(|i| Layer::new(&(&model / "layers" / i), c)).collect();
        let norm = (&model / "norm").var("weight", &[c.hidden_size], Init::Const(1.0));
        let lm_head = (!c.architecture.ties_embeddings())
            .then(|| (root / "lm_head").var("weight", &[c.vocab_size, c.hidden_size], normal));
        Self { config: config.clone(), embed_tokens, layers, norm, lm_head, reward_heads: None }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Changes RoPE's base and the context length, as a phase of EuroLLM's schedule extends
    /// the context (§2.2); the weights stay as they are.
    pub fn extend_context(&mut self, rope_theta: f64, max_position_embeddings: i64) {
        self.config.rope_theta = rope_theta;
        self.config.max_position_embeddings = max_position_embeddings;
    }

    /// Logits `[batch, time, vocab]` for token ids `[batch, time]`.
    pub fn forward(&self, ids: &Tensor) -> Tensor {
        self.run(ids, None)
    }

    /// Logits `[batch, time, vocab]` for token ids `[batch, time]` that follow the positions
    /// `cache` holds (none at first); appends their keys and values to `cache`. Continuing a
    /// sequence one token at a time this way computes each position once instead of once per
    /// later token. The logits are those of [`Decoder::forward`] on the whole sequence up to
    /// rounding: the matrix products have other shapes.
    pub fn forward_cached(&self, ids: &Tensor, cache: &mut KvCache) -> Tensor {
        if cache.layers.is_empty() {
            cache.layers = self.layers.iter().map(|_| None).collect();
        }
        let logits = self.run(ids, Some(cache));
        cache.len += ids.size2().expect("token ids are [batch, time]").1;
        logits
    }

    /// The final-normalised hidden states `[batch, time, width]` (what the output layer reads).
    fn hidden_states(&self, ids: &Tensor, mut cache: Option<&mut KvCache>) -> Tensor {
        let c = &self.config;
        let (_, time) = ids.size2().expect("token ids are [batch, time]");
        let start = cache.as_ref().map_or(0, |k| k.len);
        let (cos, sin) = rope_tables(c, start, time, ids.device());
        let mask = causal_mask(time, start, ids.device());
        let mut h = Tensor::embedding(&self.embed_tokens, ids, -1, false, false);
        for (i, layer) in self.layers.iter().enumerate() {
            let x = rms_norm(&h, &layer.attention_norm, c.rms_norm_eps);
            let past = cache.as_mut().map(|k| &mut k.layers[i]);
            h = &h + self.attention(layer, &x, &cos, &sin, &mask, past);
            let x = rms_norm(&h, &layer.feedforward_norm, c.rms_norm_eps);
            h = &h + layer.mlp.forward(&x);
        }
        rms_norm(&h, &self.norm, c.rms_norm_eps)
    }

    fn run(&self, ids: &Tensor, cache: Option<&mut KvCache>) -> Tensor {
        self.hidden_states(ids, cache).linear::<Tensor>(self.lm_head.as_ref().unwrap_or(&self.embed_tokens), None)
    }

    /// Attaches a reward model's heads ([`RewardHeadLayers`]) for `heads`, created under
    /// `root` in this order, from libtorch's generator (seed it first): `reward.score.weight`
    /// `[1, H]`, `reward.score.bias` `[1]`, then per grade `reward.grades.<grade>.0.weight`
    /// `[M, H]`, `.0.bias` `[M]`, `.2.weight` `[levels, M]`, `.2.bias` `[levels]`; weights
    /// uniform in `±1/sqrt(fan_in)`, biases zero.
    pub fn attach_reward_heads(&mut self, root: &nn::Path<'_>, heads: &prov_train::reward_model::RewardHeads) {
        let uniform = |fan_in: i64| {
            let bound = 1.0 / (fan_in as f64).sqrt();
            Init::Uniform { lo: -bound, up: bound }
        };
        let (h, m, levels) = (self.config.hidden_size, heads.grade_hidden, i64::from(heads.levels));
        let reward = root / "reward";
        let score = &reward / "score";
        let score = (score.var("weight", &[1, h], uniform(h)), score.var("bias", &[1], Init::Const(0.0)));
        let grades = heads
            .grades
            .iter()
            .map(|grade| {
                let head = &reward / "grades" / grade.as_str();
                let (inner, outer) = (&head / "0", &head / "2");
                [
                    inner.var("weight", &[m, h], uniform(h)),
                    inner.var("bias", &[m], Init::Const(0.0)),
                    outer.var("weight", &[levels, m], uniform(m)),
                    outer.var("bias", &[levels], Init::Const(0.0)),
                ]
            })
            .collect();
        self.reward_heads = Some(RewardHeadLayers { score, grades });
    }

    /// Whether it has a reward model's heads.
    pub fn is_reward_model(&self) -> bool {
        self.reward_heads.is_some()
    }

    /// The reward model's outputs for token ids `[batch, time]` (right-padded), read at each
    /// row's last token `last` (`[batch]`, int64): the final-normalised hidden state there,
    /// through the heads. `None` without heads.
    pub fn reward(&self, ids: &Tensor, last: &Tensor) -> Option<RewardOutput> {
        let heads = self.reward_heads.as_ref()?;
        let hidden = self.hidden_states(ids, None);
        let (batch, _, width) = hidden.size3().expect("hidden states are [batch, time, width]");
        let at = last.view([batch, 1, 1]).expand([batch, 1, width], false);
        let e = hidden.gather(1, &at, false).squeeze_dim(1);
        let scores = e.linear(&heads.score.0, Some(&heads.score.1)).squeeze_dim(-1);
        let grades =
            heads.grades.iter().map(|[w1, b1, w2, b2]| e.linear(w1, Some(b1)).relu().linear(w2, Some(b2))).collect();
        Some(RewardOutput { scores, grades })
    }

    // q, k, v, x and c are the names the papers and transformers use; longer ones would hide that.
    #[allow(clippy::many_single_char_names)]
    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &Tensor,
        past: Option<&mut Option<(Tensor, Tensor)>>,
    ) -> Tensor {
        let c = &self.config;
        let (batch, time, _) = x.size3().expect("hidden states are [batch, time, width]");
        let head_dim = c.head_dim();
        let heads = |w: &Projection, n: i64| w.apply(x).view([batch, time, n, head_dim]).transpose(1, 2);
        let (q, k) = (heads(&layer.q_proj, c.num_attention_heads), heads(&layer.k_proj, c.num_key_value_heads));
        let (q, k) = match &layer.qk_norm {
            Some((q_norm, k_norm)) => (rms_norm(&q, q_norm, c.rms_norm_eps), rms_norm(&k, k_norm, c.rms_norm_eps)),
            None => (q, k),
        };
        let v = heads(&layer.v_proj, c.num_key_value_heads);
        let (q, k) = (apply_rope(&q, cos, sin), apply_rope(&k, cos, sin));
        // With a cache, attend over the earlier positions' keys and values too.
        let (k, v) = match past {
            None => (k, v),
            Some(slot) => {
                let (k, v) = match slot.take() {
                    None => (k, v),
                    Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 2), Tensor::cat(&[&pv, &v], 2)),
                };
                *slot = Some((k.shallow_clone(), v.shallow_clone()));
                (k, v)
            }
        };
        // Grouped-query attention: each key-value head serves consecutive query heads.
        let group = c.num_attention_heads / c.num_key_value_heads;
        let (k, v) = if group == 1 {
            (k, v)
        } else {
            (k.repeat_interleave_self_int(group, 1, None), v.repeat_interleave_self_int(group, 1, None))
        };
        let scale = 1.0 / (head_dim as f64).sqrt();
        let scores = q.matmul(&k.transpose(-2, -1)) * scale + mask;
        let weights = scores.softmax(-1, Kind::Float);
        layer.o_proj.apply(&weights.matmul(&v).transpose(1, 2).contiguous().view([batch, time, c.hidden_size]))
    }

    /// Attaches a LoRA adapter of rank `rank` and scaling `alpha / rank` to every projection of
    /// every attention and feed-forward block ([`is_linear_projection`]), its matrices created
    /// under `root` with PEFT's names (`model.layers.0.self_attn.q_proj.lora_A.weight`), layer
    /// by layer, in the order the projections were created: `A` uniform in `±1/sqrt(in)` (the
    /// bound of PEFT's Kaiming-uniform initialisation with `a = sqrt(5)`) from libtorch's
    /// generator (seed it first), `B` zero, so that the adapted model starts as the base.
    /// Returns the adapter's parameters by name.
    pub fn attach_lora(&mut self, root: &nn::Path<'_>, rank: i64, alpha: f64) -> Vec<(String, Tensor)> {
        let scaling = alpha / rank as f64;
        let mut created = Vec::new();
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let base = root / "model" / "layers" / i;
            let attention = [
                ("q_proj", &mut layer.q_proj),
                ("k_proj", &mut layer.k_proj),
                ("v_proj", &mut layer.v_proj),
                ("o_proj", &mut layer.o_proj),
            ];
            let projections = attention
                .into_iter()
                .map(|(name, p)| (format!("self_attn.{name}"), p))
                .chain(layer.mlp.projections_mut().into_iter().map(|(name, p)| (format!("mlp.{name}"), p)));
            for (name, projection) in projections {
                let (out, input) = projection.weight.size2().expect("a projection is a matrix");
                let path = name.split('.').fold(base.clone(), |p, part| &p / part);
                let bound = 1.0 / (input as f64).sqrt();
                let a = (&path / "lora_A").var("weight", &[rank, input], Init::Uniform { lo: -bound, up: bound });
                let b = (&path / "lora_B").var("weight", &[out, rank], Init::Const(0.0));
                let prefix = format!("model.layers.{i}.{name}");
                created.push((format!("{prefix}.lora_A.weight"), a.shallow_clone()));
                created.push((format!("{prefix}.lora_B.weight"), b.shallow_clone()));
                projection.lora = Some(LowRank { a, b, scaling });
            }
        }
        created
    }
}

impl Layer {
    /// Creates a layer's parameters under `p`, in a fixed order (the generator draws the
    /// matrices in it): the attention norm, the four projections, Apertus' QK-norm, the MLP's
    /// norm, then the MLP's matrices (SwiGLU's gate first) and xIELU's slopes.
    fn new(p: &nn::Path<'_>, c: &ModelConfig) -> Self {
        let normal = Init::Randn { mean: 0.0, stdev: c.init_std };
        let one = Init::Const(1.0);
        let head_dim = c.head_dim();
        let kv_width = c.num_key_value_heads * head_dim;
        let attn = p / "self_attn";
        let mlp = p / "mlp";
        // transformers names the two norms after the block for Apertus, after their place for Llama.
        let (attention_norm_name, feedforward_norm_name) = match c.architecture {
            Architecture::Apertus => ("attention_layernorm", "feedforward_layernorm"),
            Architecture::Llama | Architecture::Afm => ("input_layernorm", "post_attention_layernorm"),
        };
        let attention_norm = (p / attention_norm_name).var("weight", &[c.hidden_size], one);
        let matrix =
            |p: &nn::Path<'_>, name: &str, shape: [i64; 2]| Projection::new((p / name).var("weight", &shape, normal));
        let q_proj = matrix(&attn, "q_proj", [c.hidden_size, c.hidden_size]);
        let k_proj = matrix(&attn, "k_proj", [kv_width, c.hidden_size]);
        let v_proj = matrix(&attn, "v_proj", [kv_width, c.hidden_size]);
        let o_proj = matrix(&attn, "o_proj", [c.hidden_size, c.hidden_size]);
        let qk_norm = c.architecture.has_qk_norm().then(|| {
            let q_norm = (&attn / "q_norm").var("weight", &[head_dim], one);
            (q_norm, (&attn / "k_norm").var("weight", &[head_dim], one))
        });
        let feedforward_norm = (p / feedforward_norm_name).var("weight", &[c.hidden_size], one);
        let (wide, narrow) = ([c.intermediate_size, c.hidden_size], [c.hidden_size, c.intermediate_size]);
        let mlp_matrix = |name: &str, shape: [i64; 2]| matrix(&mlp, name, shape);
        let mlp = match c.architecture {
            Architecture::Apertus => {
                let (up_proj, down_proj) = (mlp_matrix("up_proj", wide), mlp_matrix("down_proj", narrow));
                let act = &mlp / "act_fn";
                Mlp::Xielu {
                    up_proj,
                    down_proj,
                    alpha_p: act.var("alpha_p", &[1], Init::Const(softplus_inverse(XIELU_ALPHA_INIT))),
                    alpha_n: act.var("alpha_n", &[1], Init::Const(softplus_inverse(XIELU_ALPHA_INIT - XIELU_BETA))),
                }
            }
            Architecture::Llama | Architecture::Afm => {
                let gate_proj = mlp_matrix("gate_proj", wide);
                let up_proj = mlp_matrix("up_proj", wide);
                Mlp::SwiGlu { gate_proj, up_proj, down_proj: mlp_matrix("down_proj", narrow) }
            }
        };
        Self { attention_norm, q_proj, k_proj, v_proj, o_proj, qk_norm, feedforward_norm, mlp }
    }
}

/// RMSNorm over the last dimension: `w * x / sqrt(mean(x^2) + eps)`.
fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Tensor {
    let mean_square = x.square().mean_dim(-1, true, Kind::Float);
    x * (mean_square + eps).rsqrt() * weight
}

/// xIELU as released: `alpha_p = softplus(p)`, `alpha_n = beta + softplus(n)`, and
/// `where(x > 0, alpha_p*x*x + beta*x, (expm1(min(x, eps)) - x)*alpha_n + beta*x)`.
pub fn xielu(x: &Tensor, p: &Tensor, n: &Tensor) -> Tensor {
    let alpha_p = p.softplus();
    let alpha_n = n.softplus() + XIELU_BETA;
    let positive = &alpha_p * x * x + x * XIELU_BETA;
    let negative = (x.clamp_max(XIELU_EPS).expm1() - x) * alpha_n + x * XIELU_BETA;
    positive.where_self(&x.gt(0.0), &negative)
}

/// Keys and values of the positions a [`Decoder`] has seen, layer by layer, for
/// [`Decoder::forward_cached`]. Empty at first.
#[derive(Default)]
pub struct KvCache {
    /// Per layer, keys and values `[batch, kv_heads, len, head_dim]` after RoPE.
    layers: Vec<Option<(Tensor, Tensor)>>,
    /// Positions held.
    len: i64,
}

impl KvCache {
    /// Positions held.
    pub fn len(&self) -> i64 {
        self.len
    }

    /// Whether it holds no position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// RoPE's cosine and sine tables `[time, head_dim]` for positions `start..start + time`, in
/// the half-split layout (the first half of a head pairs with the second): frequency
/// `theta^(-2i/head_dim)` for `i` below `head_dim/2`, each repeated for both halves.
fn rope_tables(c: &ModelConfig, start: i64, time: i64, device: Device) -> (Tensor, Tensor) {
    let head_dim = c.head_dim();
    let exponents =
        Tensor::arange_start_step(0, head_dim, 2, (Kind::Int64, device)).to_kind(Kind::Float) / head_dim as f64;
    let inv_freq = Tensor::from(c.rope_theta).to_kind(Kind::Float).to_device(device).pow(&exponents).reciprocal();
    let positions = Tensor::arange_start(start, start + time, (Kind::Float, device));
    let freqs = positions.unsqueeze(1).matmul(&inv_freq.unsqueeze(0));
    let angles = Tensor::cat(&[&freqs, &freqs], -1);
    (angles.cos(), angles.sin())
}

/// `x*cos + rotate_half(x)*sin` where `rotate_half([a, b]) = [-b, a]` over the head width.
fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let half = x.size().last().copied().expect("a head has a width") / 2;
    let (a, b) = (x.narrow(-1, 0, half), x.narrow(-1, half, half));
    let rotated = Tensor::cat(&[&b.neg(), &a], -1);
    x * cos + rotated * sin
}

/// `[time, start + time]` for queries at positions `start..start + time` over keys at
/// `0..start + time`: 0 where the key is not after the query, minus infinity where it is.
fn causal_mask(time: i64, start: i64, device: Device) -> Tensor {
    Tensor::full([time, start + time], f64::NEG_INFINITY, (Kind::Float, device)).triu(1 + start)
}

/// Whether the optimizer decays a parameter: matrices (the projections and both embeddings)
/// yes; norm weights and xIELU's scalars no, as is usual for one-dimensional parameters.
pub fn decays(shape: &[i64]) -> bool {
    shape.len() >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ModelConfig {
        ModelConfig { intermediate_size: 48, ..ModelConfig::small(61, 16) }
    }

    /// μParam (simple) scales exactly the seven projection matrices of each layer, as
    /// AXLearn's `mup_simple_adam_update_transformation` scales `qkv_proj`, `o_proj` and the
    /// feed-forward's three linears: not the embeddings, the head or any norm.
    #[test]
    fn the_linear_projections_are_the_seven_matrices_of_a_layer() {
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let c = ModelConfig { architecture: prov_train::model_config::Architecture::Llama, ..tiny() };
        let _ = Decoder::new(&vs.root(), &c);
        let mut linear: Vec<String> = vs.variables().into_keys().filter(|n| is_linear_projection(n)).collect();
        linear.sort();
        let per_layer = [
            "mlp.down_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "self_attn.k_proj",
            "self_attn.o_proj",
            "self_attn.q_proj",
            "self_attn.v_proj",
        ];
        let want: Vec<String> = (0..c.num_hidden_layers)
            .flat_map(|l| per_layer.iter().map(move |p| format!("model.layers.{l}.{p}.weight")))
            .collect();
        assert_eq!(linear, want);
        assert!(!is_linear_projection("lm_head.weight") && !is_linear_projection("model.embed_tokens.weight"));
    }

    #[test]
    fn parameter_names_are_transformers_names() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _ = Decoder::new(&vs.root(), &tiny());
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(names.len(), 3 + 12 * 2, "{names:?}");
        for expected in [
            "lm_head.weight",
            "model.embed_tokens.weight",
            "model.norm.weight",
            "model.layers.1.self_attn.k_norm.weight",
            "model.layers.0.mlp.act_fn.alpha_p",
            "model.layers.0.attention_layernorm.weight",
            "model.layers.1.feedforward_layernorm.weight",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected} not in {names:?}");
        }
        let vars = vs.variables();
        assert_eq!(vars["model.layers.0.self_attn.k_proj.weight"].size(), [16, 32]);
        let alpha_p = vars["model.layers.0.mlp.act_fn.alpha_p"].softplus().double_value(&[0]);
        let alpha_n = vars["model.layers.0.mlp.act_fn.alpha_n"].softplus().double_value(&[0]) + XIELU_BETA;
        assert!((alpha_p - 0.8).abs() < 1e-6 && (alpha_n - 0.8).abs() < 1e-6, "{alpha_p} {alpha_n}");
    }

    #[test]
    fn the_swiglu_decoder_has_llamas_names_and_no_qk_norm() {
        let vs = nn::VarStore::new(Device::Cpu);
        let c = ModelConfig { architecture: Architecture::Llama, ..tiny() };
        let model = Decoder::new(&vs.root(), &c);
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(names.len(), 3 + 9 * 2, "{names:?}");
        for expected in [
            "model.layers.0.input_layernorm.weight",
            "model.layers.0.post_attention_layernorm.weight",
            "model.layers.1.mlp.gate_proj.weight",
            "model.layers.1.mlp.up_proj.weight",
            "model.layers.1.mlp.down_proj.weight",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected} not in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("norm.weight") && n.contains("self_attn")), "{names:?}");
        assert_eq!(vs.variables()["model.layers.0.mlp.gate_proj.weight"].size(), [48, 32]);
        let ids = Tensor::from_slice(&[5_i64, 9, 11]).view([1, 3]);
        assert_eq!(model.forward(&ids).size(), [1, 3, 61]);
    }

    /// SwiGLU as transformers' `LlamaMLP` computes it, written out element by element.
    #[test]
    fn swiglu_is_down_of_silu_gate_times_up() {
        let matrix = |v: &[f64], shape: [i64; 2]| Tensor::from_slice(v).view(shape);
        let projection = |v: &[f64]| Projection::new(matrix(v, [2, 2]));
        let gate_proj = projection(&[1.0, -2.0, 0.5, 0.25]);
        let up_proj = projection(&[0.5, 1.5, -1.0, 2.0]);
        let down_proj = projection(&[1.0, 0.0, -1.0, 3.0]);
        let mlp = Mlp::SwiGlu { gate_proj, up_proj, down_proj };
        let input = [0.3, -0.7];
        let got: Vec<f64> = Vec::try_from(mlp.forward(&matrix(&input, [1, 2])).view([2])).unwrap();
        let silu = |v: f64| v / (1.0 + (-v).exp());
        let gate = [input[0] - 2.0 * input[1], 0.5 * input[0] + 0.25 * input[1]];
        let up = [0.5 * input[0] + 1.5 * input[1], -input[0] + 2.0 * input[1]];
        let hidden = [silu(gate[0]) * up[0], silu(gate[1]) * up[1]];
        let expected = [hidden[0], -hidden[0] + 3.0 * hidden[1]];
        for (a, b) in got.iter().zip(expected) {
            assert!((a - b).abs() < 1e-12, "{got:?} vs {expected:?}");
        }
    }

    /// A LoRA projection is `x W^T + (alpha / r) (x A^T) B^T`; attached, an adapter starts at
    /// zero (`B` = 0), so the adapted model computes the base model's logits exactly, and its
    /// matrices carry PEFT's names and shapes.
    #[test]
    fn a_lora_projection_adds_the_scaled_low_rank_product() {
        let weight = Tensor::from_slice(&[1.0, 2.0, -1.0, 0.5, 0.0, 3.0]).view([3, 2]);
        let down = Tensor::from_slice(&[0.5, -1.0]).view([1, 2]);
        let up = Tensor::from_slice(&[2.0, 0.0, -1.0]).view([3, 1]);
        let projection = Projection { weight, lora: Some(LowRank { a: down, b: up, scaling: 4.0 }) };
        let input = [0.3, -0.7];
        let got: Vec<f64> =
            Vec::try_from(projection.apply(&Tensor::from_slice(&input).view([1, 2])).view([3])).unwrap();
        let low = 0.5 * input[0] - input[1];
        let want =
            [input[0] + 2.0 * input[1] + 4.0 * 2.0 * low, -input[0] + 0.5 * input[1], 3.0 * input[1] + 4.0 * -low];
        for (got_one, want_one) in got.iter().zip(want) {
            assert!((got_one - want_one).abs() < 1e-12, "{got:?} vs {want:?}");
        }

        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let c = ModelConfig { architecture: Architecture::Llama, ..tiny() };
        let mut model = Decoder::new(&vs.root(), &c);
        let ids = Tensor::from_slice(&[5_i64, 9, 11, 2]).view([1, 4]);
        let before = model.forward(&ids);
        let adapter = model.attach_lora(&vs.root(), 4, 8.0);
        assert_eq!(before, model.forward(&ids), "B starts at zero");
        assert_eq!(adapter.len(), 2 * 7 * c.num_hidden_layers as usize);
        let (name, a) = &adapter[0];
        assert_eq!(
            (name.as_str(), a.size()),
            ("model.layers.0.self_attn.q_proj.lora_A.weight", vec![4, c.hidden_size])
        );
        assert_eq!(vs.variables()["model.layers.1.mlp.down_proj.lora_B.weight"].size(), [c.hidden_size, 4]);
    }

    /// The reward heads read the final hidden state at each row's own last token: padding
    /// after it changes nothing, a row scores as it does alone, and the heads compute what
    /// their definition says from that state (recomputed here from the output layer's input).
    #[test]
    fn reward_heads_read_the_last_real_token() {
        tch::manual_seed(4);
        let vs = nn::VarStore::new(Device::Cpu);
        let c = ModelConfig { architecture: Architecture::Afm, ..tiny() };
        let mut model = Decoder::new(&vs.root(), &c);
        assert!(model.reward(&Tensor::from_slice(&[1_i64]).view([1, 1]), &Tensor::from_slice(&[0_i64])).is_none());
        let heads = prov_train::reward_model::RewardHeads::afm(6);
        model.attach_reward_heads(&vs.root(), &heads);
        let names: Vec<String> = {
            let mut n: Vec<String> = vs.variables().into_keys().filter(|k| k.starts_with("reward.")).collect();
            n.sort();
            n
        };
        assert_eq!(names.len(), 2 + 4 * 4, "{names:?}");
        assert_eq!(vs.variables()["reward.grades.harmlessness.2.weight"].size(), [3, 6]);

        let alone = Tensor::from_slice(&[5_i64, 9, 11]).view([1, 3]);
        let single = model.reward(&alone, &Tensor::from_slice(&[2_i64])).unwrap();
        // The same row padded with two more ids, beside a longer row.
        let batch = Tensor::from_slice(&[5_i64, 9, 11, 0, 0, 3, 4, 5, 6, 7]).view([2, 5]);
        let both = model.reward(&batch, &Tensor::from_slice(&[2_i64, 4])).unwrap();
        let first = both.scores.double_value(&[0]);
        assert!((first - single.scores.double_value(&[0])).abs() < 1e-6, "padding after the last token is not read");
        assert_eq!(both.grades.len(), 4);
        assert_eq!(both.grades[0].size(), [2, 3]);

        // The score is `w·e + b` on the final-normalised state of the last token.
        let e = model.hidden_states(&alone, None).select(1, 2);
        let w = vs.variables()["reward.score.weight"].shallow_clone();
        let b = vs.variables()["reward.score.bias"].shallow_clone();
        let want = (e * w.view([1, -1])).sum(Kind::Float).double_value(&[]) + b.double_value(&[0]);
        assert!((single.scores.double_value(&[0]) - want).abs() < 1e-5);
    }

    #[test]
    fn the_model_is_causal() {
        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let model = Decoder::new(&vs.root(), &tiny());
        let a = Tensor::from_slice(&[5_i64, 9, 11, 3, 7, 1]).view([1, 6]);
        let b = Tensor::from_slice(&[5_i64, 9, 11, 60, 2, 8]).view([1, 6]);
        let (la, lb) = (model.forward(&a), model.forward(&b));
        assert_eq!(la.size(), [1, 6, 61]);
        let prefix = |l: &Tensor| l.narrow(1, 0, 3);
        assert!(prefix(&la).equal(&prefix(&lb)), "the first three positions see only the shared prefix");
        assert!(!la.narrow(1, 3, 1).equal(&lb.narrow(1, 3, 1)));
    }

    #[test]
    fn cached_decoding_gives_the_full_forward_s_logits() {
        tch::manual_seed(5);
        let vs = nn::VarStore::new(Device::Cpu);
        let model = Decoder::new(&vs.root(), &tiny());
        let ids = Tensor::from_slice(&[5_i64, 9, 11, 3, 7, 1, 40, 2, 9, 9, 33, 12]).view([2, 6]);
        let full = model.forward(&ids);
        let mut cache = KvCache::default();
        let mut steps = vec![model.forward_cached(&ids.narrow(1, 0, 3), &mut cache)];
        for t in 3..6 {
            steps.push(model.forward_cached(&ids.narrow(1, t, 1), &mut cache));
        }
        assert_eq!(cache.len(), 6);
        let cached = Tensor::cat(&steps, 1);
        assert_eq!(cached.size(), full.size());
        let gap = (&cached - &full).abs().max().double_value(&[]);
        assert!(gap < 1e-5, "cached and full logits differ by {gap}");
        // Positions matter: the same token at another position gives other logits.
        let again = model.forward_cached(&ids.narrow(1, 5, 1), &mut cache);
        assert!(!again.equal(&steps[3]));
    }

    #[test]
    fn xielu_matches_its_formula() {
        let p = Tensor::from(softplus_inverse(0.8)).view([1]);
        let n = Tensor::from(softplus_inverse(0.3)).view([1]);
        let x = Tensor::from_slice(&[-3.0_f64, -1e-7, 0.0, 2.0]);
        let y: Vec<f64> = Vec::try_from(xielu(&x, &p, &n)).unwrap();
        let by_hand = |x: f64| {
            if x > 0.0 { 0.8 * x * x + 0.5 * x } else { (x.min(XIELU_EPS).exp_m1() - x) * 0.8 + 0.5 * x }
        };
        for (got, x) in y.iter().zip([-3.0, -1e-7, 0.0, 2.0]) {
            assert!((got - by_hand(x)).abs() < 1e-12, "xielu({x}) = {got}, by hand {}", by_hand(x));
        }
    }

    #[test]
    fn rope_rotates_pairs_by_position() {
        let c = ModelConfig { hidden_size: 8, num_attention_heads: 2, num_key_value_heads: 2, ..tiny() };
        let (cos, sin) = rope_tables(&c, 0, 3, Device::Cpu);
        assert_eq!(cos.size(), [3, 4]);
        // Position 0 does not rotate.
        assert!(cos.get(0).allclose(&Tensor::ones([4], (Kind::Float, Device::Cpu)), 0.0, 0.0, false));
        // Position 2, pair 0: angle 2 radians; pair 1: 2 / sqrt(theta) (head width 4).
        let angle = 2.0 / 500_000_f64.sqrt();
        assert!((cos.double_value(&[2, 0]) - 2.0_f64.cos()).abs() < 1e-6);
        assert!((sin.double_value(&[2, 3]) - angle.sin()).abs() < 1e-6);
    }

    #[test]
    fn config_errors_name_the_field() {
        assert_eq!(tiny().check(), Ok(()));
        let bad = ModelConfig { num_key_value_heads: 3, ..tiny() };
        assert_eq!(bad.check().unwrap_err().0, "num_key_value_heads");
        let bad = ModelConfig { init_std: 0.0, ..tiny() };
        assert_eq!(bad.check().unwrap_err().0, "init_std");
    }
}
