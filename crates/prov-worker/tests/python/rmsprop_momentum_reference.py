"""Independent PyTorch reference for Provenant's `rmsprop-momentum` optimizer.

Written from the book's specification only: book/src/afm.md, section "The optimizer:
RMSProp with momentum" and its subsection "The update, operation by operation". It was
written without reading the Rust implementation (nothing under crates/ was consulted), so
that agreement between the two is evidence that both follow the specification.

How the Rust test uses it: crates/prov-worker/tests/rmsprop_momentum_reference.rs builds a
small case (parameters, per-step gradients already after the global clip, the scheduled
learning rates), writes it as ONE JSON object on this script's stdin, runs

    .venv/bin/python crates/prov-worker/tests/python/rmsprop_momentum_reference.py

and compares, bit for bit, the float32 values this script prints with those of the Rust
optimizer after each step.

Input (stdin), one JSON object:

    {"betas": [b1, b2], "eps_square": float, "eps": float, "update_clip": float,
     "clip": "rms" | "norm", "weight_decay": float,
     "weight_decay_scale": "schedule" | "learning-rate",
     "peak_lr": float,                 # eta, the schedule's peak `lr`
     "lrs": [lr(1), lr(2), ...],       # the scheduled learning rate at each step t = 1, 2, ...
     "params": [{"bits": [u32, ...], "shape": [...], "decay": bool,
                 "update_scale": float (optional, default 1: mu, μParam (simple)'s factor)}, ...],
     "grads": [[bits of each parameter's gradient] for each step]}

Every float32 tensor travels as the IEEE-754 bit patterns (u32) of its values, row-major.
A gradient given as `null` means "this parameter has no gradient at this step": it is
skipped and its state left as it was (the specification's last sentence). The step number
t is the global step (the index into `lrs`/`grads`, from 1), also for a parameter that was
skipped at an earlier step.

Output (stdout), one JSON array: for each step, for each parameter,
[param_bits, v_bits, m_bits] after that step, where v is the state `gradient_square_ema`
and m is `update_ema`.

`--self-test` runs checks derived by hand from the specification's formulas, in float64 on
small tensors, and exits non-zero if one fails.
"""

import json
import math
import struct
import sys

import torch

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------
# Exact conversion between u32 bit patterns and float32 tensors (no decimal strings).
# ---------------------------------------------------------------------------------------


def bits_to_tensor(bits, shape):
    """A float32 tensor of `shape` whose values have the IEEE-754 bit patterns `bits`."""
    numel = math.prod(shape)
    if len(bits) != numel:
        raise ValueError(f"{len(bits)} bit patterns for shape {shape} ({numel} values)")
    signed = []
    for b in bits:
        if not isinstance(b, int) or isinstance(b, bool) or not 0 <= b < 2**32:
            raise ValueError(f"not a u32 bit pattern: {b!r}")
        signed.append(b - 2**32 if b >= 2**31 else b)
    as_int32 = torch.tensor(signed, dtype=torch.int32)
    return as_int32.view(torch.float32).reshape(shape).clone()


def tensor_to_bits(t):
    """The IEEE-754 bit patterns (u32, row-major) of a float32 tensor's values."""
    if t.dtype != torch.float32:
        raise ValueError(f"expected float32, got {t.dtype}")
    as_int32 = t.contiguous().reshape(-1).view(torch.int32)
    return [b & 0xFFFFFFFF for b in as_int32.tolist()]


# ---------------------------------------------------------------------------------------
# The optimizer step, operation by operation, as the specification lists it.
# ---------------------------------------------------------------------------------------


