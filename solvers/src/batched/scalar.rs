//! One scalar per world: [`S`], a value that is either a host constant shared by every world or
//! a burn tensor of shape `(worlds)`, with arithmetic that folds constants.
//!
//! The batched engine writes the cpu engine's formulas scalar by scalar (each body, dof and
//! contact unrolled on the host when the model is compiled), so that the tensor program has the
//! cpu code's order of operations and IEEE f64 results agree with it to round-off. Folding keeps
//! the program short: a structural zero of the model (the angular part of a slide dof, a
//! world-fixed plane) never becomes a tensor operation, and `x · 1`, `x + 0` are `x` exactly.
//! Folding is exact except that `NaN · 0` folds to `0`; divergence is judged on the state.
//!
//! Masks ([`M`]) select per world without arithmetic on the unselected branch
//! (`Tensor::mask_where`), so reverse mode never multiplies a NaN derivative of an inactive
//! branch by zero; callers keep denominators of inactive branches finite.

use std::ops::{Add, Div, Mul, Neg, Sub};

use burn_tensor::backend::Backend;
use burn_tensor::{Bool, Tensor};

/// A per-world scalar: a host constant or a `(worlds)` tensor.
#[derive(Debug, Clone)]
pub enum S<B: Backend> {
    /// The same value in every world.
    C(f64),
    /// One value per world, shape `(worlds)`.
    T(Tensor<B, 1>),
}

/// A per-world boolean: a host constant or a `(worlds)` bool tensor.
#[derive(Debug, Clone)]
pub enum M<B: Backend> {
    /// The same in every world.
    C(bool),
    /// One per world.
    T(Tensor<B, 1, Bool>),
}

impl<B: Backend> From<f64> for S<B> {
    fn from(x: f64) -> Self {
        S::C(x)
    }
}

impl<B: Backend> S<B> {
    /// Zero.
    pub fn zero() -> Self {
        S::C(0.0)
    }

    /// The constant, if this is one.
    pub fn constant(&self) -> Option<f64> {
        match self {
            S::C(c) => Some(*c),
            S::T(_) => None,
        }
    }

    /// As a `(worlds)` tensor like `like` (shape and device).
    pub fn tensor_like(&self, like: &Tensor<B, 1>) -> Tensor<B, 1> {
        match self {
            S::T(t) => t.clone(),
            S::C(c) => Tensor::full(like.shape(), *c, &like.device()),
        }
    }

    /// As a `(worlds)` tensor on `device`.
    pub fn tensor(&self, worlds: usize, device: &B::Device) -> Tensor<B, 1> {
        match self {
            S::T(t) => t.clone(),
            S::C(c) => Tensor::full([worlds], *c, device),
        }
    }

    fn map(&self, c: impl Fn(f64) -> f64, t: impl Fn(Tensor<B, 1>) -> Tensor<B, 1>) -> Self {
        match self {
            S::C(x) => S::C(c(*x)),
            S::T(x) => S::T(t(x.clone())),
        }
    }

    /// √x.
    pub fn sqrt(&self) -> Self {
        self.map(f64::sqrt, |t| t.sqrt())
    }

    /// ⌊x⌋ (`f64::floor`; no derivative: an index, not a value).
    pub fn floor(&self) -> Self {
        self.map(f64::floor, |t| t.floor())
    }

    /// ⌈x⌉ (`f64::ceil`; no derivative: an index, not a value).
    pub fn ceil(&self) -> Self {
        self.map(f64::ceil, |t| t.ceil())
    }

    /// |x|.
    pub fn abs(&self) -> Self {
        self.map(f64::abs, |t| t.abs())
    }

    /// min(x, y) per world (y where x ≥ y, as `f64::min` for numbers). Two tensors combine
    /// as `x·[x < y] + y·[x ≥ y]` with each factor a `mask_fill` of zeros (exact, up to the
    /// sign of a zero), which costs less than `mask_where` on burn-ndarray.
    pub fn min(&self, y: &S<B>) -> Self {
        let lt = self.lt(y);
        match (self, y, &lt) {
            (S::T(a), S::T(b), M::T(m)) => S::T(
                a.clone().mask_fill(m.clone().bool_not(), 0.0)
                    + b.clone().mask_fill(m.clone(), 0.0),
            ),
            _ => lt.select(self, y),
        }
    }

    /// sin x.
    pub fn sin(&self) -> Self {
        self.map(f64::sin, |t| t.sin())
    }

