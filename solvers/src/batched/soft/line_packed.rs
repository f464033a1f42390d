//! The line-search cost with its row blocks stacked: [`super::cost::LineCost::rows`] as a
//! handful of `(worlds, blocks)` and `(worlds, blocks, dim)` tensor operations per evaluation
//! instead of a few dozen `(worlds)` operations per block.
//!
//! MuJoCo's exact line search (`PrimalSearch`, spec §A5) evaluates the constraint cost and its
//! first two derivatives along `jar + α J s` several times per solver iteration. Written
//! scalar by scalar, each evaluation costs the tape (and, on a GPU, the launches) in proportion
//! to the row slots; the batched reverse sweep spends most of its time in burn-autodiff's
//! per-operation bookkeeping, so the operation count is the cost. Here the α-independent parts
//! of each block (its slots' `jar`, `J s`, D, disc radius or regularized friction, and the
//! tangential sums of an elliptic cone) are stacked once per line search, and an evaluation is
//! the same formulas on whole tensors.
//!
//! Per block the arithmetic is the scalar code's, term for term (`x = jar + α J s`, the same
//! products in the same order, sums over a block's rows left to right, the same zone tests, the
//! unselected branch's denominators kept finite), and the totals add the terms in the rows'
//! order: all terms gathered into that order and summed by one cumulative sum, sequential on
//! burn-ndarray ([`Packed::total`]). The f64 results are the scalar path's to the last bit
//! (the unit test below compares them bit for bit on 256 random worlds), which matters because
//! an unconverged solve (signorini at its iteration budget) amplifies any round-off. On the
//! GPU backends (f32) a cumulative sum may be a parallel scan: agreement there is to round-off.
//!
//! Which kinds are stacked: one-sided rows ([`Kind::Inequality`]), elliptic cones and signorini
//! discs (grouped by `dim`). Friction-loss rows (dof friction, rare) stay scalar.

use burn_tensor::backend::Backend;
use burn_tensor::{Bool, Int, Tensor, TensorData};

use super::cost::{Kind, Row};
use crate::batched::scalar::{M, S};

type T1<B> = Tensor<B, 1>;
type T2<B> = Tensor<B, 2>;
type T3<B> = Tensor<B, 3>;
type B2<B> = Tensor<B, 2, Bool>;

/// One-sided rows `(worlds, n)`.
struct Ineq<B: Backend> {
    x0: T2<B>,
    js: T2<B>,
    d: T2<B>,
    on: B2<B>,
}

/// Signorini discs of one `dim` (`(worlds, blocks, dim)` and `(worlds, blocks)`): radius ρ,
/// the first row's D, and the α-independent `Σ (J s)²`.
struct Disc<B: Backend> {
    x0: T3<B>,
    js: T3<B>,
    d: T2<B>,
    rho: T2<B>,
    on: B2<B>,
    ss: T2<B>,
}

/// Elliptic cones of one `dim`: every row's D `(worlds, blocks, dim)`, the first row's
/// regularized μ, the middle zone's `Dm`, and the α-independent normal and tangential parts
/// `u0 = μ jar₀`, `v0 = μ (J s)₀`, `uu`, `uv`, `vv`.
struct Elliptic<B: Backend> {
    x0: T3<B>,
    js: T3<B>,
    d: T3<B>,
    mu: T2<B>,
    dm: T2<B>,
    on: B2<B>,
    u0: T2<B>,
    v0: T2<B>,
    uu: T2<B>,
    uv: T2<B>,
    vv: T2<B>,
}

/// One term of the scalar path's sum, in its order.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// Column of the one-sided rows.
    Ineq(usize),
    /// Disc group, block.
    Disc(usize, usize),
    /// Elliptic group, block, row within the cone: the bottom zone's term.
    Cone(usize, usize, usize),
    /// Elliptic group, block: the middle zone's term (after the block's rows).
    Middle(usize, usize),
    /// The k-th scalar row (friction loss), in the rows' order.
    Scalar(usize),
}

/// The stacked blocks of one line search.
pub struct Packed<B: Backend> {
    ineq: Option<Ineq<B>>,
    discs: Vec<Disc<B>>,
    cones: Vec<Elliptic<B>>,
    /// The terms in the scalar path's order of addition.
    items: Vec<Item>,
    /// The rows left to the scalar path (friction loss), in order.
    scalar_rows: Vec<usize>,
    worlds: usize,
    device: B::Device,
}

