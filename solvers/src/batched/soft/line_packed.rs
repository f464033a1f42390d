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
//! unselected branch's denominators kept finite), and the totals are accumulated row by row in
//! the rows' order, each row's term a slice of its group's tensor ([`Totals`]): the f64 results
//! are the scalar path's to the last bit, which an unconverged solve (signorini at its iteration
//! budget) would otherwise amplify.
//!
//! Which kinds are stacked: one-sided rows ([`Kind::Inequality`]), elliptic cones and signorini
//! discs (grouped by `dim`). Friction-loss rows (dof friction, rare) stay scalar.

use burn_tensor::backend::Backend;
use burn_tensor::{Bool, Tensor, TensorData};

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

/// Where a row's term lies in the stacked tensors.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Column of the one-sided rows.
    Ineq(usize),
    /// Disc group, block.
    Disc(usize, usize),
    /// Elliptic group, block, row within the cone.
    Cone(usize, usize, usize),
}

/// The stacked blocks of one line search.
pub struct Packed<B: Backend> {
    ineq: Option<Ineq<B>>,
    discs: Vec<Disc<B>>,
    cones: Vec<Elliptic<B>>,
    /// Per row slot: where its term is (`None`: a scalar row, or a cone's member whose term is
    /// its block's middle-zone term, added after the block's rows).
    slots: Vec<Option<Slot>>,
}

/// One evaluation's terms, per group: `(c, c′, c″)`, `(worlds, n)` for the one-sided rows and
/// discs; for a cone group the bottom zone per row `(worlds, blocks, dim)` and the middle zone
/// per block `(worlds, blocks)`.
pub struct Terms<B: Backend> {
    ineq: Option<[T2<B>; 3]>,
    discs: Vec<[T2<B>; 3]>,
    cones: Vec<([T3<B>; 3], [T2<B>; 3])>,
}

/// Running sums `(c, c′, c″)` per world, added to in the rows' order.
pub struct Totals<B: Backend> {
    acc: [Option<T2<B>>; 3],
    worlds: usize,
    device: B::Device,
}

impl<B: Backend> Totals<B> {
    fn add_col(&mut self, k: usize, x: T2<B>) {
        self.acc[k] = Some(match self.acc[k].take() {
            None => x,
            Some(a) => a + x,
        });
    }

    /// Add a scalar row's terms.
    pub fn add_scalar(&mut self, c: [S<B>; 3]) {
        let w = self.worlds;
        for (k, x) in c.into_iter().enumerate() {
            match x {
                S::C(0.0) => {}
                S::C(v) => {
                    self.acc[k] = Some(match self.acc[k].take() {
                        None => Tensor::full([w, 1], v, &self.device),
                        Some(a) => a + v,
                    })
                }
                S::T(t) => self.add_col(k, t.reshape([w, 1])),
            }
        }
    }

    /// The sums per world.
    pub fn finish(self) -> (S<B>, S<B>, S<B>) {
        let w = self.worlds;
        let [a, b, c] = self.acc;
        let f = |x: Option<T2<B>>| x.map_or(S::zero(), |t| S::T(t.reshape([w])));
        (f(a), f(b), f(c))
    }
}

fn col<B: Backend>(x: &T2<B>, j: usize) -> T2<B> {
    let w = x.dims()[0];
    x.clone().slice([0..w, j..j + 1])
}

fn col3<B: Backend>(x: &T3<B>, b: usize, j: usize) -> T2<B> {
    let w = x.dims()[0];
    x.clone().slice([0..w, b..b + 1, j..j + 1]).reshape([w, 1])
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
        let mut slots: Vec<Option<Slot>> = vec![None; rows.len()];
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
                    slots[i] = Some(Slot::Ineq(ineq.0.len()));
                    ineq.0.push(t(&jar[i]));
                    ineq.1.push(t(&js[i]));
                    ineq.2.push(t(&r.d));
                    ineq.3.push(mask(&r.active, w, &dev));
                }
                Kind::Disc { dim, .. } => {
                    let (g, b) = group(&mut discs, dim, i);
                    slots[i] = Some(Slot::Disc(g, b));
                }
                Kind::Elliptic { dim, .. } => {
                    let (g, b) = group(&mut cones, dim, i);
                    for j in 0..dim {
                        slots[i + j] = Some(Slot::Cone(g, b, j));
                    }
                }
                Kind::FrictionLoss { .. } | Kind::Member => {}
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
        let discs = discs
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
        let cones = cones
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
        Some(Self {
            ineq,
            discs,
            cones,
            slots,
        })
    }

    /// Empty running sums for `worlds` worlds.
    pub fn totals(&self, like: &S<B>) -> Totals<B> {
        let worlds = match like {
            S::T(t) => t.dims()[0],
            S::C(_) => self.worlds(),
        };
        Totals {
            acc: [None, None, None],
            worlds,
            device: self.device(),
        }
    }

    fn any(&self) -> &T3<B> {
        self.discs
            .first()
            .map(|d| &d.x0)
            .or(self.cones.first().map(|c| &c.x0))
            .unwrap_or_else(|| unreachable!("only the one-sided rows"))
    }

    fn worlds(&self) -> usize {
        match &self.ineq {
            Some(g) => g.x0.dims()[0],
            None => self.any().dims()[0],
        }
    }

    fn device(&self) -> B::Device {
        match &self.ineq {
            Some(g) => g.x0.device(),
            None => self.any().device(),
        }
    }

    /// Whether row `i`'s term is packed (a disc's member rows are not: their block's term is
    /// the first row's).
    pub fn has(&self, i: usize) -> bool {
        self.slots[i].is_some()
    }

    /// Add row `i`'s terms (and, after a cone's last row, its middle-zone term) to `tot`.
    pub fn add(&self, terms: &Terms<B>, i: usize, tot: &mut Totals<B>) {
        match self.slots[i] {
            None => {}
            Some(Slot::Ineq(k)) => {
                let t = terms.ineq.as_ref().expect("one-sided rows");
                for (q, x) in t.iter().enumerate() {
                    tot.add_col(q, col(x, k));
                }
            }
            Some(Slot::Disc(g, b)) => {
                for (q, x) in terms.discs[g].iter().enumerate() {
                    tot.add_col(q, col(x, b));
                }
            }
            Some(Slot::Cone(g, b, j)) => {
                let (bottom, middle) = &terms.cones[g];
                for (q, x) in bottom.iter().enumerate() {
                    tot.add_col(q, col3(x, b, j));
                }
                if j + 1 == self.cones[g].x0.dims()[2] {
                    for (q, x) in middle.iter().enumerate() {
                        tot.add_col(q, col(x, b));
                    }
                }
            }
        }
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
