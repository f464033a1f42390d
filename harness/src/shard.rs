//! Sharded sweeps (issue 21): `contactlab run FILE --shard I/N` runs a deterministic 1/N of an
//! experiment's work, so that a sweep too large for one machine runs as N independent
//! processes (a SLURM job array, [`crate::slurm`]) whose results folders
//! `contactlab merge` combines into one ([`crate::merge`]).
//!
//! # Which cells a shard runs
//!
//! An experiment's work is a sequence of **units** in grid order: a cell, or a group of cells
//! that must run together (the control-synthesis study's batched `autodiff` instances, which
//! are one batch of worlds; the gradient study's cells of one problem, which share its
//! rollouts). Unit `u` (0-based, numbered in the order of each unit's first cell in the grid)
//! belongs to shard `(u mod N) + 1`. The assignment depends only on the expanded grid: not on
//! which cells an earlier run already finished (a resumed shard runs the same cells), not on
//! the thread count, not on the machine. Round-robin over the grid order spreads every scene,
//! formulation and timestep over the shards, so shards take similar times.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::str::FromStr;

/// One shard of N: `index` in 1..=`count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based shard number.
    pub index: usize,
    /// Number of shards, ≥ 1.
    pub count: usize,
}

impl Shard {
    /// Whether unit `unit` (0-based, grid order; module doc) belongs to this shard.
    pub fn owns(&self, unit: usize) -> bool {
        unit % self.count == self.index - 1
    }

    /// Keep the items of `items` whose unit this shard owns; `key` names an item's unit (items
    /// with equal keys are one unit, numbered by first appearance).
    pub fn select<T, K: Eq + Hash>(&self, items: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
        let units = unit_numbers(items.iter().map(&key));
        items
            .into_iter()
            .zip(units)
            .filter(|(_, u)| self.owns(*u))
            .map(|(t, _)| t)
            .collect()
    }
}

/// `select` for an optional shard: everything without one.
pub fn select<T, K: Eq + Hash>(
    shard: Option<&Shard>,
    items: Vec<T>,
    key: impl Fn(&T) -> K,
) -> Vec<T> {
    match shard {
        Some(s) => s.select(items, key),
        None => items,
    }
}

/// The unit number of each key: equal keys share the number of their first appearance, new
/// keys count up from 0.
pub fn unit_numbers<K: Eq + Hash>(keys: impl Iterator<Item = K>) -> Vec<usize> {
    let mut seen: HashMap<K, usize> = HashMap::new();
    keys.map(|k| {
        let next = seen.len();
        *seen.entry(k).or_insert(next)
    })
    .collect()
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A `--shard` value that is not `I/N` with 1 ≤ I ≤ N.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--shard '{0}': expected I/N with 1 <= I <= N, e.g. 2/8 for the second of eight shards")]
pub struct ShardParseError(pub String);

impl FromStr for Shard {
    type Err = ShardParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ShardParseError(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("2/3".parse::<Shard>().unwrap().to_string(), "2/3");
        for bad in ["0/3", "4/3", "1/0", "3", "a/b", "1/2/3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_partition_the_units_round_robin() {
        // Keys: units a, b, a, c, b, d -> numbers 0 1 0 2 1 3.
        let keys = ["a", "b", "a", "c", "b", "d"];
        assert_eq!(unit_numbers(keys.iter()), vec![0, 1, 0, 2, 1, 3]);
        let mut all: Vec<usize> = Vec::new();
        for index in 1..=3 {
            let s = Shard { index, count: 3 };
            let mine = s.select((0..keys.len()).collect(), |&i| keys[i]);
            // A unit never splits across shards.
            for &i in &mine {
                for (j, k) in keys.iter().enumerate() {
                    if *k == keys[i] {
                        assert!(mine.contains(&j));
                    }
                }
            }
            all.extend(mine);
        }
        all.sort_unstable();
        assert_eq!(all, (0..keys.len()).collect::<Vec<_>>());
        // Shard 1 of 3 owns units 0 and 3: items 0, 2 (a) and 5 (d).
        let s = Shard { index: 1, count: 3 };
        assert_eq!(s.select((0..6).collect(), |&i| keys[i]), vec![0, 2, 5]);
    }
}