    /// cos x.
    pub fn cos(&self) -> Self {
        self.map(f64::cos, |t| t.cos())
    }

    /// min(x, c) for a constant c.
    pub fn min_c(&self, c: f64) -> Self {
        self.map(|x| x.min(c), |t| t.clamp_max(c))
    }

    /// max(x, c) for a constant c.
    pub fn max_c(&self, c: f64) -> Self {
        self.map(|x| x.max(c), |t| t.clamp_min(c))
    }

    /// x^p for a constant exponent p (`f64::powf` per element on burn-ndarray).
    pub fn powf_c(&self, p: f64) -> Self {
        self.map(|x| x.powf(p), |t| t.powf_scalar(p))
    }

    /// x ≥ y per world.
    pub fn ge(&self, y: &S<B>) -> M<B> {
        self.lt(y).not()
    }

    /// x < y per world.
    pub fn lt(&self, y: &S<B>) -> M<B> {
        match (self, y) {
            (S::C(a), S::C(b)) => M::C(a < b),
            (S::T(a), S::C(b)) => M::T(a.clone().lower_elem(*b)),
            (S::C(a), S::T(b)) => M::T(b.clone().greater_elem(*a)),
            (S::T(a), S::T(b)) => M::T(a.clone().lower(b.clone())),
        }
    }

    /// x ≤ y per world.
    pub fn le(&self, y: &S<B>) -> M<B> {
        self.gt(y).not()
    }

    /// x > y per world.
    pub fn gt(&self, y: &S<B>) -> M<B> {
        y.lt(self)
    }

    /// x == c per world (exact).
    pub fn eq_c(&self, c: f64) -> M<B> {
        match self {
            S::C(a) => M::C(*a == c),
            S::T(a) => M::T(a.clone().equal_elem(c)),
        }
    }
}

impl<B: Backend> M<B> {
    /// Logical not.
    pub fn not(&self) -> Self {
        match self {
            M::C(b) => M::C(!b),
            M::T(t) => M::T(t.clone().bool_not()),
        }
    }

    /// Whether any world is true (a readback for a tensor).
    pub fn any_true(&self) -> bool {
        match self {
            M::C(b) => *b,
            M::T(t) => t.clone().any().to_data().iter::<bool>().any(|x| x),
        }
    }

    /// Logical and.
    pub fn and(&self, o: &M<B>) -> Self {
        match (self, o) {
            (M::C(false), _) | (_, M::C(false)) => M::C(false),
            (M::C(true), x) | (x, M::C(true)) => x.clone(),
            (M::T(a), M::T(b)) => M::T(a.clone().bool_and(b.clone())),
        }
    }

    /// Logical or.
    pub fn or(&self, o: &M<B>) -> Self {
        match (self, o) {
            (M::C(true), _) | (_, M::C(true)) => M::C(true),
            (M::C(false), x) | (x, M::C(false)) => x.clone(),
            (M::T(a), M::T(b)) => M::T(a.clone().bool_or(b.clone())),
        }
    }

    /// Per world: `a` where true, else `b`. Only the selected value carries a derivative.
    ///
    /// A constant branch is written into the other with `mask_fill` (one pass, no constant
    /// tensor); two tensor branches use `mask_where`, which costs several times an add on
    /// burn-ndarray.
    pub fn select(&self, a: &S<B>, b: &S<B>) -> S<B> {
        match self {
            M::C(true) => a.clone(),
            M::C(false) => b.clone(),
            M::T(m) => match (a, b) {
                (S::C(x), S::C(y)) if x == y => a.clone(),
                (S::C(x), S::C(y)) => {
                    S::T(Tensor::full(m.shape(), *y, &m.device()).mask_fill(m.clone(), *x))
                }
                (S::T(at), S::C(y)) => S::T(at.clone().mask_fill(m.clone().bool_not(), *y)),
                (S::C(x), S::T(bt)) => S::T(bt.clone().mask_fill(m.clone(), *x)),
                (S::T(at), S::T(bt)) => S::T(bt.clone().mask_where(m.clone(), at.clone())),
            },
        }
    }

    /// 1 where true, 0 where false.
    pub fn indicator(&self) -> S<B> {
        match self {
            M::C(b) => S::C(if *b { 1.0 } else { 0.0 }),
            M::T(t) => S::T(t.clone().float()),
        }
    }
}