/// One evaluation's terms, per group: `(c, c′, c″)`, `(worlds, n)` for the one-sided rows and
/// discs; for a cone group the bottom zone per row `(worlds, blocks, dim)` and the middle zone
/// per block `(worlds, blocks)`.
pub struct Terms<B: Backend> {
    ineq: Option<[T2<B>; 3]>,
    discs: Vec<[T2<B>; 3]>,
    cones: Vec<([T3<B>; 3], [T2<B>; 3])>,
}

fn mask<B: Backend>(m: &M<B>, w: usize, dev: &B::Device) -> Tensor<B, 1, Bool> {
    match m {
        M::T(t) => t.clone(),
        M::C(b) => T1::<B>::full([w], if *b { 1.0 } else { 0.0 }, dev).greater_elem(0.5),
    }
}

/// `(worlds, n)` from n per-world scalars.
fn stack2<B: Backend>(xs: Vec<T1<B>>) -> T2<B> {
    Tensor::stack(xs, 1)
}

/// `(worlds, blocks, dim)` from blocks × dim per-world scalars.
fn stack3<B: Backend>(xs: Vec<Vec<T1<B>>>) -> T3<B> {
    Tensor::stack(xs.into_iter().map(stack2).collect(), 1)
}

/// `Σ` over the last axis: `(worlds, blocks, dim)` → `(worlds, blocks)`.
fn sum_last<B: Backend>(x: T3<B>) -> T2<B> {
    x.sum_dim(2).squeeze_dim(2)
}

/// `√x` for `x ≥ 0`, 0 where `x = 0` with a finite derivative there (as `cost::safe_sqrt`).
fn safe_sqrt<B: Backend>(x: T2<B>) -> (T2<B>, B2<B>) {
    let pos = x.clone().greater_elem(0.0);
    let t = x.mask_fill(pos.clone().bool_not(), 1.0).sqrt();
    (t.mask_fill(pos.clone().bool_not(), 0.0), pos)
}

/// `a` where `m`, else 0.
fn only<B: Backend, const D: usize>(m: &Tensor<B, D, Bool>, a: Tensor<B, D>) -> Tensor<B, D> {
    a.mask_fill(m.clone().bool_not(), 0.0)
}

/// α per world, broadcastable against `(worlds, blocks)` and `(worlds, blocks, dim)`.
enum Alpha<B: Backend> {
    C(f64),
    T(T2<B>),
}

impl<B: Backend> Alpha<B> {
    fn new(a: &S<B>) -> Self {
        match a {
            S::C(c) => Alpha::C(*c),
            S::T(t) => {
                let w = t.dims()[0];
                Alpha::T(t.clone().reshape([w, 1]))
            }
        }
    }
    fn mul2(&self, x: T2<B>) -> T2<B> {
        match self {
            Alpha::C(c) => x * *c,
            Alpha::T(a) => a.clone() * x,
        }
    }
    /// `(α α) x`.
    fn sq2(&self, x: T2<B>) -> T2<B> {
        match self {
            Alpha::C(c) => x * (c * c),
            Alpha::T(a) => (a.clone() * a.clone()) * x,
        }
    }
    fn mul3(&self, x: T3<B>) -> T3<B> {
        match self {
            Alpha::C(c) => x * *c,
            Alpha::T(a) => {
                let w = a.dims()[0];
                a.clone().reshape([w, 1, 1]) * x
            }
        }
    }
}

