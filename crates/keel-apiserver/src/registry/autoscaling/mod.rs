//! autoscaling/v2 and v1: HorizontalPodAutoscalers, stored once (as v2) and served in both
//! versions, v2 first (the preferred version).

pub mod conversion;
pub mod defaults;
mod go_json;
pub mod hpa;
#[cfg(test)]
mod tests;
pub mod validation;

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![
        &hpa::HorizontalPodAutoscalersV2,
        &hpa::HorizontalPodAutoscalersV1,
    ]
}