/// The four operator impls of one binary operation. The owned form is the core: it moves its
/// tensors into burn, so that burn-ndarray computes in place into an operand it holds alone
/// (a temporary) instead of allocating; the reference forms clone (a reference count) first.
macro_rules! binop {
    ($tr:ident, $f:ident, $cc:expr, $tc:ident, $ct:expr, $fold:expr) => {
        impl<B: Backend> $tr<S<B>> for S<B> {
            type Output = S<B>;
            fn $f(self, o: S<B>) -> S<B> {
                #[allow(clippy::redundant_closure_call)]
                if let Some(r) = ($fold)(&self, &o) {
                    return r;
                }
                match (self, o) {
                    (S::C(a), S::C(b)) => S::C($cc(a, b)),
                    (S::T(a), S::C(b)) => S::T(a.$tc(b)),
                    #[allow(clippy::redundant_closure_call)]
                    (S::C(a), S::T(b)) => S::T(($ct)(a, b)),
                    (S::T(a), S::T(b)) => S::T(a.$f(b)),
                }
            }
        }
        impl<B: Backend> $tr<&S<B>> for &S<B> {
            type Output = S<B>;
            fn $f(self, o: &S<B>) -> S<B> {
                self.clone().$f(o.clone())
            }
        }
        impl<B: Backend> $tr<&S<B>> for S<B> {
            type Output = S<B>;
            fn $f(self, o: &S<B>) -> S<B> {
                self.$f(o.clone())
            }
        }
        impl<B: Backend> $tr<S<B>> for &S<B> {
            type Output = S<B>;
            fn $f(self, o: S<B>) -> S<B> {
                self.clone().$f(o)
            }
        }
        impl<B: Backend> $tr<f64> for &S<B> {
            type Output = S<B>;
            fn $f(self, o: f64) -> S<B> {
                self.clone().$f(S::C(o))
            }
        }
        impl<B: Backend> $tr<f64> for S<B> {
            type Output = S<B>;
            fn $f(self, o: f64) -> S<B> {
                self.$f(S::C(o))
            }
        }
    };
}

fn is(x: &S<impl Backend>, c: f64) -> bool {
    matches!(x, S::C(v) if *v == c)
}

binop!(
    Add,
    add,
    |a: f64, b: f64| a + b,
    add_scalar,
    // c + t = t + c exactly.
    |a: f64, b: Tensor<B, 1>| b.add_scalar(a),
    |x: &S<B>, y: &S<B>| {
        if is(y, 0.0) {
            Some(x.clone())
        } else if is(x, 0.0) {
            Some(y.clone())
        } else {
            None
        }
    }
);
binop!(
    Sub,
    sub,
    |a: f64, b: f64| a - b,
    sub_scalar,
    // c − t = (−t) + c exactly (IEEE subtraction adds the negation).
    |a: f64, b: Tensor<B, 1>| b.neg().add_scalar(a),
    |x: &S<B>, y: &S<B>| {
        if is(y, 0.0) {
            Some(x.clone())
        } else if is(x, 0.0) {
            Some(-y)
        } else {
            None
        }
    }
);
binop!(
    Mul,
    mul,
    |a: f64, b: f64| a * b,
    mul_scalar,
    // c · t = t · c exactly.
    |a: f64, b: Tensor<B, 1>| b.mul_scalar(a),
    |x: &S<B>, y: &S<B>| {
        if is(x, 0.0) || is(y, 0.0) {
            Some(S::C(0.0))
        } else if is(y, 1.0) {
            Some(x.clone())
        } else if is(x, 1.0) {
            Some(y.clone())
        } else if is(y, -1.0) {
            Some(-x)
        } else if is(x, -1.0) {
            Some(-y)
        } else {
            None
        }
    }
);
binop!(
    Div,
    div,
    |a: f64, b: f64| a / b,
    div_scalar,
    // 1 / t is `recip` (1/x on every backend in f64); other constants divide a full tensor.
    |a: f64, b: Tensor<B, 1>| if a == 1.0 {
        b.recip()
    } else {
        Tensor::full(b.shape(), a, &b.device()).div(b)
    },
    |x: &S<B>, y: &S<B>| {
        if is(y, 1.0) {
            Some(x.clone())
        } else {
            None
        }
    }
);

impl<B: Backend> Neg for &S<B> {
    type Output = S<B>;
    fn neg(self) -> S<B> {
        self.map(|x| -x, |t| t.neg())
    }
}

impl<B: Backend> Neg for S<B> {
    type Output = S<B>;
    fn neg(self) -> S<B> {
        match self {
            S::C(x) => S::C(-x),
            S::T(t) => S::T(t.neg()),
        }
    }
}