def rmsprop_momentum_step(p, g, v, m, t, lr_t, decayed, cfg, mu=1.0):
    """One step for one parameter tensor `p` with gradient `g` (after the global clip).

    `v` (gradient_square_ema) and `m` (update_ema) are updated in place, and so is `p`.
    `t` counts from 1. `lr_t` is the scheduled learning rate lr(t). Every scalar is a Python
    float (double precision); ATen rounds it to the tensors' dtype where it computes. `mu` is
    μParam (simple)'s factor for this parameter (added with the book's paragraph on it, later
    than the rest).
    """
    beta1, beta2 = cfg["betas"]
    eps_square = cfg["eps_square"]
    eps = cfg["eps"]
    c = cfg["update_clip"]
    lam = cfg["weight_decay"]
    eta = cfg["peak_lr"]
    s_t = lr_t / eta  # s(t) = lr(t) / eta, in double precision

    x = torch.mul(g, g)  # x = g * g
    x.add_(eps_square)  # in place, scalar
    v.mul_(beta2).add_(x, alpha=1 - beta2)  # the EMA: one in-place multiply, one fused add
    d2 = 1 - beta2**t  # double precision; Python's float ** int is C's pow
    r = (v / d2).sqrt_()  # division by a scalar, in-place square root
    r.add_(eps)
    u = g / r  # element-wise division
    if cfg["clip"] == "rms":
        n = (u * u).mean().sqrt()  # a 0-dimensional tensor
    elif cfg["clip"] == "norm":
        n = torch.linalg.vector_norm(u, 2)  # u.norm(), a 0-dimensional tensor
    else:
        raise ValueError(f"unknown clip {cfg['clip']!r}")
    u = u / (n / c).clamp_min(1.0)  # division by a 0-dimensional tensor
    m.mul_(beta1).add_(u, alpha=1 - beta1)  # no bias correction
    k = m * mu if mu != 1.0 else m  # μParam (simple); the state m stays unscaled

    if cfg["weight_decay_scale"] == "schedule":
        w = k * eta
        if decayed:
            w.add_(p, alpha=lam)
        w.mul_(s_t)
        p.sub_(w)
    elif cfg["weight_decay_scale"] == "learning-rate":
        w = k.clone()
        if decayed:
            w.add_(p, alpha=lam)
        p.add_(w, alpha=-lr_t)
    else:
        raise ValueError(f"unknown weight_decay_scale {cfg['weight_decay_scale']!r}")


def run(case, dtype=torch.float32):
    """Runs every step of `case` (the input JSON, decoded); returns the output array.

    With dtype float32 the tensors come from and go back to bit patterns. Other dtypes are
    for the self-test only: then `bits` and gradients are plain numbers and the result
    holds plain numbers.
    """
    cfg = case
    lrs = case["lrs"]
    grads = case["grads"]
    if len(lrs) != len(grads):
        raise ValueError(f"{len(lrs)} learning rates for {len(grads)} steps of gradients")

    def to_tensor(values, shape):
        if dtype == torch.float32:
            return bits_to_tensor(values, shape)
        return torch.tensor(values, dtype=dtype).reshape(shape)

    def to_list(tensor):
        if dtype == torch.float32:
            return tensor_to_bits(tensor)
        return tensor.reshape(-1).tolist()

    params, states = [], []
    for spec in case["params"]:
        shape = list(spec["shape"])
        p = to_tensor(spec["bits"], shape)
        params.append((p, bool(spec["decay"]), float(spec.get("update_scale", 1.0))))
        states.append((torch.zeros_like(p), torch.zeros_like(p)))  # v, m: zero at first

    out = []
    for t, (lr_t, step_grads) in enumerate(zip(lrs, grads), start=1):
        if len(step_grads) != len(params):
            raise ValueError(f"step {t}: {len(step_grads)} gradients, {len(params)} parameters")
        step_out = []
        # The parameters one after another, in the model's parameter order.
        for (p, decayed, mu), (v, m), g_values in zip(params, states, step_grads):
            if g_values is not None:  # a parameter without a gradient is skipped
                g = to_tensor(g_values, list(p.shape))
                rmsprop_momentum_step(p, g, v, m, t, lr_t, decayed, cfg, mu)
            step_out.append([to_list(p), to_list(v), to_list(m)])
        out.append(step_out)
    return out


# ---------------------------------------------------------------------------------------
# Self-test: expectations derived by hand from the specification's formulas.
# ---------------------------------------------------------------------------------------


def _config(**overrides):
    cfg = {
        "betas": [0.9, 0.95],
        "eps_square": 1e-30,
        "eps": 0.0,
        "update_clip": 1.0,
        "clip": "rms",
        "weight_decay": 0.1,
        "weight_decay_scale": "schedule",
        "peak_lr": 0.01,
    }
    cfg.update(overrides)
    return cfg


def _one_param(cfg, values, shape, decay, lrs, grads):
    """Runs `run` in float64 on one parameter; returns (p, v, m) as lists after each step."""
    case = dict(cfg, lrs=lrs, params=[{"bits": values, "shape": shape, "decay": decay}])
    case["grads"] = [[g] for g in grads]
    return [tuple(step[0]) for step in run(case, dtype=torch.float64)]