impl<B: Backend> Packed<B> {
    /// Stack the packable blocks of `rows` at `jar` (nrow), `js = J s` (nrow) and disc radii
    /// `radius`; `None` when no row slot is a tensor (then the scalar path costs nothing).
    pub fn new(rows: &[Row<B>], radius: &[S<B>], jar: &[S<B>], js: &[S<B>]) -> Option<Self> {
        let like = jar.iter().chain(js).find_map(|s| match s {
            S::T(t) => Some(t.clone()),
            S::C(_) => None,
        })?;
        let (w, dev) = (like.dims()[0], like.device());
        let t = |s: &S<B>| s.tensor(w, &dev);
        let mut ineq: (Vec<T1<B>>, Vec<T1<B>>, Vec<T1<B>>, Vec<Tensor<B, 1, Bool>>) =
            Default::default();
        // Blocks by (kind, dim): first row index.
        let mut discs: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut cones: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut items = Vec::new();
        let mut scalar_rows = Vec::new();
        // The (group, block) a new block of `dim` rows gets.
        let group = |g: &mut Vec<(usize, Vec<usize>)>, dim: usize, i: usize| -> (usize, usize) {
            match g.iter().position(|(d, _)| *d == dim) {
                Some(k) => {
                    g[k].1.push(i);
                    (k, g[k].1.len() - 1)
                }
                None => {
                    g.push((dim, vec![i]));
                    (g.len() - 1, 0)
                }
            }
        };
        for (i, r) in rows.iter().enumerate() {
            match r.kind {
                Kind::Inequality => {
                    items.push(Item::Ineq(ineq.0.len()));
                    ineq.0.push(t(&jar[i]));
                    ineq.1.push(t(&js[i]));
                    ineq.2.push(t(&r.d));
                    ineq.3.push(mask(&r.active, w, &dev));
                }
                Kind::Disc { dim, .. } => {
                    let (g, b) = group(&mut discs, dim, i);
                    items.push(Item::Disc(g, b));
                }
                Kind::Elliptic { dim, .. } => {
                    let (g, b) = group(&mut cones, dim, i);
                    items.extend((0..dim).map(|j| Item::Cone(g, b, j)));
                    items.push(Item::Middle(g, b));
                }
                Kind::FrictionLoss { .. } => {
                    items.push(Item::Scalar(scalar_rows.len()));
                    scalar_rows.push(i);
                }
                Kind::Member => {}
            }
        }
        let ineq = (!ineq.0.is_empty()).then(|| Ineq {
            x0: stack2(ineq.0),
            js: stack2(ineq.1),
            d: stack2(ineq.2),
            on: Tensor::stack(ineq.3, 1),
        });
        let block = |first: &[usize], dim: usize, v: &[S<B>]| -> T3<B> {
            stack3(
                first
                    .iter()
                    .map(|&i| (0..dim).map(|j| t(&v[i + j])).collect())
                    .collect(),
            )
        };
        let discs: Vec<Disc<B>> = discs
            .into_iter()
            .map(|(dim, first)| {
                let js3 = block(&first, dim, js);
                let rho = stack2(first.iter().map(|&i| t(&radius[i])).collect());
                let active: B2<B> = Tensor::stack(
                    first
                        .iter()
                        .map(|&i| mask(&rows[i].active, w, &dev))
                        .collect(),
                    1,
                );
                Disc {
                    x0: block(&first, dim, jar),
                    ss: sum_last(js3.clone() * js3.clone()),
                    js: js3,
                    d: stack2(first.iter().map(|&i| t(&rows[i].d)).collect()),
                    on: rho.clone().greater_elem(0.0).bool_and(active),
                    rho,
                }
            })
            .collect();
        let cones: Vec<Elliptic<B>> = cones
            .into_iter()
            .map(|(dim, first)| {
                let x0 = block(&first, dim, jar);
                let js3 = block(&first, dim, js);
                let d: T3<B> = stack3(
                    first
                        .iter()
                        .map(|&i| (0..dim).map(|j| t(&rows[i + j].d)).collect())
                        .collect(),
                );
                let mu = stack2(first.iter().map(|&i| t(&rows[i].mu)).collect());
                let on: B2<B> = Tensor::stack(
                    first
                        .iter()
                        .map(|&i| mask(&rows[i].active, w, &dev))
                        .collect(),
                    1,
                );
                // μ_j of each friction row (1..dim) per block: a constant (1, blocks, dim − 1).
                let nb = first.len();
                let muj: Vec<f64> = first
                    .iter()
                    .flat_map(|&i| match rows[i].kind {
                        Kind::Elliptic { mu_j, .. } => mu_j[1..dim].to_vec(),
                        _ => unreachable!("grouped as elliptic"),
                    })
                    .collect();
                let muj: T3<B> = Tensor::from_data(TensorData::new(muj, [1, nb, dim - 1]), &dev);
                let u = x0.clone().slice([0..w, 0..nb, 1..dim]) * muj.clone();
                let v = js3.clone().slice([0..w, 0..nb, 1..dim]) * muj;
                let first_of = |x: &T3<B>| x.clone().slice([0..w, 0..nb, 0..1]).squeeze_dim(2);
                let d0 = first_of(&d);
                let mu2 = mu.clone() * mu.clone();
                Elliptic {
                    u0: mu.clone() * first_of(&x0),
                    v0: mu.clone() * first_of(&js3),
                    uu: sum_last(u.clone() * u.clone()),
                    uv: sum_last(u * v.clone()),
                    vv: sum_last(v.clone() * v),
                    dm: d0 / (mu2.clone() * (mu2 + 1.0)),
                    x0,
                    js: js3,
                    d,
                    mu,
                    on,
                }
            })
            .collect();
        if ineq.is_none() && discs.is_empty() && cones.is_empty() {
            return None;
        }
        Some(Self {
            ineq,
            discs,
            cones,
            items,
            scalar_rows,
            worlds: w,
            device: dev,
        })
    }

