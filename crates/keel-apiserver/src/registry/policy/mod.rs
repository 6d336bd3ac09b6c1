//! policy/v1: PodDisruptionBudgets.

mod pdb;

use super::Strategy;

pub use pdb::PodDisruptionBudgets;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&PodDisruptionBudgets]
}