def _f32_bits(x):
    """The float32 bit pattern of the Python float x, rounded to nearest."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _f32(x):
    """The Python float x rounded to float32 (and back to a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def self_test():
    failures = []

    def check(name, got, want, rel=1e-12, abs_=1e-300):
        got, want = list(got), list(want)
        ok = len(got) == len(want) and all(
            math.isclose(a, b, rel_tol=rel, abs_tol=abs_) for a, b in zip(got, want)
        )
        print(f"{'ok  ' if ok else 'FAIL'} {name}: got {got}, want {want}")
        if not ok:
            failures.append(name)

    def sign(x):
        return math.copysign(1.0, x)

    b1, b2, eps_sq, eta, lam = 0.9, 0.95, 1e-30, 0.01, 0.1  # as in _config()
    lr1 = 0.004

    # 1. A scalar (0-dimensional) parameter, first step. v = (1-b2)(g^2 + eps_square);
    #    r = sqrt(v / (1 - b2^1)) = sqrt(g^2 + eps_square) ~ |g|; u = g / r ~ sign(g); the
    #    rms of one value is |u| <= 1, so no clip; m = (1-b1) u;
    #    p' = p - s (eta m + lambda p) (schedule, decayed).
    g, p0 = -0.5, 2.0
    s1 = lr1 / eta
    ((p, v, m),) = _one_param(_config(), [p0], [], True, [lr1], [[g]])
    v_want = (1 - b2) * (g * g + eps_sq)
    u_want = g / math.sqrt(v_want / (1 - b2))
    check("scalar, step 1: v = (1-b2)(g^2+eps_square)", v, [v_want])
    check("scalar, step 1: u = g/sqrt(g^2+eps_square) = sign(g)", [u_want], [-1.0])
    check("scalar, step 1: m = (1-b1) sign(g)", m, [(1 - b1) * -1.0])
    p_want = p0 - s1 * (eta * (1 - b1) * -1.0 + lam * p0)
    check("scalar, step 1: p = p - s(eta m + lambda p)", p, [p_want])

    # 2. A tiny gradient far below 1 still gives |u| = 1 on the first step (the update is
    #    scale free), as long as g^2 is well above eps_square.
    ((p, v, m),) = _one_param(_config(), [0.0], [1], False, [lr1], [[3e-7]])
    check("tiny gradient, step 1: m = (1-b1)", m, [1 - b1], rel=1e-9)

    # 3. rms versus norm. First step, g = [3, -0.002, 7e-5, -40]: u = [1, -1, 1, -1];
    #    rms(u) = 1 = c, no clip: m = (1-b1) u; norm(u) = 2 > c: u / 2, m = (1-b1) u / 2.
    grad = [3.0, -0.002, 7e-5, -40.0]
    u1 = [1.0, -1.0, 1.0, -1.0]
    zeros = [0.0, 0.0, 0.0, 0.0]
    ((_, _, m_rms),) = _one_param(_config(clip="rms"), zeros, [2, 2], False, [lr1], [grad])
    ((_, _, m_norm),) = _one_param(_config(clip="norm"), zeros, [2, 2], False, [lr1], [grad])
    want = [(1 - b1) * x for x in u1]
    check("clip rms, rms(u) = c: no clip, m = (1-b1) u", m_rms, want, rel=1e-9)
    want = [(1 - b1) * x / 2 for x in u1]
    check("clip norm, |u| = 2: m = (1-b1) u / 2", m_norm, want, rel=1e-9)

    # 4. A threshold below the rms: c = 0.25, first step, u = [1, -1, 1, -1] with rms 1:
    #    u / (1 / 0.25) = u / 4, m = (1-b1) u / 4.
    ((_, _, m),) = _one_param(_config(update_clip=0.25), zeros, [4], False, [lr1], [grad])
    check("clip rms, c = 0.25: m = (1-b1) u / 4", m, [(1 - b1) * x / 4 for x in u1], rel=1e-9)

    # 5. An rms above c that comes from the bias correction: a zero gradient at step 1, then
    #    g at step 2. v2 = b2 (1-b2) eps + (1-b2)(g^2 + eps) ~ (1-b2) g^2; d2 = 1 - b2^2;
    #    r = sqrt(v2/d2) ~ |g| / sqrt(1+b2); u ~ sign(g) sqrt(1+b2) (every entry), rms(u) =
    #    sqrt(1+b2) > 1 = c, so the clip makes |u| = 1 exactly: m2 = b1 m1 + (1-b1) sign(g),
    #    and m1 = (1-b1) * 0 / sqrt(eps) = 0.
    g2 = [2.0, -0.5, 0.1]
    grads = [[0.0] * 3, g2]
    steps = _one_param(_config(), [0.0] * 3, [3], False, [lr1, lr1], grads)
    m1, v2, m2 = steps[0][2], steps[1][1], steps[1][2]
    check("zero gradient, step 1: m = 0", m1, [0.0] * 3)
    want = [b2 * (1 - b2) * eps_sq + (1 - b2) * (x * x + eps_sq) for x in g2]
    check("step 2: v = b2(1-b2)eps + (1-b2)(g^2+eps)", v2, want)
    want = [(1 - b1) * sign(x) for x in g2]
    check("step 2: rms(u) = sqrt(1+b2) > 1, clipped: m = (1-b1) sign(g)", m2, want, rel=1e-9)
    #    The same with a threshold c = 10 above the rms: no clip, the bias-corrected u
    #    shows: m2 = (1-b1) sign(g) sqrt(1+b2).
    steps = _one_param(_config(update_clip=10.0), [0.0] * 3, [3], False, [lr1, lr1], grads)
    want = [(1 - b1) * sign(x) * math.sqrt(1 + b2) for x in g2]
    check("step 2, c = 10: no clip, m = (1-b1) sign(g) sqrt(1+b2)", steps[1][2], want, rel=1e-9)
    #    The same with clip: norm: |u| = sqrt(3 (1+b2)), u / (|u| / 1) = sign(g) / sqrt(3).
    steps = _one_param(_config(clip="norm"), [0.0] * 3, [3], False, [lr1, lr1], grads)
    want = [(1 - b1) * sign(x) / math.sqrt(3) for x in g2]
    check("step 2, clip norm: m = (1-b1) sign(g) / sqrt(3)", steps[1][2], want, rel=1e-9)

    # 6. A constant gradient with eps_square = 0: v_t = (1 - b2^t) g^2, so the bias-corrected
    #    root is |g| and u = sign(g) at every step; m_t = (1 - b1^t) sign(g) (no bias
    #    correction of m); with lambda = 0, p_t = p_0 - sum over k of lr(k) m_k. The
    #    threshold c = 10 keeps the clip from hiding a wrong bias correction.
    T, gc = 5, -0.75
    lrs = [0.001 * k for k in range(1, T + 1)]
    cfg = _config(eps_square=0.0, weight_decay=0.0, update_clip=10.0)
    steps = _one_param(cfg, [1.0], [1], True, lrs, [[gc]] * T)
    p_want = 1.0
    for k in range(1, T + 1):
        p_want -= lrs[k - 1] * (1 - b1**k) * -1.0
    check("constant g, 5 steps: v = (1-b2^5) g^2", steps[-1][1], [(1 - b2**T) * gc * gc])
    check("constant g, 5 steps: m = (1-b1^5) sign(g)", steps[-1][2], [(1 - b1**T) * -1.0])
    check("constant g, 5 steps: p = p0 - sum lr(k) m_k", steps[-1][0], [p_want])

    # 7. The two weight-decay readings. First step, g = [1, -1], p = [1, -2], eta = 0.01,
    #    lr(1) = 0.005, so s = 0.5, lambda = 0.1, m = (1-b1) [1, -1].
    #    schedule:      p' = p - s (eta m + lambda p)
    #    learning-rate: p' = p - s eta (m + lambda p)
    #    They differ by (learning-rate minus schedule) s lambda p (1 - eta). Without decay
    #    (a norm or bias) both are p - s eta m.
    pv, gv, lr = [1.0, -2.0], [1.0, -1.0], 0.005
    s = lr / eta
    mv = [(1 - b1) * x for x in gv]
    sched = _config(weight_decay_scale="schedule")
    lr_scale = _config(weight_decay_scale="learning-rate")
    ((p_sched, _, _),) = _one_param(sched, pv, [2], True, [lr], [gv])
    ((p_lr, _, _),) = _one_param(lr_scale, pv, [2], True, [lr], [gv])
    want = [pp - s * (eta * mm + lam * pp) for pp, mm in zip(pv, mv)]
    check("decay, schedule: p - s(eta m + lambda p)", p_sched, want)
    want = [pp - s * eta * (mm + lam * pp) for pp, mm in zip(pv, mv)]
    check("decay, learning-rate: p - s eta (m + lambda p)", p_lr, want)
    diff = [a - b for a, b in zip(p_lr, p_sched)]
    want = [s * lam * pp * (1 - eta) for pp in pv]
    check("decay, difference = s lambda p (1 - eta)", diff, want, rel=1e-9)
    ((p_sched, _, _),) = _one_param(sched, pv, [2], False, [lr], [gv])
    ((p_lr, _, _),) = _one_param(lr_scale, pv, [2], False, [lr], [gv])
    want = [pp - s * eta * mm for pp, mm in zip(pv, mv)]
    check("no decay, schedule: p - s eta m", p_sched, want)
    check("no decay, learning-rate: p - s eta m", p_lr, want)

    # 8. A parameter without a gradient is skipped and its state left as it was; the step
    #    count is global: at step 3 the bias correction is 1 - b2^3, not 1 - b2^2.
    #    With eps_square = 0: v1 = (1-b2) g^2, m1 = (1-b1), v3 = b2 v1 + (1-b2) g^2 =
    #    (1-b2)(1+b2) g^2, r = sqrt(v3 / (1 - b2^3)), u = sqrt((1 - b2^3) / (1 - b2^2)) =
    #    1.0119 (with a per-parameter count it would be 1). The threshold c = 10 keeps the
    #    clip out of it.
    g1 = 0.5
    cfg = _config(eps_square=0.0, weight_decay=0.0, update_clip=10.0)
    steps = _one_param(cfg, [1.0], [1], False, [lr1] * 3, [[g1], None, [g1]])
    check("skipped step 2: p, v, m unchanged", sum(steps[1], []), sum(steps[0], []), 0.0, 0.0)
    u3 = math.sqrt((1 - b2**3) / (1 - b2**2))
    check("step 3 after a skip: v = (1-b2)(1+b2) g^2", steps[2][1], [(1 - b2) * (1 + b2) * g1**2])
    want = [b1 * (1 - b1) + (1 - b1) * u3]
    check("step 3 after a skip: m = b1 m1 + (1-b1) sqrt((1-b2^3)/(1-b2^2))", steps[2][2], want)

    # 9. Bit patterns travel exactly: -0, the smallest subnormal, 1, infinity, a NaN with a
    #    payload, the largest finite float32, a negative NaN; and a 0-d tensor.
    patterns = [0x80000000, 0x00000001, 0x3F800000, 0x7F800000, 0x7FC00001, 0x7F7FFFFF, 0xFFFFFFFF]
    back = tensor_to_bits(bits_to_tensor(patterns, [len(patterns)]))
    check("bit patterns round trip", back, patterns, rel=0.0, abs_=0.0)
    back = tensor_to_bits(bits_to_tensor([0x3FC00000], []))
    check("a 0-d tensor round trips", back, [0x3FC00000], rel=0.0, abs_=0.0)

    # 10. The float32 path (the main mode: bits in, bits out) agrees with the float64 one
    #     to float32 precision, from the same float32 starting values.
    vals = [_f32(x) for x in [0.3, -1.2, 0.05, 2.0]]
    grads = [[0.1, -0.2, 0.3, -0.4], [0.5, 0.25, -0.125, 1.5], [-0.3, 0.0, 0.7, 0.01]]
    grads = [[_f32(x) for x in row] for row in grads]
    cfg = _config(clip="rms")
    lrs = [0.002, 0.006, 0.01]
    want = _one_param(cfg, vals, [2, 2], True, lrs, grads)
    param = {"bits": [_f32_bits(x) for x in vals], "shape": [2, 2], "decay": True}
    case = dict(cfg, lrs=lrs, params=[param])
    case["grads"] = [[[_f32_bits(x) for x in row]] for row in grads]
    got = run(case)
    for k in range(3):
        as_floats = [bits_to_tensor(b, [len(b)]).tolist() for b in got[k][0]]
        for name, a, b in zip(("p", "v", "m"), as_floats, want[k]):
            check(f"float32 run, step {k + 1}, {name} close to float64", a, b, 1e-5, 1e-9)

    if failures:
        print(f"{len(failures)} check(s) failed: {failures}", file=sys.stderr)
        return 1
    print("all self-test checks passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:]:
        print(f"usage: {argv[0]} [--self-test] < case.json", file=sys.stderr)
        return 2
    case = json.load(sys.stdin)
    json.dump(run(case), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