    /// The rows the scalar path evaluates (friction loss), in order: their terms go to
    /// [`Self::total`].
    pub fn scalar_rows(&self) -> &[usize] {
        &self.scalar_rows
    }

    /// `(c, c′, c″)` per world: every term in the scalar path's order of addition, summed left
    /// to right (one cumulative sum over the terms gathered into that order: the scalar path's
    /// rounding on burn-ndarray). `scalar` holds the terms of [`Self::scalar_rows`].
    pub fn total(&self, terms: Terms<B>, scalar: Vec<[S<B>; 3]>) -> (S<B>, S<B>, S<B>) {
        let (w, dev) = (self.worlds, &self.device);
        // (3, worlds, n) per group, and each group's first column.
        let mut parts: Vec<T3<B>> = Vec::new();
        let mut at = 0usize;
        let mut put = |x: T3<B>| -> usize {
            let first = at;
            at += x.dims()[2];
            parts.push(x);
            first
        };
        let three = |x: [T2<B>; 3]| -> T3<B> { Tensor::stack(x.to_vec(), 0) };
        let ineq_at = terms.ineq.map(|t| put(three(t)));
        let disc_at: Vec<usize> = terms.discs.into_iter().map(|t| put(three(t))).collect();
        let mut cone_at = Vec::new();
        for (bottom, middle) in terms.cones {
            let [_, nb, dim] = bottom[0].dims();
            let b0 = put(three(bottom.map(|x| x.reshape([w, nb * dim]))));
            let m0 = put(three(middle));
            cone_at.push((b0, m0, dim));
        }
        let scalar_at = (!scalar.is_empty()).then(|| {
            let cols: Vec<T2<B>> = scalar
                .iter()
                .map(|t| Tensor::stack::<2>(t.iter().map(|x| x.tensor(w, dev)).collect(), 0))
                .collect();
            put(Tensor::stack(cols, 2))
        });
        let order: Vec<i64> = self
            .items
            .iter()
            .map(|it| {
                (match *it {
                    Item::Ineq(k) => ineq_at.expect("one-sided rows") + k,
                    Item::Disc(g, b) => disc_at[g] + b,
                    Item::Cone(g, b, j) => cone_at[g].0 + b * cone_at[g].2 + j,
                    Item::Middle(g, b) => cone_at[g].1 + b,
                    Item::Scalar(k) => scalar_at.expect("scalar rows") + k,
                }) as i64
            })
            .collect();
        let n = order.len();
        let all: T3<B> = Tensor::cat(parts, 2);
        let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(order, [n]), dev);
        let sums = all
            .select(2, idx)
            .cumsum(2)
            .slice([0..3, 0..w, n - 1..n])
            .reshape([3, w]);
        let k = |q: usize| S::T(sums.clone().slice([q..q + 1, 0..w]).reshape([w]));
        (k(0), k(1), k(2))
    }

    /// Every packed row's terms at α: the cost and its first two derivatives per row (per
    /// block for discs and a cone's middle zone), each exactly the scalar path's.
    pub fn terms(&self, alpha: &S<B>) -> Terms<B> {
        let a = Alpha::new(alpha);
        let ineq = self.ineq.as_ref().map(|g| {
            let x = g.x0.clone() + a.mul2(g.js.clone());
            let q = x.clone().lower_elem(0.0).bool_and(g.on.clone());
            let dx = g.d.clone() * x.clone();
            [
                only(&q, g.d.clone() * 0.5 * x.clone() * x),
                only(&q, dx * g.js.clone()),
                only(&q, g.d.clone() * g.js.clone() * g.js.clone()),
            ]
        });
        let discs = self
            .discs
            .iter()
            .map(|g| {
                let x = g.x0.clone() + a.mul3(g.js.clone());
                let xx = sum_last(x.clone() * x.clone());
                let xs = sum_last(x * g.js.clone());
                let (t, t_pos) = safe_sqrt(xx.clone());
                let stick = (g.d.clone() * t.clone())
                    .lower_equal(g.rho.clone())
                    .bool_and(g.on.clone());
                let slip = stick.clone().bool_not().bool_and(g.on.clone());
                let ts = t.mask_fill(t_pos.bool_not(), 1.0);
                let c_slip = g.rho.clone() * (ts.clone() - g.rho.clone() / (g.d.clone() * 2.0));
                let c1_slip = g.rho.clone() * xs.clone() / ts.clone();
                let t3 = ts.clone() * ts.clone() * ts.clone();
                let c2_slip = g.rho.clone() * (g.ss.clone() / ts - xs.clone() * xs.clone() / t3);
                [
                    only(&slip, c_slip).mask_where(stick.clone(), g.d.clone() * 0.5 * xx),
                    only(&slip, c1_slip).mask_where(stick.clone(), g.d.clone() * xs),
                    only(&slip, c2_slip).mask_where(stick, g.d.clone() * g.ss.clone()),
                ]
            })
            .collect();
        let cones = self
            .cones
            .iter()
            .map(|g| {
                let nn = g.u0.clone() + a.mul2(g.v0.clone());
                let t2 = g.uu.clone() + a.mul2(g.uv.clone() * 2.0) + a.sq2(g.vv.clone());
                let (t, t_pos) = safe_sqrt(t2.clamp_min(0.0));
                let t_zero = t_pos.clone().bool_not();
                let mu = &g.mu;
                let top = t_pos
                    .clone()
                    .bool_and(nn.clone().greater_equal(mu.clone() * t.clone()))
                    .bool_or(t_zero.clone().bool_and(nn.clone().greater_equal_elem(0.0)));
                let bottom = top.clone().bool_not().bool_and(
                    t_pos
                        .clone()
                        .bool_and((mu.clone() * nn.clone() + t.clone()).lower_equal_elem(0.0))
                        .bool_or(t_zero.bool_and(nn.clone().lower_elem(0.0))),
                );
                let middle = top
                    .bool_or(bottom.clone())
                    .bool_not()
                    .bool_and(g.on.clone());
                let bottom = bottom.bool_and(g.on.clone());
                // Bottom zone: every row quadratic, per row.
                let [w, nb, dim] = g.x0.dims();
                let b3: Tensor<B, 3, Bool> = bottom.reshape([w, nb, 1]).expand([w, nb, dim]);
                let x = g.x0.clone() + a.mul3(g.js.clone());
                let dx = g.d.clone() * x.clone();
                let b_c = only(&b3, g.d.clone() * 0.5 * x.clone() * x);
                let b_c1 = only(&b3, dx * g.js.clone());
                let b_c2 = only(&b3, g.d.clone() * g.js.clone() * g.js.clone());
                // Middle zone, per block.
                let ts = t.mask_fill(t_pos.bool_not(), 1.0);
                let uva = g.uv.clone() + a.mul2(g.vv.clone());
                let tp = uva.clone() / ts.clone();
                let tpp = g.vv.clone() / ts.clone() - uva * tp.clone() / (ts.clone() * ts.clone());
                let nmt = nn - mu.clone() * ts;
                let slope = g.v0.clone() - mu.clone() * tp;
                let m_c = g.dm.clone() * 0.5 * nmt.clone() * nmt.clone();
                let m_c1 = g.dm.clone() * nmt.clone() * slope.clone();
                let m_c2 = g.dm.clone() * (slope.clone() * slope - mu.clone() * nmt * tpp);
                (
                    [b_c, b_c1, b_c2],
                    [only(&middle, m_c), only(&middle, m_c1), only(&middle, m_c2)],
                )
            })
            .collect();
        Terms { ineq, discs, cones }
    }
}

#[cfg(test)]
mod tests {
    //! The stacked evaluation against the row-by-row one, bit for bit, on random rows of every
    //! kind, zones and masks.
    use burn_tensor::{Tensor, TensorData};
    use rand::{Rng, SeedableRng};

    use super::super::cost::{Kind, LineCost, Row};
    use crate::batched::scalar::{M, S};
    use crate::batched::NdArrayF64 as B;

    const W: usize = 256;

    fn t(x: Vec<f64>) -> S<B> {
        S::T(Tensor::from_data(
            TensorData::new(x, [W]),
            &Default::default(),
        ))
    }

    fn values(s: &S<B>) -> Vec<f64> {
        match s {
            S::C(c) => vec![*c; W],
            S::T(x) => x.to_data().to_vec::<f64>().unwrap(),
        }
    }

    #[test]
    fn stacked_line_cost_is_the_row_by_row_one_to_the_last_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut r =
            |lo: f64, hi: f64| -> Vec<f64> { (0..W).map(|_| rng.random_range(lo..hi)).collect() };
        let kinds = [
            Kind::Inequality,
            Kind::Disc {
                dim: 3,
                normal: 0,
                mu: 0.5,
            },
            Kind::Member,
            Kind::Member,
            Kind::FrictionLoss { eta: 0.3 },
            Kind::Elliptic {
                dim: 3,
                mu_j: [0.0, 0.8, 0.6, 0.0, 0.0, 0.0],
            },
            Kind::Member,
            Kind::Member,
            Kind::Inequality,
            Kind::Elliptic {
                dim: 4,
                mu_j: [0.0, 0.7, 0.7, 0.05, 0.0, 0.0],
            },
            Kind::Member,
            Kind::Member,
            Kind::Member,
        ];
        let mut rows = Vec::new();
        let (mut jar, mut js, mut radius) = (Vec::new(), Vec::new(), Vec::new());
        for (i, kind) in kinds.iter().enumerate() {
            let act: Vec<f64> = r(0.0, 1.0);
            rows.push(Row::<B> {
                jac: vec![S::C(1.0)],
                d: t(r(0.5, 2.0)),
                r: t(r(0.1, 1.0)),
                aref: S::zero(),
                // Row 8 is active everywhere (a constant mask); the others in most worlds.
                active: if i == 8 {
                    M::C(true)
                } else {
                    match t(act) {
                        S::T(x) => M::T(x.greater_elem(0.2)),
                        S::C(_) => unreachable!(),
                    }
                },
                kind: *kind,
                mu: t(r(0.3, 1.2)),
            });
            jar.push(t(r(-1.0, 1.0)));
            js.push(t(r(-1.0, 1.0)));
            // Disc radii: zero (off) in some worlds.
            radius.push(t(r(-0.5, 1.0).into_iter().map(|x| x.max(0.0)).collect()));
        }
        let (q1, q2) = (t(r(-1.0, 0.0)), t(r(0.5, 1.0)));
        let packed = LineCost::new(&rows, &radius, &jar, &js, q1.clone(), q2.clone());
        assert!(packed.packed.is_some());
        let scalar = LineCost {
            packed: None,
            ..LineCost::new(&rows, &radius, &jar, &js, q1, q2)
        };
        let c0 = scalar.cost0();
        assert_eq!(values(&packed.cost0()), values(&c0));
        let alphas = [
            S::C(0.0),
            S::C(0.37),
            S::C(-1.3),
            t(r(-2.0, 2.0)),
            t(r(0.0, 0.1)),
        ];
        for a in &alphas {
            let (p, s) = (packed.eval(a, &c0), scalar.eval(a, &c0));
            for (x, y) in [(&p.dcost, &s.dcost), (&p.d1, &s.d1), (&p.d2, &s.d2)] {
                let (x, y) = (values(x), values(y));
                assert!(
                    x.iter()
                        .zip(&y)
                        .all(|(u, v)| u.to_bits() == v.to_bits() || u == v),
                    "{x:?} != {y:?}"
                );
            }
        }
    }
}
